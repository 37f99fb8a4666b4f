import Dispatch
import DiskCacheLocking
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension DiskCache {
    /// Something `verify` found wrong.
    public struct Problem: Hashable, Sendable, CustomStringConvertible {
        public enum Kind: String, Hashable, Sendable {
            case missingMetadata, unreadableMetadata, keyMismatch, metadataMismatch
            case missingBody, bodySizeMismatch, checksumMismatch, symbolicLink
            case orphanFile, temporaryFile, wrongPermissions
            case journalTornTail, journalCorruptRegion, journalMissing
        }
        public var kind: Kind
        /// The file concerned, if one is.
        public var path: String?
        /// The entry's key, when its metadata could be read.
        public var key: String?
        public var detail: String

        public var description: String {
            var text = "\(kind.rawValue): \(detail)"
            if let key { text += " (key \(key.prefix(80).debugDescription))" }
            if let path { text += " [\(path)]" }
            return text
        }
    }

    /// What `verify` checked and found, and what a repair did.
    public struct VerificationReport: Hashable, Sendable {
        public var entriesChecked = 0
        /// Body bytes read and checksummed.
        public var bytesChecked: Int64 = 0
        public var problems: [Problem] = []
        /// What the repair did, one sentence each (empty unless repairing).
        public var repairs: [String] = []
        /// True when nothing is wrong (after a repair: when nothing was left unrepaired).
        public var isHealthy: Bool { problems.isEmpty }
    }

    /// Checks every entry (metadata parses, key matches its hash, metadata matches the journal,
    /// body present with the right size and checksum), looks for files no journal record vouches
    /// for, and checks permissions. With `repair`, removes bad entries (journaled) and orphan
    /// files, restores permissions, rewrites the journal, and reports what it did; the report's
    /// `problems` then lists what was found (all of it repaired).
    ///
    /// What opening the cache already repaired (a torn journal tail, skipped corrupt records, a
    /// journal rebuilt by scan) is reported too, from ``Statistics/recovery``, until the journal
    /// has been rewritten (by a repair or ``compact()``): a verify after a repair that left
    /// nothing is healthy.
    ///
    /// - Complexity: reads every file of the cache.
    public func verify(repair: Bool = false, progress: ((_ done: Int, _ total: Int) -> Void)? = nil) throws -> VerificationReport {
        try throwIfClosed()
        // Let background recovery (the orphan scan after an unclean shutdown) finish first.
        maintenance.sync {}
        let entries = state.withLock { $0.index.entries.map { ($0.key, $0.value) } }.sorted { $0.0 < $1.0 }
        let findings = Verifier(layout: layout, entries: entries, hasher: configuration.keyHasher).run(progress: progress)
        var report = VerificationReport(entriesChecked: findings.entriesChecked, bytesChecked: findings.bytesChecked,
                                        problems: findings.problems)
        // What the open found in the journal is reported until a compaction (a repair makes
        // one) has rewritten the journal: after that the damage is gone.
        let (recovery, journalRewritten) = state.withLock { ($0.statistics.recovery, $0.journalGeneration > 0) }
        if recovery.truncatedBytes > 0 && !journalRewritten {
            report.problems.append(Problem(kind: .journalTornTail, path: layout.journal, key: nil,
                                           detail: "\(recovery.truncatedBytes) bytes after the last good record"))
            report.repairs.append("Cut \(recovery.truncatedBytes) bytes of torn journal tail (when the cache was opened)")
        }
        if recovery.corruptRegions > 0 && !journalRewritten {
            report.problems.append(Problem(kind: .journalCorruptRegion, path: layout.journal, key: nil,
                                           detail: "\(recovery.corruptRegions) damaged regions skipped"))
        }
        guard repair else { return report }

        for (hash, entry) in findings.badEntries {
            if try remove(hash, reason: .corrupt, key: nil, where: { $0 == entry }) {
                report.repairs.append("Removed the damaged entry \(hash.hexName)")
            }
        }
        var removedOrphans = 0
        for orphan in findings.orphans {
            let removed = stripe(orphan.hash).mutex.withLock { _ -> Bool in
                let entry = state.withLock { $0.index[orphan.hash] }
                let vouched = entry.map { $0.slot == orphan.slot && (orphan.kind == .meta || !$0.isInline) } ?? false
                guard !vouched, case .success = Syscall.unlink(orphan.path) else { return false }
                return true
            }
            if removed { removedOrphans += 1 }
        }
        if removedOrphans > 0 { report.repairs.append("Removed \(removedOrphans) orphan files") }
        for (path, mode) in findings.permissions {
            guard case .success = Syscall.chmod(path, mode) else { continue }
            report.repairs.append("Set mode \(String(mode, radix: 8)) on \(path)")
        }
        try compact()
        report.repairs.append("Rewrote the journal (\(count) entries)")
        return report
    }

    /// Rewrites the journal now as one record per live entry (it is also done in the background
    /// when most of the journal is redundant).
    ///
    /// #### Implementation details
    /// Writes `journal.tmp`, fsyncs it, renames it over `journal`, fsyncs the directory.
    public func compact() throws {
        try flushPendingAccess()
        let result = maintenance.sync { Result { () throws(DiskCacheError) in try compactJournalNow() } }
        try result.get()
    }

    /// The journal's size in bytes, how many records it holds, and how many of those a
    /// compaction would drop.
    public var journalStatistics: (bytes: Int64, records: Int, redundantRecords: Int) {
        state.withLock { ($0.journalLength, $0.journalRecords, max(0, $0.journalRecords - $0.index.count)) }
    }
}

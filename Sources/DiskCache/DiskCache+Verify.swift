public import Foundation
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
            /// A file (not a directory) where one of the cache's directories belongs.
            case wrongFileType
            /// One of the cache's directories (a shard, `tmp/`) is missing.
            case missingDirectory
            case journalTornTail, journalCorruptRegion, journalMissing
            /// `SHARED` is missing, not the page this library wrote, or not the file the
            /// instances that have the cache open share (removed or replaced under them): their
            /// writes fail until they all close; the next open then writes it afresh.
            case damagedSharedPage
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
        /// What was seen that is not a problem: leftovers the next open removes by itself, a
        /// cache that was not closed cleanly. One sentence each.
        public var notes: [String] = []
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
    /// has been rewritten (by a repair or ``compact()-2glz5``): a verify after a repair that left
    /// nothing is healthy.
    ///
    /// - Complexity: reads every file of the cache.
    public func verify(repair: Bool = false, progress: ((_ done: Int, _ total: Int) -> Void)? = nil) throws -> VerificationReport {
        try throwIfClosed()
        // On the maintenance queue, so after background recovery (the orphan scan after an
        // unclean shutdown) and with no compaction or sweep of this instance meanwhile; in shared
        // mode also as the one housekeeper, so that no other instance compacts either (its
        // `journal.tmp` would look like a leftover).
        let result = maintenance.sync {
            Result { () throws(DiskCacheError) -> VerificationReport in
                // Nil when another instance (another process's) kept the housekeeping lock
                // past the lock timeout: a long sweep or verify there, or a stopped process.
                guard let report = try asHousekeeper(wait: true, { () throws(DiskCacheError) in
                    try verifyPass(repair: repair, progress: progress)
                }) else { throw housekeepingLockTimeout() }
                return report
            }
        }
        var report = try result.get()
        if repair {
            try compact()
            report.repairs.append("Rewrote the journal (\(count) entries)")
        }
        return report
    }

    /// What a verify throws when it could not become the housekeeper (shared mode only: see
    /// ``asHousekeeper(wait:_:)``).
    private func housekeepingLockTimeout() -> DiskCacheError {
        sharedRegion?.timeoutError("the housekeeping lock (another instance sweeps, compacts or verifies)")
            ?? DiskCacheError(code: .lockTimeout, message: "Could not take the housekeeping lock; nothing was done", path: layout.root)
    }

    /// ``verify(repair:progress:)-4b4nk`` but the journal rewrite, as the one housekeeper.
    private func verifyPass(repair: Bool, progress: ((Int, Int) -> Void)?) throws(DiskCacheError) -> VerificationReport {
        // Behind the journal (see `CacheState.isBehind`) every file of an entry stored since
        // would look like an orphan.
        let entries = try state.withLock { state throws(DiskCacheError) in
            guard !state.isBehind else { throw state.behindError() }
            return state.index.entries.map { ($0.key, $0.value) }
        }.sorted { $0.0 < $1.0 }
        // Stores and removals go on meanwhile (here and, in shared mode, in other instances):
        // what they changed while it was read is no finding.
        let settle = Verifier.Settle(
            isCurrent: { hash, entry in self.isCurrent(hash, entry) },
            isOrphan: { hash, slot, kind, path in
                (try? self.withStripe(hash) { self.isVouched(hash, slot: slot, kind: kind) == false && self.layout.directory.exists(path) })
                    ?? false
            })
        let findings = Verifier(layout: layout, entries: entries, hasher: configuration.keyHasher, settle: settle).run(progress: progress)
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
            if try remove(hash, reason: .corrupt, key: nil, where: { $0.isSameCommit(as: entry) }) {
                report.repairs.append("Removed the damaged entry \(hash.hexName)")
            }
        }
        var removedOrphans = 0
        for orphan in findings.orphans {
            let removed = try withStripe(orphan.hash) { () -> Bool in
                isVouched(orphan.hash, slot: orphan.slot, kind: orphan.kind) == false && layout.directory.removeEntryFile(orphan.path)
            }
            if removed { removedOrphans += 1 }
        }
        if removedOrphans > 0 { report.repairs.append("Removed \(removedOrphans) orphan files") }
        for path in findings.brokenDirectories {
            // With every writer held off: a store must not land between the move and the mkdir.
            let result = try withAllStripes { () -> Result<Void, SyscallError> in restoreDirectory(path) }
            if case .success = result {
                report.repairs.append("Made \(path) a directory of the cache again (a link there was removed, never its target; anything else was moved into tmp/)")
            }
        }
        if let path = findings.brokenSharedPage, sharedRegion == nil {
            // Exclusive: no instance shares the cache while this one has it. (A shared open
            // moved it aside itself, when it found no instance open.)
            if case .success = Opener.moveAside(path, layout) {
                report.repairs.append("Moved aside what was in place of \(path), which was not a regular file (a link there was removed, never its target)")
            }
        }
        for path in findings.leftovers {
            layout.directory.removeTree(path)
            report.repairs.append("Removed \(path)")
        }
        for (path, mode) in findings.permissions {
            guard case .success = layout.directory.chmod(path, mode) else { continue }
            report.repairs.append("Set mode \(String(mode, radix: 8)) on \(path)")
        }
        return report
    }

    /// Makes `path` (a shard or `tmp/`) a real directory again: a link there is removed (never
    /// its target), a file moved into `tmp/` (or, for `tmp/` itself, removed), and the cache
    /// directory synced so the new directory is durable before a store is acknowledged into it.
    func restoreDirectory(_ path: String) -> Result<Void, SyscallError> {
        let directory = layout.directory
        let cleared: Result<Void, SyscallError>
        if directory.lstat(path).isDirectory {
            cleared = .success(())
        } else if path == layout.temp {
            cleared = directory.unlink(path).orMissing
        } else {
            cleared = Opener.moveAside(path, layout)
        }
        return cleared.flatMap { directory.mkdir(path, 0o700).orExisting }.flatMap { directory.fsyncDirectory(layout.root) }
    }

    /// Rewrites the journal now as one record per live entry (it is also done in the background
    /// when most of the journal is redundant).
    ///
    /// #### Implementation details
    /// Writes `journal.tmp`, fsyncs it, renames it over `journal`, fsyncs the directory.
    public func compact() throws {
        try flushPendingAccess()
        let result = maintenance.sync { Result { () throws(DiskCacheError) in try compactJournalNow(wait: true) } }
        try result.get()
    }

    /// The journal's size in bytes, how many records it holds, and how many of those a
    /// compaction would drop.
    public var journalStatistics: (bytes: Int64, records: Int, redundantRecords: Int) {
        state.withLock { ($0.journalLength, $0.journalRecords, max(0, $0.journalRecords - $0.index.count)) }
    }
}

extension DiskCache {
    /// ``restoreMark(directory:kind:applicationVersion:)`` with the kind and application version
    /// that what is left of the old mark still names, if any.
    public static func restoreMark(directory: URL) throws -> [String] {
        try restoreMark(directory: directory, kind: nil, applicationVersion: nil)
    }

    /// Marks a cache again whose `VERSION` file was lost or damaged (deleted, overwritten, swapped
    /// with `LOCK`), so that it opens: the open then rebuilds or checks everything else as usual
    /// (a damaged journal is moved aside and the index rebuilt from the entry files).
    ///
    /// The new mark names the cache's ``Configuration/kind`` and
    /// ``Configuration/applicationVersion`` when `kind` and `applicationVersion` give them (nil:
    /// not given), or else when what is left of the old mark still says them (its `kind` and
    /// `application` lines, in `VERSION` or, swapped, in `LOCK`): the cache then opens for its
    /// own kind, with its entries, as before the damage. A mark that names neither is taken by
    /// the next open that names a kind and asks no application version (see
    /// docs/on-disk-format.md); one that asks for a version refuses it.
    ///
    /// Only a directory that is recognisably a cache is marked: at least half of its 256 shard
    /// directories are there and every other name in it is one the cache uses. Anything else is
    /// refused with `.notACache` and left as it was. Returns what it did, one sentence each
    /// (empty when the mark was fine).
    ///
    /// #### Errors
    /// `.notACache` (not recognisably a cache), `.newerFormat` (a mark of a newer format is never
    /// replaced), `.invalidArgument` (a kind that is not 1 to 64 ASCII letters, digits, `-`, `_`
    /// or `.`, or a negative application version), `.locked` (the cache is open), or an I/O error.
    ///
    /// #### Implementation details
    /// Takes the cache's locks like an open, then writes `VERSION` to a temporary file, fsyncs
    /// it, renames it into place and fsyncs the directory.
    public static func restoreMark(directory: URL, kind: String?, applicationVersion: Int?) throws -> [String] {
        let root = Layout(root: directory.path).root
        if let kind, !FormatMarker.isValidKind(kind) {
            throw DiskCacheError(code: .invalidArgument,
                                 message: "The cache's kind \(kind.debugDescription) is not 1 to 64 ASCII letters, digits, '-', '_' or '.'")
        }
        if let applicationVersion, applicationVersion < 0 {
            throw DiskCacheError(code: .invalidArgument, message: "The application version \(applicationVersion) is negative")
        }
        let names = try Syscall.listDirectory(root).get(orThrow: "list the cache directory", path: root)
        let was: String
        switch try FormatMarker.readRefusingNewer(root: root) {
        case .marked, .legacy:
            return []
        case .missing:
            was = "it was missing"
        case .damaged(let what):
            was = "it held \(what)"
        }
        guard FormatMarker.isRecognisablyACache(names) else {
            throw DiskCacheError(code: .notACache,
                                 message: "The directory is not recognisably a cache (fewer than 128 shard directories, or names a cache does not use), so it is not marked as one",
                                 path: root)
        }
        // Before the locks are taken: taking them writes `LOCK`, which may hold the old mark.
        let salvaged = FormatMarker.salvage(root: root)
        let (markKind, markApplication) = (kind ?? salvaged.kind, applicationVersion ?? salvaged.application)
        let cacheDirectory = try CacheDirectory.open(root).get(orThrow: "open the cache directory", path: root)
        let layout = Layout(directory: cacheDirectory)
        let locks = try Opener.takeLocks(layout)
        defer { withExtendedLifetime(locks) {} }
        try Opener.writeVersion(layout, application: markApplication, kind: markKind)
        let naming = [markKind.map { "kind \($0)" }, markApplication.map { "application version \($0)" }].compactMap { $0 }
        return ["Wrote a new VERSION file (\(was))" + (naming.isEmpty ? "" : ", naming \(naming.joined(separator: " and "))")]
    }
}

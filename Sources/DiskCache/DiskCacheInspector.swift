public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Read-only access to a cache directory, for tools: it never creates, writes, truncates or
/// repairs anything, and refuses a cache another process has open.
///
/// It replays the journal as an open would (without cutting a torn tail, which it reports).
/// It checks that no process has the cache open, but does not keep the lock: an application
/// starting meanwhile opens its cache as usual (what the inspector then reads may be a moment
/// out of date, and a `verify` may report a file that a write was just committing).
public final class DiskCacheInspector: Sendable {
    /// What the journal and the volume say about the cache.
    public struct Summary: Hashable, Sendable {
        public var entries = 0
        /// Sum of body sizes.
        public var logicalSize: Int64 = 0
        /// Entries and journal at block granularity (what the disk capacity limits).
        public var diskUsage: Int64 = 0
        public var journalSize: Int64 = 0
        public var journalRecords = 0
        /// Records a compaction would drop.
        public var redundantRecords = 0
        public var formatVersion = Layout.formatVersion
        public var blockSize: Int64 = 4096
        public var volume: DiskCache.VolumeSpace?
        /// Bytes after the journal's last good record (cut at the next open).
        public var truncatedTailBytes = 0
        public var corruptRegions = 0
        /// False when the journal is missing (the next open rebuilds it by scanning).
        public var hasJournal = true
        /// The last session closed the cache cleanly.
        public var wasCleanlyClosed = true
    }

    public let directory: URL
    public let summary: Summary
    let layout: Layout
    let index: Index

    /// - Throws: ``DiskCacheError`` with code `.notFound`, `.notADirectory`, `.permissionDenied`,
    ///   `.notACache`, `.locked` or `.newerFormat`.
    public init(directory: URL) throws {
        var layout = Layout(root: directory.path)
        self.directory = directory
        var info = stat()
        if stat(layout.root, &info) != 0 {
            let error = Errno.current
            if error == .noSuchFileOrDirectory {
                throw DiskCacheError(code: .notFound, message: "There is no cache here", path: layout.root)
            }
            throw DiskCacheError.io(error, "look at the cache directory", path: layout.root)
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw DiskCacheError(code: .notADirectory, message: "The path is not a directory", path: layout.root)
        }
        guard Syscall.access(layout.root, R_OK | X_OK) else {
            throw DiskCacheError(code: .permissionDenied, message: "The cache directory cannot be read by this process", path: layout.root)
        }
        var summary = Summary()
        switch FileIO.readAll(layout.versionFile, limit: 256) {
        case .success(let bytes?):
            guard let version = Int(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw DiskCacheError(code: .notACache, message: "The cache's VERSION file is unreadable", path: layout.versionFile)
            }
            guard version <= Layout.formatVersion else {
                throw DiskCacheError(code: .newerFormat,
                                     message: "The cache has format version \(version); this tool reads up to \(Layout.formatVersion)",
                                     path: layout.root)
            }
            summary.formatVersion = version
            // A format-1 cache is read where its files are; opening it for writing migrates it.
            layout = Layout(root: layout.root, version: version)
        default:
            throw DiskCacheError(code: .notACache, message: "The directory is not a cache (it has no VERSION file)", path: layout.root)
        }

        self.layout = layout
        // Refuse a cache that is open; the probe's lock goes with its descriptor at the end of
        // this block. The lock file is never created.
        if case .success(let fd) = Syscall.open(layout.lockFile, O_RDONLY | O_NOFOLLOW | O_NONBLOCK) {
            let probe = FileDescriptor(fd)
            if case .failure(let error) = Syscall.lockExclusive(fd) {
                if error == .wouldBlock {
                    var owner = ""
                    if case .success(let bytes?) = FileIO.readAll(layout.lockFile, limit: 64) {
                        owner = " by process " + String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                    }
                    throw DiskCacheError(code: .locked, message: "The cache is open\(owner); inspect it after it closes", path: layout.root)
                }
                throw DiskCacheError.io(error, "lock the cache directory", path: layout.lockFile)
            }
            _ = probe
        }

        if case .success(let fs) = Syscall.statvfs(layout.root) {
            let unit = Int64(fs.f_frsize > 0 ? fs.f_frsize : fs.f_bsize)
            summary.blockSize = unit
            summary.volume = DiskCache.VolumeSpace(available: Int64(fs.f_bavail) * unit, total: Int64(fs.f_blocks) * unit)
        }
        var index = Index(blockSize: summary.blockSize)
        switch FileIO.readAll(layout.journal, limit: Int.max) {
        case .success(let bytes?):
            switch bytes.withUnsafeBytes({ Journal.checkHeader($0) }) {
            case .newerVersion(let version):
                throw DiskCacheError(code: .newerFormat, message: "The journal has version \(version); this tool reads up to \(Journal.journalVersion)",
                                     path: layout.journal)
            case .unreadable:
                summary.hasJournal = false
            case .valid:
                let replay = bytes.withUnsafeBytes { Journal.replay($0) { index.apply($0) } }
                summary.journalRecords = replay.records
                summary.truncatedTailBytes = replay.truncatedBytes
                summary.corruptRegions = replay.corruptRegions
                summary.wasCleanlyClosed = replay.endedCleanly
            }
            summary.journalSize = Int64(bytes.count)
        case .success(nil), .failure:
            summary.hasJournal = false
        }
        summary.entries = index.count
        summary.logicalSize = index.logicalSize
        summary.diskUsage = index.diskUsage + roundUp(summary.journalSize, summary.blockSize)
        summary.redundantRecords = max(0, summary.journalRecords - index.count)
        self.index = index
        self.summary = summary
    }

    /// Every entry the journal vouches for whose metadata can be read, in no particular order.
    public func entries() -> [DiskCache.Entry] {
        index.entries.compactMap { hash, entry in metadata(hash, entry).map { DiskCache.Entry($0, entry) } }
    }

    /// The entry for `key` (expired or not), if the journal vouches for it and its metadata reads.
    public func entry(for key: String) -> DiskCache.Entry? {
        guard let (hash, entry) = lookup(key), let meta = metadata(hash, entry), meta.key == key else { return nil }
        return DiskCache.Entry(meta, entry)
    }

    /// The value for `key` (expired or not), only if it passes every check a read makes.
    public func data(for key: String) -> Data? {
        guard let (hash, entry) = lookup(key), let meta = metadata(hash, entry), meta.key == key,
              meta.checksum == entry.checksum, meta.size == entry.size else { return nil }
        let body: [UInt8]
        if let inline = meta.inlineBody {
            body = inline
        } else {
            guard case .success(let bytes?) = FileIO.readAll(layout.bodyFile(hash, slot: entry.slot), limit: Int(meta.size)),
                  bytes.count == Int(meta.size) else { return nil }
            body = bytes
        }
        guard body.withUnsafeBytes({ Checksum.xxh3($0) }) == meta.checksum else { return nil }
        return Data(body)
    }

    /// The raw `.meta` file of `key`'s entry: a binary property list.
    public func metadataPropertyList(for key: String) -> Data? {
        guard let (hash, entry) = lookup(key),
              case .success(let bytes?) = FileIO.readAll(layout.metaFile(hash, slot: entry.slot), limit: IndexEntry.maximumMetaSize),
              let meta = bytes.withUnsafeBytes({ EntryMetadata.decode($0) }), meta.key == key
        else { return nil }
        return Data(bytes)
    }

    /// Checks every entry and file as ``DiskCache/verify(repair:progress:)`` does, without repairing.
    public func verify(progress: ((_ done: Int, _ total: Int) -> Void)? = nil) -> DiskCache.VerificationReport {
        let entries = index.entries.map { ($0.key, $0.value) }.sorted { $0.0 < $1.0 }
        let findings = Verifier(layout: layout, entries: entries, hasher: .xxh3).run(progress: progress)
        var report = DiskCache.VerificationReport(entriesChecked: findings.entriesChecked, bytesChecked: findings.bytesChecked,
                                                  problems: findings.problems)
        if !summary.hasJournal {
            report.problems.append(DiskCache.Problem(kind: .journalMissing, path: layout.journal, key: nil,
                                                     detail: "the journal is missing or unreadable; opening the cache rebuilds it"))
        }
        if summary.truncatedTailBytes > 0 {
            report.problems.append(DiskCache.Problem(kind: .journalTornTail, path: layout.journal, key: nil,
                                                     detail: "\(summary.truncatedTailBytes) bytes after the last good record"))
        }
        if summary.corruptRegions > 0 {
            report.problems.append(DiskCache.Problem(kind: .journalCorruptRegion, path: layout.journal, key: nil,
                                                     detail: "\(summary.corruptRegions) damaged regions"))
        }
        if case .success(let names) = Syscall.listDirectory(layout.temp) {
            for (name, _) in names {
                report.problems.append(DiskCache.Problem(kind: .temporaryFile, path: layout.tempFile(name), key: nil,
                                                         detail: "left by an interrupted write"))
            }
        }
        return report
    }

    private func lookup(_ key: String) -> (KeyHash, IndexEntry)? {
        let hash = KeyHasher.xxh3.hash(key)
        return index[hash].map { (hash, $0) }
    }

    private func metadata(_ hash: KeyHash, _ entry: IndexEntry) -> EntryMetadata? {
        guard case .success(let bytes?) = FileIO.readAll(layout.metaFile(hash, slot: entry.slot), limit: IndexEntry.maximumMetaSize)
        else { return nil }
        return bytes.withUnsafeBytes { EntryMetadata.decode($0) }
    }
}

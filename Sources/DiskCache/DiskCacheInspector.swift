public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Read-only access to a cache directory, for tools: it never creates, writes, truncates or
/// repairs anything (the locks a ``verify(progress:)`` of a shared cache takes in `SHARED` are
/// its one change, and they go with it), and refuses a cache another process has open unless
/// asked to read it anyway (`whileOpen`).
///
/// It replays the journal as an open would (without cutting a torn tail, which it reports).
/// It checks that no process has the cache open without taking a lock an opener would fail
/// on, and keeps none: an application starting meanwhile opens its cache as usual (what the
/// inspector then reads may be a moment out of date; a `verify` of a cache open exclusively
/// may report a file that a write held up for over a quarter of a second was committing).
///
/// **A cache that is open** (`whileOpen: true`) is read as a snapshot: the journal as it was
/// when the inspector was made. Entries replaced or removed since then may no longer read
/// (``entries()`` skips them; ``readValue(for:pieceSize:_:)`` reports them as damaged, and a
/// caller should make a new inspector and try again); a read never returns bytes that were not
/// stored for its key. A torn journal tail is then an append in progress, not damage, and is not
/// reported.
public final class DiskCacheInspector: Sendable {
    /// What the journal and the volume say about the cache.
    public struct Summary: Hashable, Sendable {
        public var entries = 0
        /// Sum of body sizes.
        public var logicalSize: Int64 = 0
        /// Entries and journal at block granularity (what the disk capacity limits).
        public var diskUsage: Int64 = 0
        /// Bytes of the journal's records (and of a torn tail), without the zeros an open cache
        /// writes ahead of them.
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
        /// Set when the cache was open in a running process when it was read (with `whileOpen`):
        /// the process id its `LOCK` names, "shared" when instances share it (see
        /// ``DiskCache/Sharing``), or "" when it names none.
        public var openBy: String?
    }

    public let directory: URL
    public let summary: Summary
    let layout: Layout
    let index: Index

    /// - Parameters:
    ///   - directory: the cache directory (links in its path are followed).
    ///   - whileOpen: read a cache a running process has open as a snapshot, instead of
    ///     refusing it.
    /// - Throws: ``DiskCacheError`` with code `.notFound`, `.notADirectory`, `.permissionDenied`,
    ///   `.notACache`, `.locked` (unless `whileOpen`) or `.newerFormat`.
    public init(directory: URL, whileOpen: Bool = false) throws {
        var layout = Layout(root: directory.path)
        self.directory = directory
        var info = stat()
        if stat(layout.root, &info) != 0 {
            let error = SyscallError.current
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
        switch try FormatMarker.readRefusingNewer(root: layout.root) {
        case .marked(let version, _, _), .legacy(let version):
            summary.formatVersion = version
        case .missing:
            throw DiskCacheError(code: .notACache, message: "The directory is not a cache (it has no VERSION file)", path: layout.root)
        case .damaged(let what):
            throw DiskCacheError(code: .notACache, message: "The directory's VERSION file is not a cache's mark (\(what))",
                                 path: layout.versionFile)
        }
        // A format-1 cache is read where its files are; opening it for writing migrates it.
        let directory = try CacheDirectory.open(layout.root).get(orThrow: "open the cache directory", path: layout.root)
        layout = Layout(directory: directory, version: summary.formatVersion)

        self.layout = layout
        // Refuse a cache that is open (unless asked to read it anyway).
        if let owner = try Self.openedBy(layout) {
            guard whileOpen else {
                let by = owner.isEmpty ? "" : owner == "shared" ? " by instances sharing it" : " by process " + owner
                throw DiskCacheError(code: .locked, message: "The cache is open\(by); inspect it after it closes", path: layout.root)
            }
            summary.openBy = owner
        }

        if case .success(let fs) = Syscall.statvfs(layout.root) {
            let unit = Int64(fs.f_frsize > 0 ? fs.f_frsize : fs.f_bsize)
            summary.blockSize = unit
            summary.volume = DiskCache.VolumeSpace(available: Int64(fs.f_bavail) * unit, total: Int64(fs.f_blocks) * unit)
        }
        var index = Index(blockSize: summary.blockSize)
        var writtenAhead = 0
        switch FileIO.readAll(layout.journal, limit: Int.max, in: layout.directory) {
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
                // In a cache that is open, bytes after the last whole record are an append in progress.
                summary.truncatedTailBytes = summary.openBy == nil ? replay.truncatedBytes : 0
                summary.corruptRegions = replay.corruptRegions
                summary.wasCleanlyClosed = replay.endedCleanly
                writtenAhead = replay.writtenAhead
            }
            // The records (and any torn tail), not the zeros an open cache writes ahead of them.
            summary.journalSize = Int64(bytes.count - writtenAhead)
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
            guard case .success(let bytes?) = FileIO.readAll(layout.bodyFile(hash, slot: entry.slot), limit: Int(meta.size), in: layout.directory),
                  bytes.count == Int(meta.size) else { return nil }
            body = bytes
        }
        guard body.withUnsafeBytes({ Checksum.xxh3($0) }) == meta.checksum else { return nil }
        return Data(body)
    }

    /// Hands `key`'s value (expired or not) to `consume` in pieces of at most `pieceSize` bytes,
    /// holding no more than one piece in memory; false when there is no such entry or its
    /// files belong to another key with the same hash. As with ``DiskCache/chunks(for:chunkSize:)``,
    /// the body's checksum is checked before the **last** piece is handed over: a mismatch, or a
    /// body file shorter than recorded, throws ``DiskCacheError/Code/corruptEntry`` instead, after
    /// the other pieces went (discard them). Metadata or a body file that is missing or does not
    /// match the journal throws it before anything is handed over.
    public func readValue(for key: String, pieceSize: Int = 1 << 20,
                          _ consume: (UnsafeRawBufferPointer) throws -> Void) throws -> Bool {
        try DiskCache.checkChunkSize(pieceSize)
        guard let (hash, entry) = lookup(key) else { return false }
        guard let meta = metadata(hash, entry) else {
            throw DiskCacheError(code: .corruptEntry, message: "The entry's metadata file is missing or damaged",
                                 path: layout.metaFile(hash, slot: entry.slot))
        }
        guard meta.key == key else { return false }
        guard meta.checksum == entry.checksum, meta.size == entry.size else {
            throw DiskCacheError(code: .corruptEntry, message: "The entry's metadata is not what the journal recorded",
                                 path: layout.metaFile(hash, slot: entry.slot))
        }
        if let inline = meta.inlineBody {
            guard inline.withUnsafeBytes({ Checksum.xxh3($0) }) == meta.checksum else {
                throw DiskCacheError(code: .corruptEntry, message: "The stored body does not match its checksum",
                                     path: layout.metaFile(hash, slot: entry.slot))
            }
            try inline.withUnsafeBytes { all in
                var start = 0
                repeat {
                    let end = min(all.count, start + pieceSize)
                    try consume(UnsafeRawBufferPointer(rebasing: all[start..<end]))
                    start = end
                } while start < all.count
            }
            return true
        }
        let path = layout.bodyFile(hash, slot: entry.slot)
        let file: OpenFile
        switch layout.directory.open(path, FileIO.readFlags) {
        case .success(let value): file = value
        case .failure(let error) where error == .noSuchFileOrDirectory || error == .tooManySymbolicLinks || FileIO.isNotAFile(error):
            throw DiskCacheError(code: .corruptEntry, message: "The entry's body file is missing or not a file", path: path)
        case .failure(let error): throw DiskCacheError.io(error, "open the body", path: path)
        }
        guard var pieces = BodyPieces(file, size: Int64(meta.size), checksum: meta.checksum) else {
            throw DiskCacheError(code: .ioFailure, message: "Out of memory for a checksum state", errno: ENOMEM)
        }
        defer { pieces.close() }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(min(Int64(pieceSize), max(1, pieces.size))), alignment: 64)
        defer { buffer.deallocate() }
        repeat {
            let piece = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<Int(min(Int64(buffer.count), pieces.size - pieces.offset))])
            switch pieces.read(into: piece) {
            case .success:
                try consume(UnsafeRawBufferPointer(piece))
            case .failure(.short):
                throw DiskCacheError(code: .corruptEntry, message: "The stored body is shorter than its entry records", path: path)
            case .failure(.mismatch):
                throw DiskCacheError(code: .corruptEntry, message: "The stored body does not match its checksum", path: path)
            case .failure(.io(let error)):
                throw DiskCacheError.io(error, "read the body", path: path)
            }
        } while !pieces.isDone
        return true
    }

    /// The raw `.meta` file of `key`'s entry: a binary property list.
    public func metadataPropertyList(for key: String) -> Data? {
        guard let (hash, entry) = lookup(key),
              case .success(let bytes?) = FileIO.readAll(layout.metaFile(hash, slot: entry.slot), limit: IndexEntry.maximumMetaSize, in: layout.directory),
              let meta = bytes.withUnsafeBytes({ EntryMetadata.decode($0) }), meta.key == key
        else { return nil }
        return Data(bytes)
    }

    /// Checks every entry and file as ``DiskCache/verify(repair:progress:)-4b4nk`` does, without repairing.
    /// On a cache a running process has open (read `whileOpen`), what changes meanwhile is no
    /// finding: once the whole cache was read, three fresh snapshots of the journal are taken,
    /// the second 20 ms after the first and the third 250 ms after that, and each finding is
    /// kept only if all three still confirm it; a
    /// `journal.tmp` is taken for a compaction in progress. In a cache its instances share
    /// (``DiskCache/Sharing/shared``), a file is then reported as an orphan only if the journal,
    /// read again holding the locks its writers hold (the opening lock and the file's key
    /// stripe in `SHARED`), still vouches for no such file. Those stripes are tried, never
    /// waited for, for up to 5 s (then the files are named in a note, not reported); opens and
    /// closes of the cache wait only while the journal is read under them. `SHARED` is never
    /// created.
    public func verify(progress: ((_ done: Int, _ total: Int) -> Void)? = nil) -> DiskCache.VerificationReport {
        let entries = index.entries.map { ($0.key, $0.value) }.sorted { $0.0 < $1.0 }
        // A cache open in a running process changes while it is read: a finding stands only if
        // fresh snapshots of the journal, taken after everything was read, still say the same
        // (a few, a little apart, so that a store between writing its files and committing them
        // has committed). One set of snapshots serves every finding.
        let snapshots = Snapshots()
        // Snapshots apart in time cannot tell an orphan from the files of a writer held up
        // (descheduled, or waiting for the filesystem) for longer than they are apart, between
        // writing them and committing them or between committing and removing the old slot's.
        // In shared mode the writers' locks can: see `SharedLocks`.
        func vouchesForNone(_ index: Index, _ hash: KeyHash, _ slot: UInt8, _ kind: ShardScanner.FileKind) -> Bool {
            !(index[hash]?.vouches(forSlot: slot, kind: kind) ?? false)
        }
        var unsettled: [Verifier.Orphan] = []
        let settle: Verifier.Settle? = summary.openBy == nil ? nil : Verifier.Settle(
            isCurrent: { hash, entry in
                snapshots.allSay { $0.index[hash]?.isSameCommit(as: entry) ?? false }
            },
            isOrphan: { hash, slot, kind, path in
                snapshots.allSay(of: path) { vouchesForNone($0.index, hash, slot, kind) }
            },
            prepare: { paths in snapshots.take(of: self.directory, checking: paths) },
            confirmOrphans: { candidates in
                guard self.summary.openBy == "shared", let locks = SharedLocks(self.layout) else { return candidates }
                let stripes = Set(candidates.map { SharedRegion.stripe(of: $0.hash) }).sorted()
                let layout = self.layout
                let settled = locks.holding(stripes: stripes) { () -> [Verifier.Orphan] in
                    // A journal that cannot be read now leaves the snapshots' answer.
                    guard let index = Self.journalIndex(layout) else { return candidates }
                    return candidates.filter { vouchesForNone(index, $0.hash, $0.slot, $0.kind) && layout.directory.exists($0.path) }
                }
                guard let settled else {
                    unsettled = candidates
                    return []
                }
                return settled
            })
        var verifier = Verifier(layout: layout, entries: entries, hasher: .xxh3, settle: settle)
        verifier.compactionMayRun = summary.openBy != nil
        verifier.isOpenShared = summary.openBy == "shared"
        let findings = verifier.run(progress: progress)
        var report = DiskCache.VerificationReport(entriesChecked: findings.entriesChecked, bytesChecked: findings.bytesChecked,
                                                  problems: findings.problems)
        if !unsettled.isEmpty {
            report.notes.append("\(unsettled.count) \(unsettled.count == 1 ? "file" : "files") no journal record vouched for could not be settled: writers of \(unsettled.count == 1 ? "its key" : "their keys") held their locks for \(Int(SharedLocks.patience.components.seconds)) s; verify again later (\(unsettled.prefix(3).map(\.path).joined(separator: ", "))\(unsettled.count > 3 ? ", …" : ""))")
        }
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
        // Leftovers the next open removes by itself are notes, not problems. In a cache that is
        // open, the journal has no closing record yet and tmp/ holds work in progress: no note.
        guard summary.openBy == nil else { return report }
        if summary.hasJournal && !summary.wasCleanlyClosed {
            report.notes.append("The cache was not closed cleanly (the process that had it open stopped without closing it); the next open checks for files no journal record vouches for")
        }
        if case .success(let names) = layout.directory.listDirectory(layout.temp), !names.isEmpty {
            report.notes.append("tmp/ holds \(names.count) \(names.count == 1 ? "item" : "items") left by interrupted writes or a removeAll; the next open removes \(names.count == 1 ? "it" : "them")")
        }
        return report
    }

    /// Three fresh snapshots of an open cache, the last a quarter of a second after the others
    /// (a writer descheduled between writing an entry's files and committing them, on a busy
    /// machine, can take tens of milliseconds to commit), that a verify's findings are
    /// checked against (see ``verify(progress:)``), each with which of the files that looked
    /// like orphans were there right after it was taken, and as which file (device and inode).
    ///
    /// A file counts as there in every snapshot only if it is the same file each time: a key
    /// rewritten all along puts a new file under the same name every other store (its slots
    /// alternate), so a name can be present, and unvouched for, at each of three instants
    /// without any one file having lived unvouched for a moment; an orphan keeps its inode.
    private final class Snapshots {
        private struct FileID: Equatable { var device: UInt64; var inode: UInt64 }
        private var fresh: [(snapshot: DiskCacheInspector, present: [String: FileID])]?

        func take(of directory: URL, checking paths: [String]) {
            var taken: [(DiskCacheInspector, [String: FileID])] = []
            for pause in [0, 20_000, 250_000] as [useconds_t] {
                if pause > 0 { usleep(pause) }
                guard let snapshot = try? DiskCacheInspector(directory: directory, whileOpen: true) else { return }
                var present: [String: FileID] = [:]
                for path in paths {
                    if case .success(let info) = snapshot.layout.directory.lstat(path) {
                        present[path] = FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
                    }
                }
                taken.append((snapshot, present))
            }
            fresh = taken
        }

        /// Whether `condition` holds in every snapshot (false when they could not be taken).
        func allSay(_ condition: (DiskCacheInspector) -> Bool) -> Bool {
            guard let fresh else { return false }
            return fresh.allSatisfy { condition($0.snapshot) }
        }

        /// Whether the same file was at `path` after every snapshot and `condition` holds in each.
        func allSay(of path: String, _ condition: (DiskCacheInspector) -> Bool) -> Bool {
            guard let fresh, let first = fresh.first?.present[path] else { return false }
            return fresh.allSatisfy { $0.present[path] == first && condition($0.snapshot) }
        }
    }

    /// Who has the cache open: the process `LOCK` names ("" when it names none) for an exclusive
    /// owner, "shared" for instances sharing it, nil for no one. Asked without standing in an
    /// opener's way: an exclusive owner (and an older version of the library) holds `LOCK` and
    /// the directory exclusively, which a shared `flock` of each, let go at once, finds (instances
    /// sharing the cache hold the directory shared themselves; an exclusive opener that meets
    /// the probe tries again); every instance sharing the cache holds the presence lock in
    /// `SHARED`, which is tested without being taken. Nothing is created.
    static func openedBy(_ layout: Layout) throws(DiskCacheError) -> String? {
        func owner() -> String {
            guard case .success(let bytes?) = FileIO.readAll(layout.lockFile, limit: 64, in: layout.directory) else { return "" }
            let note = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            return note == "shared" ? "" : note
        }
        for (path, isDirectory) in [(layout.lockFile, false), (layout.root, true)] {
            let flags = isDirectory ? O_RDONLY | O_DIRECTORY : O_RDONLY | O_NOFOLLOW | O_NONBLOCK
            guard case .success(let file) = layout.directory.open(path, flags) else { continue }
            // Closing the descriptor (as `file` goes) lets go of the lock.
            let locked = Syscall.lockShared(file.fd)
            switch locked {
            case .success:
                break
            case .failure(let error) where error == .wouldBlock:
                return owner()
            case .failure where isDirectory:
                break  // a filesystem that cannot lock a directory: `LOCK` decides alone
            case .failure(let error):
                throw DiskCacheError.io(error, "lock the cache directory", path: layout.lockFile)
            }
        }
        // Every instance sharing the cache holds a byte of the directory too, whatever became of `SHARED`.
        if case .success(let directory) = layout.directory.open(layout.root, O_RDONLY | O_DIRECTORY),
           SharedRegion.isHeld(directory: directory.fd) {
            return "shared"
        }
        guard case .success(let page) = layout.directory.open(layout.root + "/" + SharedRegion.fileName, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        else { return nil }  // never shared (or its page is unreadable: no instance could have opened it)
        return SharedRegion.isHeld(.presence, fd: page.fd) == true ? "shared" : nil
    }

    /// The locks of a cache its instances share that settle whether files are orphans: the
    /// opening lock, so that no instance opens or closes meanwhile (the first to open writes the
    /// page's locks afresh), then, while any instance has the cache open, the key stripes of the
    /// files, which every writer of a key holds from writing its files until the old slot's are
    /// gone. Under both, a file the journal does not vouch for is no write in progress.
    ///
    /// The stripes are only ever tried, never waited for, and the opening lock is let go between
    /// tries: a writer that holds its key's stripe for long (a large value, a stopped process)
    /// then holds up the verify, for up to ``patience``, and no open or close of the cache.
    /// `SHARED` is opened, never created; nil when it cannot be opened or is not one this
    /// library wrote.
    private final class SharedLocks {
        static let patience: Duration = .seconds(5)
        private let region: SharedRegion

        init?(_ layout: Layout) {
            guard case .success(let file) = layout.directory.open(layout.root + "/" + SharedRegion.fileName,
                                                                   O_RDWR | O_NOFOLLOW | O_NONBLOCK),
                  let region = try? SharedRegion.map(file, layout: layout, initialise: false)
            else { return nil }
            self.region = region
        }

        /// `body`'s answer, found holding the opening lock and `stripes` (ascending); nil when
        /// they were not all free at once within ``patience``.
        func holding<T>(stripes: [Int], _ body: () -> T) -> T? {
            let deadline = ContinuousClock.now + Self.patience
            repeat {
                let answer: T??
                do {
                    answer = try region.withLock(.opening) { () -> T?? in
                        // A page being written afresh: no instance is open yet, so none writes.
                        guard region.isValid else { return .some(body()) }
                        // Nobody holds the presence lock: no instance has the cache open in shared mode.
                        if case .success = region.lock(.presence, .exclusive, wait: false) {
                            region.lock(.presence, .unlock)
                            return .some(body())
                        }
                        return region.withStripesIfFree(stripes, body).map { .some($0) } ?? .none
                    }
                } catch {
                    answer = .none  // the opening lock not had in time: try again
                }
                if let answer { return answer }
                usleep(2_000)
            } while ContinuousClock.now < deadline
            return nil
        }
    }

    /// The index the journal in `layout` vouches for now, read without the probes and the
    /// summary an inspector makes; nil when the journal cannot be read.
    static func journalIndex(_ layout: Layout) -> Index? {
        guard case .success(let bytes?) = FileIO.readAll(layout.journal, limit: Int.max, in: layout.directory),
              case .valid = bytes.withUnsafeBytes({ Journal.checkHeader($0) })
        else { return nil }
        var index = Index(blockSize: 4096)
        _ = bytes.withUnsafeBytes { Journal.replay($0) { index.apply($0) } }
        return index
    }

    private func lookup(_ key: String) -> (KeyHash, IndexEntry)? {
        let hash = KeyHasher.xxh3.hash(key)
        return index[hash].map { (hash, $0) }
    }

    private func metadata(_ hash: KeyHash, _ entry: IndexEntry) -> EntryMetadata? {
        guard case .success(let bytes?) = FileIO.readAll(layout.metaFile(hash, slot: entry.slot), limit: IndexEntry.maximumMetaSize, in: layout.directory)
        else { return nil }
        return bytes.withUnsafeBytes { EntryMetadata.decode($0) }
    }
}

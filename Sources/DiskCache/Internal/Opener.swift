import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Opening a cache directory: checks, locking, cleanup, and rebuilding the index.
struct Opener {
    let layout: Layout
    let configuration: DiskCache.Configuration
    var logger: Logger { configuration.logger }

    init(path: String, configuration: DiskCache.Configuration) {
        self.layout = Layout(root: path)
        self.configuration = configuration
    }

    struct Opened {
        var layout: Layout
        var blockSize: Int64
        var lock: FileDescriptor
        var state: CacheState
        var needsOrphanScan: Bool
    }

    func open() throws(DiskCacheError) -> Opened {
        try prepareDirectory()
        let lock = try takeLock()
        let version = try checkVersion()
        // Read (and check the version of) the journal before anything in the directory changes,
        // so that a cache of a newer format is left as it was.
        var contents = try readJournal()
        var recovery = DiskCache.Recovery()
        recovery.temporaryFilesRemoved = try cleanTemporaryFiles()
        _ = Syscall.unlink(layout.journalTemp)
        if version < Layout.flatShardsVersion, case .valid = contents {
            // Moved into the flat shards below, once the journal says which files are entries.
        } else if version < Layout.flatShardsVersion {
            // A format-1 cache without a readable journal: nothing says which of its files are
            // entries. It is a cache: its files go, and it starts empty in the current format.
            logger.warning("Discarded a format-1 cache whose journal was missing or unreadable", metadata: ["path": "\(layout.root)"])
            removeFormat1Shards()
            contents = .missing
        }
        try Self.makeShards(layout)

        let blockSize: Int64
        if case .success(let info) = Syscall.statvfs(layout.root), info.f_frsize > 0 {
            blockSize = Int64(info.f_frsize)
        } else {
            blockSize = 4096
        }

        var index: Index
        var records: Int
        var needsOrphanScan = false
        switch contents {
        case .missing:
            (index, records) = try rebuildByScan(blockSize: blockSize, recovery: &recovery)
        case .unreadable:
            logger.warning("The journal's header is unreadable; moved it aside and rebuilding from the entry files",
                           metadata: ["path": "\(layout.journal)"])
            _ = Syscall.rename(layout.journal, layout.journalCorrupt)
            (index, records) = try rebuildByScan(blockSize: blockSize, recovery: &recovery)
        case .valid(let bytes):
            index = Index(blockSize: blockSize, expectedCount: bytes.count / 80)
            let summary = bytes.withUnsafeBytes { buffer in
                Journal.replay(buffer) { index.apply($0) }
            }
            records = summary.records
            recovery.recordsReplayed = summary.records
            recovery.truncatedBytes = summary.truncatedBytes
            recovery.corruptRegions = summary.corruptRegions
            recovery.wasUncleanShutdown = !summary.endedCleanly
            if summary.truncatedBytes > 0 || summary.corruptRegions > 0 {
                logger.warning("The journal was damaged; kept every record that checks out",
                               metadata: ["truncatedBytes": "\(summary.truncatedBytes)",
                                          "corruptRegions": "\(summary.corruptRegions)",
                                          "corruptBytes": "\(summary.corruptBytes)"])
            }
            // Cut a torn tail; and cut a final CLOSE record too, so that if this session dies
            // the journal does not claim a clean shutdown and the next open looks for orphans.
            let keep = summary.endedCleanly ? summary.lastRecordStart : summary.validLength
            if keep < bytes.count {
                let fd = try Syscall.open(layout.journal, O_WRONLY | O_NOFOLLOW | O_NONBLOCK).get(orThrow: "open the journal", path: layout.journal)
                defer { Syscall.close(fd) }
                try Syscall.ftruncate(fd, Int64(keep)).get(orThrow: "cut the journal's tail", path: layout.journal)
                if summary.endedCleanly {
                    records -= 1
                    // Durably: a power cut must not bring the CLOSE record back, or files this
                    // session writes but never commits would outlive the next open unscanned.
                    try Syscall.fsync(fd).get(orThrow: "sync the journal", path: layout.journal)
                }
            }
            needsOrphanScan = !summary.endedCleanly || summary.corruptRegions > 0
        }

        index.shrinkToFit()
        if version < Layout.flatShardsVersion { try migrateFromFormat1(index) }

        let fd = try Syscall.open(layout.journal, O_WRONLY | O_NOFOLLOW | O_NONBLOCK).get(orThrow: "open the journal", path: layout.journal)
        let journal = FileDescriptor(fd)
        let length = try Syscall.fstat(fd).get(orThrow: "read the journal's size", path: layout.journal).st_size
        var state = CacheState(index: index, journal: journal, journalLength: Int64(length),
                               reservedEnd: Int64(length), journalRecords: records)
        state.statistics.recovery = recovery
        state.orphanScanPending = needsOrphanScan
        state.diskCapacity = configuration.diskCapacity
        state.countLimit = configuration.countLimit
        for (_, entry) in state.index.entries { state.noteExpiry(entry) }
        return Opened(layout: layout, blockSize: blockSize, lock: lock, state: state, needsOrphanScan: needsOrphanScan)
    }

    // MARK: - The directory

    private func prepareDirectory() throws(DiskCacheError) {
        let path = layout.root
        var info = stat()
        if stat(path, &info) != 0 {
            let error = Errno.current
            guard error == .noSuchFileOrDirectory else {
                throw DiskCacheError.io(error, "look at the cache directory", path: path)
            }
            try createDirectories(path)
            return
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw DiskCacheError(code: .notADirectory, message: "The cache path exists and is not a directory", path: path)
        }
        guard Syscall.access(path, R_OK | W_OK | X_OK) else {
            throw DiskCacheError(code: .permissionDenied,
                                 message: "The cache directory must be readable, writable and searchable by this process",
                                 path: path, errno: Errno.current.rawValue)
        }
        let names = try Syscall.listDirectory(path).get(orThrow: "list the cache directory", path: path).map(\.name)
        let ours: Set<String> = [Layout.versionFileName, Layout.lockFileName, Journal.journalFileName]
        if !names.isEmpty && !names.contains(where: ours.contains) {
            let sample = names.sorted().prefix(3).joined(separator: ", ")
            throw DiskCacheError(code: .notACache,
                                 message: "The directory holds other files (\(sample)\(names.count > 3 ? ", …" : "")) and is not a cache; use an empty or new directory",
                                 path: path)
        }
    }

    /// Makes the cache directory and its missing parents, each made durable in its parent
    /// before the next step (`fsync(2)` of the parent after each `mkdir`), so that a power cut
    /// cannot take away a directory that acknowledged writes live in.
    private func createDirectories(_ path: String) throws(DiskCacheError) {
        let absolute = path.hasPrefix("/")
        var prefix = absolute ? "" : "."
        var parent = absolute ? "/" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            switch Syscall.mkdir(prefix, 0o700) {
            case .success:
                try Syscall.fsyncDirectory(parent).get(orThrow: "sync a directory the cache was created in", path: parent)
            case .failure(.fileExists):
                break
            case .failure(let error):
                throw DiskCacheError.io(error, "create the cache directory", path: prefix)
            }
            parent = prefix
        }
    }

    /// Makes the 256 shard directories that are missing (all of them for a new cache) and, if
    /// it made any, fsyncs the cache directory: a store is only ever acknowledged into a shard
    /// whose name is durable. A shard that is not a real directory is refused.
    ///
    /// One listing of the cache directory says which shards exist already (and, through the
    /// entry type, that they are directories), so an open of an existing cache makes no
    /// `mkdir` or `lstat` per shard.
    static func makeShards(_ layout: Layout) throws(DiskCacheError) {
        let listed = try Syscall.listDirectory(layout.root).get(orThrow: "list the cache directory", path: layout.root)
        let directories = Set(listed.lazy.filter { $0.type == DT_DIR }.map(\.name))
        var made = false
        for name in Layout.shardNames where !directories.contains(name) {
            let path = layout.root + "/" + name
            switch Syscall.mkdir(path, 0o700) {
            case .success:
                made = true
            case .failure(.fileExists):
                guard case .success(let info) = Syscall.lstat(path), info.st_mode & S_IFMT == S_IFDIR else {
                    throw DiskCacheError(code: .ioFailure,
                                         message: "A shard of the cache is not a directory (a symbolic link is never followed)",
                                         path: path)
                }
            case .failure(let error):
                throw DiskCacheError.io(error, "create a shard directory", path: path)
            }
        }
        if made {
            try Syscall.fsyncDirectory(layout.root).get(orThrow: "sync the cache directory", path: layout.root)
        }
    }

    private func takeLock() throws(DiskCacheError) -> FileDescriptor {
        let path = layout.lockFile
        let fd = try Syscall.open(path, O_RDWR | O_CREAT | O_NOFOLLOW, 0o600).get(orThrow: "open the lock file", path: path)
        let lock = FileDescriptor(fd)
        var attempt = 0
        var result = Syscall.lockExclusive(fd)
        // A child this process is starting holds a copy of every descriptor between fork and
        // exec, a just-closed cache's lock included: when the lock's owner is this very process,
        // give such a copy a moment to go away before reporting the cache as open.
        while case .failure(.wouldBlock) = result, attempt < 20, lockOwner(path) == Int(getpid()) {
            attempt += 1
            usleep(10_000)
            result = Syscall.lockExclusive(fd)
        }
        switch result {
        case .success:
            break
        case .failure(let error) where error == .wouldBlock:
            var owner = ""
            if let pid = lockOwner(path) {
                owner = pid == Int(getpid()) ? " (by another DiskCache in this process)" : " (by process \(pid))"
            }
            throw DiskCacheError(code: .locked,
                                 message: "The cache is already open\(owner); one DiskCache at a time may own a directory",
                                 path: layout.root)
        case .failure(let error):
            throw DiskCacheError.io(error, "lock the cache directory", path: path)
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = Syscall.ftruncate(fd, 0)
        _ = pid.withUnsafeBytes { Syscall.pwriteAll(fd, $0, at: 0) }
        return lock
    }

    /// The pid the lock file names.
    private func lockOwner(_ path: String) -> Int? {
        guard case .success(let bytes?) = FileIO.readAll(path, limit: 64) else { return nil }
        return Int(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// The cache's format version; writes `VERSION` (durably) for a new cache.
    private func checkVersion() throws(DiskCacheError) -> Int {
        let path = layout.versionFile
        switch FileIO.readAll(path, limit: 256) {
        case .success(let bytes?):
            let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard let version = Int(text), version >= 1 else {
                throw DiskCacheError(code: .notACache, message: "The cache's VERSION file is unreadable (\(text.prefix(20).debugDescription))", path: path)
            }
            guard version <= Layout.formatVersion else {
                throw DiskCacheError(code: .newerFormat,
                                     message: "The cache has format version \(version); this library reads up to \(Layout.formatVersion). It was left untouched",
                                     path: layout.root)
            }
            return version
        case .success(nil):
            throw DiskCacheError(code: .notACache, message: "The cache's VERSION file is unreadable", path: path)
        case .failure(let error) where error == .noSuchFileOrDirectory:
            try Self.writeVersion(layout)
            return Layout.formatVersion
        case .failure(let error):
            throw DiskCacheError.io(error, "read the VERSION file", path: path)
        }
    }

    /// Writes `VERSION` for the current format: a temporary file, fsynced, renamed into place,
    /// and the directory fsynced.
    static func writeVersion(_ layout: Layout) throws(DiskCacheError) {
        let path = layout.versionFile
        let temp = layout.root + "/" + Layout.versionFileName + ".tmp"
        _ = Syscall.unlink(temp)
        try Array("\(Layout.formatVersion)\n".utf8).withUnsafeBytes { FileIO.writeNewFile(temp, $0, sync: true) }
            .get(orThrow: "write the VERSION file", path: temp)
        try Syscall.rename(temp, path).get(orThrow: "write the VERSION file", path: path)
        try Syscall.fsyncDirectory(layout.root).get(orThrow: "sync the cache directory", path: layout.root)
    }

    // MARK: - Format 1

    /// Moves a format-1 cache's entry files from `ab/cd/` into `ab/`, removes the inner
    /// directories (and the files no record vouched for), makes it all durable, and only then
    /// writes `VERSION` 2. Interrupted, it runs again at the next open: a file already moved is
    /// simply not found at its old name.
    private func migrateFromFormat1(_ index: Index) throws(DiskCacheError) {
        let old = Layout(root: layout.root, version: 1)
        var moved = 0
        for (hash, entry) in index.entries {
            let files = [(old.metaFile(hash, slot: entry.slot), layout.metaFile(hash, slot: entry.slot))]
                + (entry.isInline ? [] : [(old.bodyFile(hash, slot: entry.slot), layout.bodyFile(hash, slot: entry.slot))])
            for (from, to) in files {
                switch Syscall.rename(from, to) {
                case .success: moved += 1
                case .failure(.noSuchFileOrDirectory): break
                case .failure(let error): throw DiskCacheError.io(error, "move an entry file to the format-2 layout", path: from)
                }
            }
        }
        removeFormat1Shards(keepingOuter: true)
        let journal = try Syscall.open(layout.journal, FileIO.readFlags).get(orThrow: "open the journal", path: layout.journal)
        defer { Syscall.close(journal) }
        try Syscall.syncFileSystem(journal).get(orThrow: "sync the cache's filesystem", path: layout.root)
        try Self.writeVersion(layout)
        logger.notice("Migrated the cache to format \(Layout.formatVersion)", metadata: ["files": "\(moved)", "entries": "\(index.count)"])
    }

    /// Removes format 1's inner shard directories `ab/cd/` with whatever they still hold, and
    /// the outer ones too unless `keepingOuter`.
    private func removeFormat1Shards(keepingOuter: Bool = false) {
        guard case .success(let outers) = Syscall.listDirectory(layout.root) else { return }
        for (outer, _) in outers where Layout.isShardName(outer) {
            let outerPath = layout.root + "/" + outer
            guard !keepingOuter else {
                guard case .success(let inners) = Syscall.listDirectory(outerPath) else { continue }
                for (inner, type) in inners where type == DT_DIR && Layout.isShardName(inner) {
                    FileIO.removeTree(outerPath + "/" + inner)
                }
                continue
            }
            FileIO.removeTree(outerPath)
        }
    }

    /// Empties `tmp/` (interrupted writes, trash of `removeAll`); returns how many top-level items it removed.
    private func cleanTemporaryFiles() throws(DiskCacheError) -> Int {
        let temp = layout.temp
        switch Syscall.lstat(temp) {
        case .success(let info) where info.st_mode & S_IFMT == S_IFDIR:
            break
        case .success:
            // A file or link where tmp/ belongs: not ours to follow; replace it.
            _ = Syscall.unlink(temp)
            try Syscall.mkdir(temp, 0o700).get(orThrow: "create tmp/", path: temp)
            return 1
        case .failure:
            try Syscall.mkdir(temp, 0o700).get(orThrow: "create tmp/", path: temp)
            return 0
        }
        let names = try Syscall.listDirectory(temp).get(orThrow: "list tmp/", path: temp)
        for (name, _) in names { FileIO.removeTree(temp + "/" + name) }
        return names.count
    }

    // MARK: - The journal

    enum JournalContents {
        case missing
        case unreadable
        case valid([UInt8])
    }

    private func readJournal() throws(DiskCacheError) -> JournalContents {
        let path = layout.journal
        switch FileIO.readAll(path, limit: Int.max) {
        case .failure(let error) where error == .noSuchFileOrDirectory:
            return .missing
        case .failure(let error):
            throw DiskCacheError.io(error, "read the journal", path: path)
        case .success(nil):
            return .unreadable
        case .success(let bytes?):
            switch bytes.withUnsafeBytes({ Journal.checkHeader($0) }) {
            case .valid: return .valid(bytes)
            case .unreadable: return .unreadable
            case .newerVersion(let version):
                throw DiskCacheError(code: .newerFormat,
                                     message: "The journal has version \(version); this library reads up to \(Journal.journalVersion). It was left untouched",
                                     path: path)
            }
        }
    }

    /// Rebuilds the index from the `.meta` files (the journal is missing or unreadable) and
    /// writes a new journal from it.
    private func rebuildByScan(blockSize: Int64, recovery: inout DiskCache.Recovery) throws(DiskCacheError) -> (Index, Int) {
        var index = Index(blockSize: blockSize)
        // The newest valid slot of each hash wins; everything else is removed.
        var found: [KeyHash: Journal.Put] = [:]
        ShardScanner(layout: layout).forEachEntryFile { hash, slot, kind, path in
            guard kind == .meta else {
                // A body is checked with its metadata file; one without is garbage.
                if case .failure(.noSuchFileOrDirectory) = Syscall.lstat(layout.metaFile(hash, slot: slot)) {
                    _ = Syscall.unlink(path)
                }
                return true
            }
            let body = layout.bodyFile(hash, slot: slot)
            guard let put = checkedEntry(hash: hash, slot: slot, metaPath: path, bodyPath: body) else {
                _ = Syscall.unlink(path)
                _ = Syscall.unlink(body)
                return true
            }
            if let other = found[hash] {
                let (keep, drop) = other.created >= put.created ? (other, put) : (put, other)
                _ = Syscall.unlink(layout.metaFile(hash, slot: drop.slot))
                _ = Syscall.unlink(layout.bodyFile(hash, slot: drop.slot))
                found[hash] = keep
            } else {
                found[hash] = put
            }
            return true
        }
        let puts = found.values.sorted { $0.created < $1.created }
        for put in puts { index.insert(IndexEntry(put), for: put.hash) }
        var journal = Journal.header()
        for put in puts { Journal.encode(.put(put), into: &journal) }
        try JournalFileWriter.replace(layout: layout, with: journal)
        recovery.rebuiltByScan = true
        recovery.entriesRecoveredByScan = puts.count
        if !puts.isEmpty {
            logger.warning("Rebuilt the journal by scanning the cache's files", metadata: ["entries": "\(puts.count)"])
        }
        return (index, puts.count)
    }
}

extension Opener {
    /// The PUT record a `.meta` file (and its body) would have had, if they check out: the
    /// metadata parses, its key hashes to the file's name, and the body (inline, or a separate
    /// file of the stated size) has the stated checksum. Entry files are written in place, so a
    /// write cut short leaves a torn file: only the checksum tells it from a whole one.
    func checkedEntry(hash: KeyHash, slot: UInt8, metaPath: String, bodyPath: String) -> Journal.Put? {
        guard case .success(let bytes?) = FileIO.readAll(metaPath, limit: IndexEntry.maximumMetaSize),
              let meta = bytes.withUnsafeBytes({ EntryMetadata.decode($0) }),
              meta.size >= 0, meta.size <= IndexEntry.maximumBodySize,
              configuration.keyHasher.hash(meta.key) == hash
        else { return nil }
        if let inline = meta.inlineBody {
            guard inline.withUnsafeBytes({ Checksum.xxh3($0) }) == meta.checksum else { return nil }
            _ = Syscall.unlink(bodyPath)
        } else {
            guard case .success(let info) = Syscall.lstat(bodyPath), info.st_mode & S_IFMT == S_IFREG,
                  Int64(info.st_size) == meta.size,
                  case .success(let (body, checksum)?) = FileIO.readHashing(bodyPath, count: Int(meta.size))
            else { return nil }
            body.deallocate()
            guard checksum == meta.checksum else { return nil }
        }
        return Journal.Put(hash: hash, size: meta.size, metaSize: UInt32(bytes.count), isInline: meta.inlineBody != nil,
                           slot: slot, checksum: meta.checksum, created: meta.created, accessed: meta.accessed,
                           expires: meta.expires)
    }
}

/// Writing a whole journal file: to `journal.tmp`, synced, renamed over `journal`, directory synced.
enum JournalFileWriter {
    static func replace(layout: Layout, with bytes: [UInt8]) throws(DiskCacheError) {
        let temp = layout.journalTemp
        _ = Syscall.unlink(temp)
        try bytes.withUnsafeBytes { FileIO.writeNewFile(temp, $0, sync: true) }
            .get(orThrow: "write a new journal", path: temp)
        try Syscall.rename(temp, layout.journal).get(orThrow: "replace the journal", path: layout.journal)
        try Syscall.fsyncDirectory(layout.root).get(orThrow: "sync the cache directory", path: layout.root)
    }
}

/// Walks the shard directories, never following a symbolic link.
struct ShardScanner {
    enum FileKind { case meta, body }
    let layout: Layout

    /// Calls `visit` with (hash, slot, kind, path) for each entry file; `visit` returns false to stop.
    func forEachEntryFile(_ visit: (KeyHash, UInt8, FileKind, String) -> Bool) {
        guard case .success(let outers) = Syscall.listDirectory(layout.root) else { return }
        for (outer, _) in outers.sorted(by: { $0.name < $1.name }) where Layout.isShardName(outer) {
            let outerPath = layout.root + "/" + outer
            guard isRealDirectory(outerPath) else { continue }
            if layout.version >= Layout.flatShardsVersion {
                if !visitFiles(in: outerPath, prefix: outer, visit) { return }
                continue
            }
            guard case .success(let inners) = Syscall.listDirectory(outerPath) else { continue }
            for (inner, _) in inners where Layout.isShardName(inner) {
                let innerPath = outerPath + "/" + inner
                guard isRealDirectory(innerPath) else { continue }
                if !visitFiles(in: innerPath, prefix: outer + inner, visit) { return }
            }
        }
    }

    private static let meta = "\(Layout.metaSuffix)", body = "\(Layout.bodySuffix)", slot1 = Layout.slot1Mark

    /// The entry files of one shard directory whose names start with `prefix`; false if `visit` said stop.
    private func visitFiles(in directory: String, prefix: String, _ visit: (KeyHash, UInt8, FileKind, String) -> Bool) -> Bool {
        guard case .success(let files) = Syscall.listDirectory(directory) else { return true }
        for (name, type) in files where type != DT_LNK {
            let kind: FileKind
            var stem: Substring
            if name.hasSuffix(Self.meta) {
                kind = .meta
                stem = name.dropLast(Self.meta.count)
            } else if name.hasSuffix(Self.body) {
                kind = .body
                stem = name.dropLast(Self.body.count)
            } else {
                continue
            }
            var slot: UInt8 = 0
            if stem.hasSuffix(Self.slot1) {
                slot = 1
                stem = stem.dropLast(Self.slot1.count)
            }
            guard let hash = KeyHash(hexName: stem), stem.hasPrefix(prefix) else { continue }
            if !visit(hash, slot, kind, directory + "/" + name) { return false }
        }
        return true
    }

    private func isRealDirectory(_ path: String) -> Bool {
        guard case .success(let info) = Syscall.lstat(path) else { return false }
        return info.st_mode & S_IFMT == S_IFDIR
    }
}

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
        try checkVersion()
        // Read (and check the version of) the journal before anything in the directory changes,
        // so that a cache of a newer format is left as it was.
        let contents = try readJournal()
        var recovery = DiskCache.Recovery()
        recovery.temporaryFilesRemoved = try cleanTemporaryFiles()
        _ = Syscall.unlink(layout.journalTemp)

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
                let fd = try Syscall.open(layout.journal, O_WRONLY | O_NOFOLLOW).get(orThrow: "open the journal", path: layout.journal)
                defer { Syscall.close(fd) }
                try Syscall.ftruncate(fd, Int64(keep)).get(orThrow: "cut the journal's tail", path: layout.journal)
                if summary.endedCleanly { records -= 1 }
            }
            needsOrphanScan = !summary.endedCleanly || summary.corruptRegions > 0
        }

        let fd = try Syscall.open(layout.journal, O_WRONLY | O_NOFOLLOW).get(orThrow: "open the journal", path: layout.journal)
        let journal = FileDescriptor(fd)
        let length = try Syscall.fstat(fd).get(orThrow: "read the journal's size", path: layout.journal).st_size
        var state = CacheState(index: index, journal: journal, journalLength: Int64(length),
                               reservedEnd: Int64(length), journalRecords: records)
        state.statistics.recovery = recovery
        state.orphanScanPending = needsOrphanScan
        state.diskCapacity = configuration.diskCapacity
        state.countLimit = configuration.countLimit
        for entry in state.index.entries.values { state.noteExpiry(entry) }
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
        let ours: Set<String> = [Layout.VERSION_FILE, Layout.LOCK_FILE, Journal.JOURNAL_FILE]
        if !names.isEmpty && !names.contains(where: ours.contains) {
            let sample = names.sorted().prefix(3).joined(separator: ", ")
            throw DiskCacheError(code: .notACache,
                                 message: "The directory holds other files (\(sample)\(names.count > 3 ? ", …" : "")) and is not a cache; use an empty or new directory",
                                 path: path)
        }
    }

    private func createDirectories(_ path: String) throws(DiskCacheError) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            switch Syscall.mkdir(prefix, 0o700) {
            case .success, .failure(.fileExists): continue
            case .failure(let error):
                throw DiskCacheError.io(error, "create the cache directory", path: prefix)
            }
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

    private func checkVersion() throws(DiskCacheError) {
        let path = layout.versionFile
        switch FileIO.readAll(path, limit: 256) {
        case .success(let bytes?):
            let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard let version = Int(text) else {
                throw DiskCacheError(code: .notACache, message: "The cache's VERSION file is unreadable (\(text.prefix(20).debugDescription))", path: path)
            }
            guard version <= Layout.FORMAT_VERSION else {
                throw DiskCacheError(code: .newerFormat,
                                     message: "The cache has format version \(version); this library reads up to \(Layout.FORMAT_VERSION). It was left untouched",
                                     path: layout.root)
            }
        case .success(nil):
            throw DiskCacheError(code: .notACache, message: "The cache's VERSION file is unreadable", path: path)
        case .failure(let error) where error == .noSuchFileOrDirectory:
            let temp = layout.root + "/" + Layout.VERSION_FILE + ".tmp"
            _ = Syscall.unlink(temp)
            try Array("\(Layout.FORMAT_VERSION)\n".utf8).withUnsafeBytes { FileIO.writeNewFile(temp, $0, sync: true) }
                .get(orThrow: "write the VERSION file", path: temp)
            try Syscall.rename(temp, path).get(orThrow: "write the VERSION file", path: path)
        case .failure(let error):
            throw DiskCacheError.io(error, "read the VERSION file", path: path)
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
                                     message: "The journal has version \(version); this library reads up to \(Journal.JOURNAL_VERSION). It was left untouched",
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
    /// metadata parses, its key hashes to the file's name, and a separate body has the size
    /// the metadata states. Body checksums are verified on read, not here.
    func checkedEntry(hash: KeyHash, slot: UInt8, metaPath: String, bodyPath: String) -> Journal.Put? {
        guard case .success(let bytes?) = FileIO.readAll(metaPath, limit: IndexEntry.maximumMetaSize),
              let meta = bytes.withUnsafeBytes({ EntryMetadata.decode($0) }),
              configuration.keyHasher.hash(meta.key) == hash
        else { return nil }
        if meta.inlineBody == nil {
            guard case .success(let info) = Syscall.lstat(bodyPath), info.st_mode & S_IFMT == S_IFREG,
                  Int64(info.st_size) == meta.size else { return nil }
        } else {
            _ = Syscall.unlink(bodyPath)
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
            guard isRealDirectory(outerPath), case .success(let inners) = Syscall.listDirectory(outerPath) else { continue }
            for (inner, _) in inners where Layout.isShardName(inner) {
                let innerPath = outerPath + "/" + inner
                guard isRealDirectory(innerPath), case .success(let files) = Syscall.listDirectory(innerPath) else { continue }
                for (name, type) in files where type != DT_LNK {
                    let kind: FileKind
                    var stem: Substring
                    if name.hasSuffix(Layout.META_SUFFIX) {
                        kind = .meta
                        stem = name.dropLast(Layout.META_SUFFIX.count)
                    } else if name.hasSuffix(Layout.BODY_SUFFIX) {
                        kind = .body
                        stem = name.dropLast(Layout.BODY_SUFFIX.count)
                    } else {
                        continue
                    }
                    var slot: UInt8 = 0
                    if stem.hasSuffix(Layout.SLOT_1_MARK) {
                        slot = 1
                        stem = stem.dropLast(Layout.SLOT_1_MARK.count)
                    }
                    guard let hash = KeyHash(hexName: stem), stem.hasPrefix(outer + inner) else { continue }
                    if !visit(hash, slot, kind, innerPath + "/" + name) { return }
                }
            }
        }
    }

    private func isRealDirectory(_ path: String) -> Bool {
        guard case .success(let info) = Syscall.lstat(path) else { return false }
        return info.st_mode & S_IFMT == S_IFDIR
    }
}

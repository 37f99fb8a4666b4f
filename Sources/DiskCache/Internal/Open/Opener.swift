import CDiskCacheSupport
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
    /// True when the directory was missing or empty: a new cache is made in it.
    let isNew: Bool
    var logger: Logger { configuration.logger }

    /// Checks the directory (made when missing; refused unless empty or marked as a cache: see
    /// ``FormatMarker``) and opens it. Nothing in a directory that is not a cache is touched.
    init(path: String, configuration: DiskCache.Configuration) throws(DiskCacheError) {
        let root = Layout(root: path).root
        if let kind = configuration.kind, !FormatMarker.isValidKind(kind) {
            throw DiskCacheError(code: .invalidArgument,
                                 message: "The cache's kind \(kind.debugDescription) is not 1 to 64 ASCII letters, digits, '-', '_' or '.'")
        }
        self.isNew = try Self.prepareDirectory(root)
        // A cache of another kind is refused before anything in it is created or locked (and
        // again under the cache's locks, by `checkVersion`).
        if !isNew, case .marked(_, let application, let kind) = FormatMarker.read(root: root) {
            try Self.checkKind(found: kind, application: application, configuration, path: root)
        }
        let directory = try CacheDirectory.open(root).get(orThrow: "open the cache directory", path: root)
        self.layout = Layout(directory: directory)
        self.configuration = configuration
        // The mark goes first, before `LOCK` or anything else is made: a new cache interrupted
        // at any point is a directory that is empty, holds only a temporary mark, or is marked.
        if isNew {
            try Self.writeVersion(layout, application: configuration.applicationVersion, kind: configuration.kind)
            try Self.writeCacheDirectoryTag(layout)
        }
        #if canImport(Darwin)
        try Self.applyApplePlatformAttributes(layout, configuration: configuration)
        #endif
    }

    struct Opened {
        var layout: Layout
        var blockSize: Int64
        /// `LOCK` and the cache directory, each `flock`ed: closing them releases the cache.
        var locks: [SharedDescriptor]
        var state: CacheState
        var needsOrphanScan: Bool
        /// The application version the cache's mark names (``DiskCache/Configuration/applicationVersion``).
        var applicationVersion: Int?
        /// The kind the cache's mark names (``DiskCache/Configuration/kind``), after this open
        /// adopted a mark that had none.
        var kind: String?
    }

    func open() throws(DiskCacheError) -> Opened {
        var sharing = configuration.sharing
        if sharing == .shared, let kind = Self.networkFilesystem(layout.root, probe: configuration.filesystemTypeProbe) {
            logger.notice("The cache is on a network filesystem, where locks between machines cannot be trusted; opened exclusively",
                          metadata: ["path": "\(layout.root)", "filesystem": "\(kind)"])
            sharing = .exclusive
        }
        guard sharing == .shared else { return try recover(locks: Self.takeLocks(layout), region: nil) }
        let joined = try Self.joinShared(layout, lockTimeout: configuration.lockTimeout, logger: logger)
        // Opens (and closes) happen one at a time: until this one is done, no other starts.
        defer { joined.region.lock(.opening, .unlock) }
        if joined.alone {
            return try recover(locks: [joined.directory], region: joined.region, sharedPageMovedAside: joined.movedAside)
        }
        return try join(locks: [joined.directory], region: joined.region)
    }

    /// Opening a cache other instances have open (shared mode): nothing in the directory is
    /// changed (the first instance recovered it); the journal is read holding the append lock,
    /// so that no record is half written and no compaction swaps files meanwhile.
    private func join(locks: [SharedDescriptor], region: SharedRegion) throws(DiskCacheError) -> Opened {
        let mark = try checkVersion()
        let blockSize = Self.blockSize(layout)
        let (index, records, journal, generation, carriesFiles) = try region.withLock(.append) { () throws(DiskCacheError) in
            guard case .valid(let bytes) = try readJournal() else {
                throw DiskCacheError(code: .ioFailure,
                                     message: "The journal is missing or unreadable while other instances have the cache open; close them, and the next open rebuilds it",
                                     path: layout.journal)
            }
            let (index, summary) = Index.replaying(bytes, blockSize: blockSize, policy: configuration.evictionPolicy)
            let fd = try layout.directory.open(layout.journal, O_RDWR | O_NOFOLLOW | O_NONBLOCK).get(orThrow: "open the journal", path: layout.journal)
            // Up to the last whole record: bytes after it are a dead appender's, which the
            // next append writes over.
            return (index, summary.records, (SharedDescriptor(fd), Int64(summary.validLength)), try region.counter(.generation),
                    summary.carriedFiles > 0)
        }
        region.add(.openCount, 1)
        var state = CacheState(index: index, journal: journal.0, journalLength: journal.1,
                               reservedEnd: journal.1, journalRecords: records)
        state.journalGeneration = generation
        state.journalCarriesFiles = carriesFiles
        state.shared = SharedJournal(region: region, layout: layout, configuration: configuration)
        state.statistics.recovery.recordsReplayed = records
        state.adopt(configuration)
        return Opened(layout: layout.withVersion(Layout.formatVersion), blockSize: blockSize, locks: locks, state: state,
                      needsOrphanScan: false, applicationVersion: mark.application, kind: mark.kind)
    }

    private static func blockSize(_ layout: Layout) -> Int64 {
        if case .success(let info) = Syscall.statvfs(layout.root), info.f_frsize > 0 { return Int64(info.f_frsize) }
        return 4096
    }

    /// Opening a cache no other instance has open: checks the mark, cleans up after the last
    /// session, replays the journal (cutting a torn tail), and in shared mode writes the shared
    /// page afresh.
    private func recover(locks: [SharedDescriptor], region: SharedRegion?, sharedPageMovedAside: Bool = false) throws(DiskCacheError) -> Opened {
        let mark = try checkVersion()
        let version = mark.format
        // Read (and check the version of) the journal before anything in the directory changes,
        // so that a cache of a newer format is left as it was.
        var contents = try readJournal()
        var recovery = DiskCache.Recovery()
        recovery.sharedPageMovedAside = sharedPageMovedAside
        recovery.temporaryFilesRemoved = try cleanTemporaryFiles()
        // `.meta` files retired by instances that ended without closing (``RetiredFiles``).
        layout.directory.removeTree(layout.retired)
        if case .success(let names) = layout.directory.listDirectory(layout.root) {
            for (name, _) in names where name.hasPrefix(FormatMarker.temporaryPrefix) {
                layout.directory.removeTree(layout.root + "/" + name)
            }
        }
        _ = layout.directory.unlink(layout.journalTemp)
        if version < Layout.flatShardsVersion, case .valid = contents {
            // Moved into the flat shards below, once the journal says which files are entries.
        } else if version < Layout.flatShardsVersion {
            // A format-1 cache without a readable journal: nothing says which of its files are
            // entries. It is a cache: its files go, and it starts empty in the current format.
            logger.warning("Discarded a format-1 cache whose journal was missing or unreadable", metadata: ["path": "\(layout.root)"])
            removeFormat1Shards()
            contents = .missing
        }
        let movedAside = try Self.makeShards(layout)
        if movedAside > 0 {
            logger.warning("Moved aside files or links found in place of shard directories", metadata: ["count": "\(movedAside)"])
        }

        let blockSize = Self.blockSize(layout)

        var index: Index
        var records: Int
        var needsOrphanScan = false
        var carriesFiles = false
        // After an unclean shutdown: the journal, and the PUT+FILE records in it to check.
        var carriedFilesToCheck: (journal: [UInt8], offsets: [Int])?
        switch contents {
        case .missing:
            (index, records) = try rebuildByScan(blockSize: blockSize, recovery: &recovery)
        case .unreadable:
            logger.warning("The journal's header is unreadable; moved it aside and rebuilding from the entry files",
                           metadata: ["path": "\(layout.journal)"])
            layout.directory.removeTree(layout.journalCorrupt)
            _ = layout.directory.rename(layout.journal, layout.journalCorrupt)
            (index, records) = try rebuildByScan(blockSize: blockSize, recovery: &recovery)
        case .valid(let bytes):
            let summary: Journal.ReplaySummary
            var carried = Journal.CarriedFiles()
            (index, summary) = Index.replaying(bytes, blockSize: blockSize, policy: configuration.evictionPolicy, carried: &carried)
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
                let fd = try layout.directory.open(layout.journal, O_WRONLY | O_NOFOLLOW | O_NONBLOCK).get(orThrow: "open the journal", path: layout.journal)
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
            carriesFiles = summary.carriedFiles > 0
            if !summary.endedCleanly && carriesFiles { carriedFilesToCheck = (bytes, carried.uncovered) }
            if bytes.withUnsafeBytes({ Journal.version(of: $0) }) < Journal.journalVersion {
                try upgradeJournalHeader()
            }
        }

        index.shrinkToFit()
        if version < Layout.flatShardsVersion { try migrateFromFormat1(index, application: mark.application, kind: mark.kind) }
        if let carriedFilesToCheck {
            recovery.filesRestoredFromJournal = restoreCarriedFiles(carriedFilesToCheck.journal, at: carriedFilesToCheck.offsets,
                                                                    index: index)
        }

        let fd = try layout.directory.open(layout.journal, O_RDWR | O_NOFOLLOW | O_NONBLOCK).get(orThrow: "open the journal", path: layout.journal)
        let journal = SharedDescriptor(fd)
        let status = try Syscall.fstat(fd).get(orThrow: "read the journal's size", path: layout.journal)
        let length = status.st_size
        var state = CacheState(index: index, journal: journal, journalLength: Int64(length),
                               reservedEnd: Int64(length), journalRecords: records)
        if let region {
            region[.base] = UInt64(length)
            region[.baseRecords] = UInt64(records)
            region[.end] = UInt64(length)
            region[.writtenAhead] = UInt64(length)
            region[.openCount] = 1
            region[.flags] = needsOrphanScan ? SharedRegion.flagOrphanScanDue : 0
            region.nameJournal(status)
            state.shared = SharedJournal(region: region, layout: layout, configuration: configuration)
        }
        state.statistics.recovery = recovery
        state.journalCarriesFiles = carriesFiles
        state.orphanScanPending = needsOrphanScan
        state.adopt(configuration)
        return Opened(layout: layout.withVersion(Layout.formatVersion), blockSize: blockSize, locks: locks, state: state,
                      needsOrphanScan: needsOrphanScan, applicationVersion: mark.application, kind: mark.kind)
    }

    // MARK: - The directory

    /// Makes the directory when it is missing; otherwise checks that it is a directory this
    /// process may use and that it is empty or carries the cache's mark. Returns whether a new
    /// cache is to be made in it.
    private static func prepareDirectory(_ path: String) throws(DiskCacheError) -> Bool {
        var info = stat()
        if stat(path, &info) != 0 {
            let error = SyscallError.current
            guard error == .noSuchFileOrDirectory else {
                throw DiskCacheError.io(error, "look at the cache directory", path: path)
            }
            try createDirectories(path)
            return true
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw DiskCacheError(code: .notADirectory, message: "The cache path exists and is not a directory", path: path)
        }
        guard Syscall.access(path, R_OK | W_OK | X_OK) else {
            throw DiskCacheError(code: .permissionDenied,
                                 message: "The cache directory must be readable, writable and searchable by this process",
                                 path: path, errno: SyscallError.current.rawValue)
        }
        let names = try Syscall.listDirectory(path).get(orThrow: "list the cache directory", path: path)
        // Empty, or what a new cache's first step leaves when it is cut short.
        if names.allSatisfy({ $0.name.hasPrefix(FormatMarker.temporaryPrefix) }) { return true }
        switch try FormatMarker.readRefusingNewer(root: path) {
        case .marked, .legacy:
            return false
        case .missing:
            let sample = names.map(\.name).sorted().prefix(3).joined(separator: ", ")
            let hint = FormatMarker.isRecognisablyACache(names)
                ? "; it looks like a cache whose VERSION file was lost: `diskcache verify --repair` marks it again"
                : "; use an empty or new directory"
            throw DiskCacheError(code: .notACache,
                                 message: "The directory holds other files (\(sample)\(names.count > 3 ? ", …" : "")) and no VERSION file, so it is not a cache\(hint)",
                                 path: path)
        case .damaged(let what):
            // Another user's cache in a directory this process may write to: its files (0600)
            // cannot be read, which says nothing about whether it is a cache.
            let versionFile = Layout(root: path).versionFile
            if !Syscall.access(versionFile, R_OK), SyscallError.current == .permissionDenied {
                throw DiskCacheError(code: .permissionDenied,
                                     message: "The cache's VERSION file cannot be read by this process (the cache's files belong to another user?)",
                                     path: versionFile, errno: SyscallError.permissionDenied.rawValue)
            }
            let hint = FormatMarker.isRecognisablyACache(names)
                ? "; the rest of the directory is a cache's: `diskcache verify --repair` marks it again" : ""
            throw DiskCacheError(code: .notACache,
                                 message: "The directory's VERSION file is not a cache's mark (\(what)), so it is not opened as a cache\(hint)",
                                 path: Layout(root: path).versionFile)
        }
    }

    /// Makes the cache directory and its missing parents, each made durable in its parent
    /// before the next step (`fsync(2)` of the parent after each `mkdir`), so that a power cut
    /// cannot take away a directory that acknowledged writes live in.
    private static func createDirectories(_ path: String) throws(DiskCacheError) {
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
    /// Returns how many files or links it moved out of the way of a shard.
    @discardableResult
    static func makeShards(_ layout: Layout) throws(DiskCacheError) -> Int {
        let directory = layout.directory
        var movedAside = 0
        let listed = try directory.listDirectory(layout.root).get(orThrow: "list the cache directory", path: layout.root)
        let directories = Set(listed.lazy.filter { $0.type == DT_DIR }.map(\.name))
        var made = false
        for name in Layout.shardNames where !directories.contains(name) {
            let path = layout.root + "/" + name
            switch directory.mkdir(path, 0o700) {
            case .success:
                made = true
            case .failure(.fileExists):
                // The listing's type may be unknown on some filesystems: look.
                if case .success(let info) = directory.lstat(path), info.st_mode & S_IFMT == S_IFDIR { continue }
                // A file or a link where a shard belongs: never followed, moved out of the way.
                try moveAside(path, layout).get(orThrow: "move aside what is in place of a shard directory", path: path)
                movedAside += 1
                try directory.mkdir(path, 0o700).get(orThrow: "create a shard directory", path: path)
                made = true
            case .failure(let error):
                throw DiskCacheError.io(error, "create a shard directory", path: path)
            }
        }
        if made {
            try directory.fsyncDirectory(layout.root).get(orThrow: "sync the cache directory", path: layout.root)
        }
        return movedAside
    }

    /// Gets something out of the way of one of the cache's own names: a symbolic link is
    /// removed (never its target); a file or directory of the wrong kind is moved into `tmp/`,
    /// which the next open empties. Nothing outside the cache is touched.
    static func moveAside(_ path: String, _ layout: Layout) -> Result<Void, SyscallError> {
        let directory = layout.directory
        switch directory.lstat(path) {
        case .failure(.noSuchFileOrDirectory): return .success(())
        case .failure(let error): return .failure(error)
        case .success(let info) where info.st_mode & S_IFMT == S_IFLNK: return directory.unlink(path)
        case .success: break
        }
        let name = path.split(separator: "/").last.map(String.init) ?? "item"
        if case .failure(.noSuchFileOrDirectory) = directory.lstat(layout.temp) { _ = directory.mkdir(layout.temp, 0o700) }
        var attempt = 0
        while true {
            let target = layout.tempFile("aside-\(name)-\(getpid())-\(attempt)")
            switch directory.rename(path, target) {
            case .failure(let error) where (error == .fileExists || error.rawValue == ENOTEMPTY || error == .isDirectory
                                            || error == .notDirectory) && attempt < 100:
                attempt += 1
            case let result:
                return result
            }
        }
    }

    /// Takes the cache: an exclusive `flock` on `LOCK` (which then names this process) and on
    /// the cache directory itself. `LOCK` is what older versions of the library lock and what
    /// names the owner; the directory's lock is the one no one can take away by unlinking a
    /// file, so a second opener is refused even after `LOCK` was deleted under an open cache.
    static func takeLocks(_ layout: Layout) throws(DiskCacheError) -> [SharedDescriptor] {
        let path = layout.lockFile
        let lockFile = SharedDescriptor(try layout.directory.open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0o600)
            .get(orThrow: "open the lock file", path: path))
        let directory = SharedDescriptor(try layout.directory.open(layout.root, O_RDONLY | O_DIRECTORY)
            .get(orThrow: "open the cache directory", path: layout.root))
        try lock(lockFile.fd, optional: false, layout)
        try lock(directory.fd, optional: true, layout)
        writeNote("\(getpid())\n", to: lockFile.fd)
        return [lockFile, directory]
    }

    /// Shared mode's way in: a shared `flock` on the cache directory (which an exclusive owner,
    /// or an older version of the library, holds exclusively: then `.locked`), then, in
    /// `SHARED`, the opening lock (waited for) and a test of whether any other instance holds
    /// the presence lock. The caller lets go of the opening lock when it is done.
    ///
    /// An instance alone in `SHARED` is alone in the cache only if no instance holds the
    /// directory's presence byte (``SharedRegion/directoryPresence``, which no change to
    /// `SHARED` takes away): when one does, `SHARED` was removed or replaced under an open
    /// group, and recovering as if alone would start a second group on the same journal. So
    /// would trusting a page that fails validation. In both cases the open waits, up to
    /// `lockTimeout`, for the group to close (its instances fail their next write and are to
    /// be closed), then fails with ``DiskCacheError/Code/sharedPageReplaced`` or
    /// ``DiskCacheError/Code/sharedPageDamaged``. What is not a regular file at `SHARED` (a
    /// directory, link or FIFO) is moved aside once no instance is open.
    static func joinShared(_ layout: Layout, lockTimeout: Duration, logger: Logger) throws(DiskCacheError)
        -> (directory: SharedDescriptor, region: SharedRegion, alone: Bool, movedAside: Bool) {
        let directory = SharedDescriptor(try layout.directory.open(layout.root, O_RDONLY | O_DIRECTORY)
            .get(orThrow: "open the cache directory", path: layout.root))
        try lock(directory.fd, optional: true, shared: true, layout)
        let deadline = ContinuousClock.now + lockTimeout
        var pause: UInt32 = 1_000
        var movedAside = false
        while true {
            switch try joinSharedOnce(layout, directory: directory, lockTimeout: lockTimeout, logger: logger, movedAside: &movedAside) {
            case .success(let joined):
                // Held for as long as `directory` is open: this instance's presence in the cache.
                _ = SharedRegion.range(directory.fd, start: SharedRegion.directoryPresence, length: 1, .shared, wait: false)
                return (directory, joined.region, joined.alone, movedAside)
            case .failure(let error):
                guard ContinuousClock.now < deadline else { throw error }
                usleep(pause)
                pause = min(pause * 2, 50_000)
            }
        }
    }

    /// One try of ``joinShared(_:lockTimeout:logger:)``: a failure is one that waiting for the
    /// open group to close may cure.
    private static func joinSharedOnce(_ layout: Layout, directory: SharedDescriptor, lockTimeout: Duration, logger: Logger,
                                       movedAside: inout Bool) throws(DiskCacheError) -> Result<(region: SharedRegion, alone: Bool), DiskCacheError> {
        let path = layout.root + "/" + SharedRegion.fileName
        let othersOpen = { SharedRegion.isHeld(directory: directory.fd) }
        let replaced = DiskCacheError(code: .sharedPageReplaced,
                                      message: "SHARED was removed or replaced while other instances have the cache open, and they did not all close within \(lockTimeout); close them (each fails its next write with sharedPageReplaced) and open again",
                                      path: path)
        if case .success(let info) = layout.directory.lstat(path), info.st_mode & S_IFMT != S_IFREG {
            guard !othersOpen() else { return .failure(replaced) }
            // Another opener may be moving it at the same moment: tried again either way.
            guard case .success = moveAside(path, layout) else { return .failure(replaced) }
            movedAside = true
            logger.warning("Moved aside what was in place of the shared page (not a regular file)", metadata: ["path": "\(path)"])
        }
        let file = OpenFile(try SharedRegion.openFile(layout).get(orThrow: "open the shared page", path: path))
        let fd = file.fd
        // A FIFO or device put there since the look above: moved aside on the next try.
        guard case .success(let opened) = Syscall.fstat(fd), opened.st_mode & S_IFMT == S_IFREG else {
            return .failure(replaced)
        }
        let timeout = lockTimeout.nanoseconds
        if cdiskcache_range_lock_timed(fd, SharedRegion.Lock.opening.rawValue, 1, SharedRegion.Kind.exclusive.rawValue, timeout) != 0 {
            let error = SyscallError.current
            if error.rawValue == ETIMEDOUT {
                throw DiskCacheError(code: .lockTimeout,
                                     message: "Waited \(lockTimeout) for another instance to finish opening or closing the cache (a stopped or hung process?)",
                                     path: path, errno: ETIMEDOUT)
            }
            throw DiskCacheError.io(error, "lock the shared page (the filesystem may not support shared caches: open it with sharing: .exclusive)", path: path)
        }
        // The name may have been given to another file between the open and the lock.
        guard case .success(let named) = layout.directory.lstat(path), named.st_ino == opened.st_ino, named.st_dev == opened.st_dev else {
            return .failure(replaced)
        }
        let alone: Bool
        switch SharedRegion.range(fd, start: SharedRegion.Lock.presence.rawValue, length: 1, .exclusive, wait: false) {
        case .success: alone = true
        case .failure(.wouldBlock): alone = false
        case .failure(let error):
            throw DiskCacheError.io(error, "lock the shared page", path: path)
        }
        if alone && othersOpen() {
            return .failure(replaced)
        }
        // From here the region owns the file; dropping it lets go of every lock taken on it.
        let region: SharedRegion
        do {
            region = try SharedRegion.map(file, layout: layout, initialise: alone, lockTimeout: lockTimeout)
        } catch where error.code == .sharedPageDamaged || error.code == .sharedPageReplaced {
            var error = error
            error.message += "; waited \(lockTimeout) for the instances that have the cache open to close. Close them (each fails its next write with \(error.code)) and open again"
            return .failure(error)
        }
        try region.lock(.presence, .shared).get(orThrow: "lock the shared page", path: path)
        if alone {
            // Names no process: tools that report the owner say the cache is shared.
            if case .success(let lockFile) = layout.directory.open(layout.lockFile, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0o600) {
                OpenFile(lockFile).withFD { writeNote("shared\n", to: $0) }
            }
        }
        return .success((region, alone))
    }

    /// The kind of network filesystem `path` is on, or nil for a local one (`statfs(2)`'s
    /// `f_type`). Advisory locks and a page mapped by several processes are not coherent
    /// between machines on these, so a cache there is never shared.
    static func networkFilesystem(_ path: String, probe: (@Sendable (String) -> Int?)?) -> String? {
        let type: Int
        if let probe {
            guard let probed = probe(path) else { return nil }
            type = probed
        } else {
            let found = cdiskcache_filesystem_type(path)
            guard found >= 0 else { return nil }
            type = Int(found)
        }
        let kinds: [Int: String] = [
            0x6969: "NFS", 0x517B: "SMB", 0xFF53_4D42: "CIFS", 0xFE53_4D42: "SMB2", 0x0102_1997: "9P",
            0x00C3_6400: "Ceph", 0x5346_414F: "AFS", 0x6573_5546: "FUSE", 0x7375_7245: "Coda", 0x564C: "NCP",
        ]
        return kinds[type & 0xFFFF_FFFF]
    }

    /// `flock(LOCK_EX | LOCK_NB)` on `fd`, or `.locked` naming the owner. With `optional`, a
    /// filesystem that cannot lock a directory (some network filesystems) leaves `LOCK` alone
    /// in charge.
    private static func lock(_ fd: Int32, optional: Bool, shared: Bool = false, _ layout: Layout) throws(DiskCacheError) {
        var attempt = 0
        let take = shared ? Syscall.lockShared : Syscall.lockExclusive
        var result = take(fd)
        // Who holds the lock may let go in a moment: an inspector asking whether the cache is
        // open holds `LOCK` and the directory shared for a few microseconds (try again a few
        // times within 10 ms); and a child this process is starting holds a copy of every
        // descriptor between fork and exec, which keeps a lock alive unless it was unlocked
        // before its descriptor closed (`close()` and `deinit` unlock; an open that failed
        // does not): when the lock's owner is this very process, give such a copy up to 200 ms.
        while case .failure(.wouldBlock) = result, attempt < 20, attempt < 5 || lockOwner(layout) == Int(getpid()) {
            attempt += 1
            usleep(attempt <= 5 ? 2_000 : 10_000)
            result = take(fd)
        }
        switch result {
        case .success:
            return
        case .failure(let error) where error == .wouldBlock:
            var owner = ""
            if let pid = lockOwner(layout) {
                owner = pid == Int(getpid()) ? " (by another DiskCache in this process)" : " (by process \(pid))"
            }
            if shared {
                throw DiskCacheError(code: .locked,
                                     message: "The cache is open exclusively\(owner) (sharing: .exclusive, or an older version of this library); it can be shared once that closes",
                                     path: layout.root)
            }
            if !owner.isEmpty || !isSharedNote(layout) {
                throw DiskCacheError(code: .locked,
                                     message: "The cache is already open\(owner); an exclusive DiskCache must be its only one",
                                     path: layout.root)
            }
            throw DiskCacheError(code: .locked,
                                 message: "The cache is open by instances sharing it; it can be opened exclusively once they all close (or open it with sharing: .shared)",
                                 path: layout.root)
        case .failure where optional:
            return
        case .failure(let error):
            throw DiskCacheError.io(error, "lock the cache directory", path: layout.lockFile)
        }
    }

    /// Replaces what `LOCK` says (an owner's pid, or "shared"), for error messages and tools.
    private static func writeNote(_ text: String, to fd: Int32) {
        _ = Syscall.ftruncate(fd, 0)
        _ = Array(text.utf8).withUnsafeBytes { Syscall.pwriteAll(fd, $0, at: 0) }
    }

    /// Whether the lock file says the cache was last opened in shared mode.
    private static func isSharedNote(_ layout: Layout) -> Bool {
        guard case .success(let bytes?) = FileIO.readAll(layout.lockFile, limit: 64, in: layout.directory) else { return false }
        return String(decoding: bytes, as: UTF8.self).hasPrefix("shared")
    }

    /// The pid the lock file names.
    private static func lockOwner(_ layout: Layout) -> Int? {
        guard case .success(let bytes?) = FileIO.readAll(layout.lockFile, limit: 64, in: layout.directory) else { return nil }
        return Int(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// The cache's format version, read again now that the cache is locked; writes the mark
    /// (durably) for a new cache, adds the magic line to a cache marked before it had one, and
    /// refuses a cache of another kind (``checkKind(found:application:_:path:)``). A mark
    /// without a kind line takes this open's kind (and, when the open asks for none, keeps its
    /// application line), so that from now on another kind is refused.
    private func checkVersion() throws(DiskCacheError) -> (format: Int, application: Int?, kind: String?) {
        switch try FormatMarker.readRefusingNewer(root: layout.root) {
        case .marked(let version, let application, let kind):
            try Self.checkKind(found: kind, application: application, configuration, path: layout.root)
            guard kind == nil, let adopted = configuration.kind else { return (version, application, kind) }
            try Self.writeVersion(layout, version: version, application: application, kind: adopted)
            return (version, application, adopted)
        case .legacy(let version):
            try Self.checkKind(found: nil, application: nil, configuration, path: layout.root)
            try Self.writeVersion(layout, version: version, kind: configuration.kind)
            return (version, nil, configuration.kind)
        case .missing where isNew:
            try Self.writeVersion(layout, application: configuration.applicationVersion, kind: configuration.kind)
            return (Layout.formatVersion, configuration.applicationVersion, configuration.kind)
        case .missing, .damaged:
            throw DiskCacheError(code: .notACache, message: "The cache's VERSION file changed while it was being opened", path: layout.versionFile)
        }
    }

    /// Refuses (``DiskCacheError/Code/otherKind``, nothing changed) a cache whose mark names
    /// another kind than `configuration` asks for; or, for a mark without a kind (written
    /// before caches recorded one, or by a tool), whose application version is not the one
    /// asked for: nothing says such entries are this kind's, so they are not emptied. An open
    /// that names no kind (a tool) takes any cache.
    static func checkKind(found: String?, application: Int?, _ configuration: DiskCache.Configuration,
                          path: String) throws(DiskCacheError) {
        guard let wanted = configuration.kind else { return }
        if let found {
            guard found != wanted else { return }
            throw DiskCacheError(code: .otherKind,
                                 message: "The directory holds a cache of kind \"\(found)\", and this open asks for kind \"\(wanted)\"; nothing in it was changed. Give each its own directory",
                                 path: path)
        }
        guard let asked = configuration.applicationVersion, asked != application else { return }
        let had = application.map { "application version \($0)" } ?? "no application version"
        throw DiskCacheError(code: .otherKind,
                             message: "The directory holds a cache marked before caches recorded their kind, with \(had), and this open asks for kind \"\(wanted)\" with application version \(asked); it may hold another application's data, so nothing in it was changed. Give this cache its own directory, or remove that one",
                             path: path)
    }

    /// Writes `VERSION` (the mark, see ``FormatMarker``): a temporary file, fsynced, renamed
    /// into place, and the directory fsynced.
    static func writeVersion(_ layout: Layout, version: Int = Layout.formatVersion, application: Int? = nil,
                             kind: String? = nil) throws(DiskCacheError) {
        let path = layout.versionFile
        // Named for this process: two processes making the same new cache do not collide.
        let temp = layout.root + "/" + FormatMarker.temporaryPrefix + "\(getpid())"
        layout.directory.removeTree(temp)
        try FormatMarker.contents(version: version, application: application, kind: kind).withUnsafeBytes { FileIO.writeNewFile(temp, $0, sync: true, in: layout.directory) }
            .get(orThrow: "write the VERSION file", path: temp)
        try layout.directory.rename(temp, path).get(orThrow: "write the VERSION file", path: path)
        try layout.directory.fsyncDirectory(layout.root).get(orThrow: "sync the cache directory", path: layout.root)
    }

    /// Writes `CACHEDIR.TAG` (the Cache Directory Tagging Specification), after the mark, so
    /// that backup and archiving tools that honour it (tar --exclude-caches, restic, borg,
    /// rsync filters) skip the cache. Not synced: a power cut that takes it takes nothing else.
    static func writeCacheDirectoryTag(_ layout: Layout) throws(DiskCacheError) {
        switch Layout.cacheDirectoryTag.withUnsafeBytes({ FileIO.writeNewFile(layout.cacheDirectoryTag, $0, sync: false, in: layout.directory) }) {
        case .success, .failure(.fileExists): return
        case .failure(let error): throw DiskCacheError.io(error, "write CACHEDIR.TAG", path: layout.cacheDirectoryTag)
        }
    }

    #if canImport(Darwin)
    /// Apple platforms: marks the cache's directory excluded from backups (iCloud and Time
    /// Machine honour `isExcludedFromBackup`, not `CACHEDIR.TAG`), at every open so that a cache
    /// made before is marked too; a failure is logged, not thrown (the cache works without it).
    /// Then gives the directory and the directories in it (shards, `tmp/`) the chosen data
    /// protection class (``DiskCache/Configuration/fileProtection``), which the files made in
    /// them afterwards inherit; that failure is thrown, since the caller asked for it.
    static func applyApplePlatformAttributes(_ layout: Layout, configuration: DiskCache.Configuration) throws(DiskCacheError) {
        var url = URL(fileURLWithPath: layout.root, isDirectory: true)
        do {
            var values = URLResourceValues()
            values.isExcludedFromBackup = true
            try url.setResourceValues(values)
        } catch {
            configuration.logger.warning("Cannot exclude the cache from backups",
                                         metadata: ["path": "\(layout.root)", "error": "\(error)"])
        }
        guard let protection = configuration.fileProtection else { return }
        do {
            let manager = FileManager.default
            try manager.setAttributes([.protectionKey: protection], ofItemAtPath: layout.root)
            for name in try manager.contentsOfDirectory(atPath: layout.root) {
                let path = layout.root + "/" + name
                var isDirectory: ObjCBool = false
                guard manager.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else { continue }
                try manager.setAttributes([.protectionKey: protection], ofItemAtPath: path)
            }
        } catch {
            throw DiskCacheError(code: .ioFailure, message: "cannot set the cache's file protection: "
                                 + "\(error.localizedDescription)", path: layout.root)
        }
    }
    #endif

    // MARK: - Format 1

    /// Moves a format-1 cache's entry files from `ab/cd/` into `ab/`, removes the inner
    /// directories (and the files no record vouched for), makes it all durable, and only then
    /// writes `VERSION` 2. Interrupted, it runs again at the next open: a file already moved is
    /// simply not found at its old name.
    private func migrateFromFormat1(_ index: Index, application: Int?, kind: String?) throws(DiskCacheError) {
        let old = layout.withVersion(1)
        var moved = 0
        for (hash, entry) in index.entries {
            let files = [(old.metaFile(hash, slot: entry.slot), layout.metaFile(hash, slot: entry.slot))]
                + (entry.isInline ? [] : [(old.bodyFile(hash, slot: entry.slot), layout.bodyFile(hash, slot: entry.slot))])
            for (from, to) in files {
                switch layout.directory.rename(from, to) {
                case .success: moved += 1
                case .failure(.noSuchFileOrDirectory): break
                case .failure(let error): throw DiskCacheError.io(error, "move an entry file to the format-2 layout", path: from)
                }
            }
        }
        removeFormat1Shards(keepingOuter: true)
        let journal = try layout.directory.open(layout.journal, FileIO.readFlags).get(orThrow: "open the journal", path: layout.journal)
        defer { Syscall.close(journal) }
        try Syscall.syncFileSystem(journal).get(orThrow: "sync the cache's filesystem", path: layout.root)
        try Self.writeVersion(layout, application: application, kind: kind)
        logger.notice("Migrated the cache to format \(Layout.formatVersion)", metadata: ["files": "\(moved)", "entries": "\(index.count)"])
    }

    /// Removes format 1's inner shard directories `ab/cd/` with whatever they still hold, and
    /// the outer ones too unless `keepingOuter`.
    private func removeFormat1Shards(keepingOuter: Bool = false) {
        guard case .success(let outers) = layout.directory.listDirectory(layout.root) else { return }
        for (outer, _) in outers where Layout.isShardName(outer) {
            let outerPath = layout.root + "/" + outer
            guard !keepingOuter else {
                guard case .success(let inners) = layout.directory.listDirectory(outerPath) else { continue }
                for (inner, type) in inners where type == DT_DIR && Layout.isShardName(inner) {
                    layout.directory.removeTree(outerPath + "/" + inner)
                }
                continue
            }
            layout.directory.removeTree(outerPath)
        }
    }

    /// Empties `tmp/` (interrupted writes, trash of `removeAll`); returns how many top-level items it removed.
    private func cleanTemporaryFiles() throws(DiskCacheError) -> Int {
        let temp = layout.temp
        switch layout.directory.lstat(temp) {
        case .success(let info) where info.st_mode & S_IFMT == S_IFDIR:
            break
        case .success:
            // A file or link where tmp/ belongs: not ours to follow; replace it.
            _ = layout.directory.unlink(temp)
            try layout.directory.mkdir(temp, 0o700).get(orThrow: "create tmp/", path: temp)
            return 1
        case .failure:
            try layout.directory.mkdir(temp, 0o700).get(orThrow: "create tmp/", path: temp)
            return 0
        }
        let names = try layout.directory.listDirectory(temp).get(orThrow: "list tmp/", path: temp)
        for (name, _) in names { layout.directory.removeTree(temp + "/" + name) }
        return names.count
    }

    // MARK: - The journal

    enum JournalContents {
        case missing
        case unreadable
        case valid([UInt8])
    }

    /// After an unclean shutdown: rewrites the `.meta` files that the PUT+FILE records at
    /// `offsets` (those no checkpoint covers, ``Journal/CarriedFiles/uncovered``) carry, for the
    /// entries they still commit (a later PUT, REMOVE or CLEAR left another entry, or none, in
    /// the index), where the file differs from the record (a power cut took the unsynced file
    /// or part of it); each rewritten file, then its shard directory, is synced. Returns how
    /// many were rewritten. A file that cannot be written is left for the first read to find
    /// damaged (a miss, the entry removed).
    private func restoreCarriedFiles(_ bytes: [UInt8], at offsets: [Int], index: Index) -> Int {
        bytes.withUnsafeBytes { journal in
            var restored = 0
            var shards: Set<String> = []
            for offset in offsets {
                guard case (.put(let put), _, _)? = Journal.decodeRecord(journal, at: offset),
                      let entry = index[put.hash], entry.slot == put.slot, entry.isSameCommit(as: IndexEntry(put)) else { continue }
                let file = UnsafeRawBufferPointer(rebasing: journal[Journal.carriedFile(journal, at: offset)])
                let path = layout.metaFile(put.hash, slot: put.slot)
                if case .success(let existing?) = FileIO.readAll(path, limit: file.count, in: layout.directory),
                   existing.elementsEqual(file) { continue }
                switch FileIO.writeEntryFile(path, [file], sync: true, in: layout.directory) {
                case .success:
                    restored += 1
                    shards.insert(layout.shardDirectory(put.hash))
                case .failure(let error):
                    logger.warning("Could not restore an entry file from the journal", metadata: ["path": "\(path)", "error": "\(error)"])
                }
            }
            for shard in shards.sorted() { _ = layout.directory.fsyncDirectory(shard) }
            if restored > 0 {
                logger.warning("Restored entry files from the journal after an unclean shutdown", metadata: ["count": "\(restored)"])
            }
            return restored
        }
    }

    /// Rewrites a version-1 journal's header as the current version, durably, before records
    /// version 1 does not know can be appended (an older library then refuses the journal
    /// instead of skipping those records as damage).
    private func upgradeJournalHeader() throws(DiskCacheError) {
        let fd = try layout.directory.open(layout.journal, O_WRONLY | O_NOFOLLOW | O_NONBLOCK).get(orThrow: "open the journal", path: layout.journal)
        defer { Syscall.close(fd) }
        try Journal.header().withUnsafeBytes { Syscall.pwriteAll(fd, $0, at: 0) }.get(orThrow: "write the journal's header", path: layout.journal)
        try Syscall.fsync(fd).get(orThrow: "sync the journal", path: layout.journal)
    }

    private func readJournal() throws(DiskCacheError) -> JournalContents {
        let path = layout.journal
        switch FileIO.readAll(path, limit: Int.max, in: layout.directory) {
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
        var index = Index(blockSize: blockSize, policy: configuration.evictionPolicy)
        // The newest valid slot of each hash wins; everything else is removed.
        var found: [KeyHash: Journal.Put] = [:]
        ShardScanner(layout: layout).forEachEntryFile { hash, slot, kind, path in
            guard kind == .meta else {
                // A body is checked with its metadata file; one without is garbage.
                if case .failure(.noSuchFileOrDirectory) = layout.directory.lstat(layout.metaFile(hash, slot: slot)) {
                    _ = layout.directory.unlink(path)
                }
                return true
            }
            let body = layout.bodyFile(hash, slot: slot)
            guard let put = checkedEntry(hash: hash, slot: slot, metaPath: path, bodyPath: body) else {
                _ = layout.directory.unlink(path)
                _ = layout.directory.unlink(body)
                return true
            }
            if let other = found[hash] {
                let (keep, drop) = other.created >= put.created ? (other, put) : (put, other)
                _ = layout.directory.unlink(layout.metaFile(hash, slot: drop.slot))
                _ = layout.directory.unlink(layout.bodyFile(hash, slot: drop.slot))
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
        try Self.replaceJournal(layout: layout, with: journal)
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
        guard case .success(let bytes?) = FileIO.readAll(metaPath, limit: IndexEntry.maximumMetaSize, in: layout.directory),
              let meta = bytes.withUnsafeBytes({ EntryMetadata.decode($0) }),
              meta.size >= 0, meta.size <= IndexEntry.maximumBodySize,
              configuration.keyHasher.hash(meta.key) == hash
        else { return nil }
        if let inline = meta.inlineBody {
            guard inline.withUnsafeBytes({ Checksum.xxh3($0) }) == meta.checksum else { return nil }
            _ = layout.directory.unlink(bodyPath)
        } else {
            guard case .success(let info) = layout.directory.lstat(bodyPath), info.st_mode & S_IFMT == S_IFREG,
                  Int64(info.st_size) == meta.size,
                  case .success(let (body, checksum)?) = FileIO.readHashing(bodyPath, count: Int(meta.size), in: layout.directory)
            else { return nil }
            body.deallocate()
            guard checksum == meta.checksum else { return nil }
        }
        return Journal.Put(hash: hash, size: meta.size, metaSize: UInt32(bytes.count), isInline: meta.inlineBody != nil,
                           slot: slot, checksum: meta.checksum, created: meta.created, accessed: meta.accessed,
                           expires: meta.expires)
    }

    /// Writes a whole journal file: to `journal.tmp`, synced, renamed over `journal`, directory synced.
    private static func replaceJournal(layout: Layout, with bytes: [UInt8]) throws(DiskCacheError) {
        let temp = layout.journalTemp
        // A directory (or anything else) left at journal.tmp is in the way of every rewrite.
        layout.directory.removeTree(temp)
        try bytes.withUnsafeBytes { FileIO.writeNewFile(temp, $0, sync: true, in: layout.directory) }
            .get(orThrow: "write a new journal", path: temp)
        try layout.directory.rename(temp, layout.journal).get(orThrow: "replace the journal", path: layout.journal)
        try layout.directory.fsyncDirectory(layout.root).get(orThrow: "sync the cache directory", path: layout.root)
    }
}

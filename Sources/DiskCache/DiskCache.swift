public import Foundation
import Dispatch
import Logging
import DiskCacheLocking
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A persistent key-value cache made of plain files and an append-only journal.
///
/// ```swift
/// let cache = try DiskCache(directory: URL(fileURLWithPath: "/var/cache/myapp"),
///                           configuration: .init(diskCapacity: 512 << 20, durability: .immediate))
/// try cache.store(Data("hello".utf8), for: "greeting")
/// let value = cache.data(for: "greeting")   // nil on miss, expiry or failed checksum
/// ```
///
/// **Layout.** A key (any string) is hashed with XXH3-128; the hash names the entry's files
/// in one of 256 shard directories made when the cache is created: `ab/<hash>.meta`, a binary
/// property list holding the full key, sizes, dates, the body's XXH3-64 checksum and the
/// caller's metadata, and `ab/<hash>.body`, the raw bytes (bodies up to
/// ``Configuration/inlineThreshold`` live inside the `.meta` file instead). See
/// docs/on-disk-format.md.
///
/// **Commit and recovery.** A write creates its files in the slot the committed entry does not
/// use, then appends a record to the journal: that record is the commit point, and only then
/// are the earlier value's files discarded (its `.meta` file kept for a later write to reuse, see
/// docs/on-disk-format.md). Opening replays the journal to rebuild the in-memory
/// index without listing directories. A torn or corrupt journal tail is cut at the last good
/// record; a damaged record in the middle costs only the entries it described; a missing
/// journal is rebuilt by scanning the shards. After an unclean shutdown a background scan
/// removes files no record vouches for.
///
/// **Integrity.** Every read compares the full key and (by default) the body checksum, so a
/// read never returns bytes that were not stored for its key: a hash collision is a miss, and
/// a corrupt or missing file makes the entry a miss that is removed and counted.
///
/// **Durability.** See ``Durability`` and docs/durability.md.
///
/// **Large bodies.** ``store(contentsOf:for:metadata:expires:transfer:)-5h4kl``,
/// ``makeWriter(for:metadata:expires:)-8wrae`` and ``store(_:for:metadata:expires:)-(Chunks,_,_,_)``
/// store a body without holding it in memory; ``chunks(for:chunkSize:)`` and
/// ``withFile(for:_:)`` read one the same way.
///
/// **Sharing.** By default any number of processes, and of `DiskCache` instances in one
/// process, open a directory together: each sees what the others store and remove from its next
/// call on, one instance at a time compacts and sweeps, and limits hold for the cache as a whole
/// (``Sharing``). With ``Configuration/sharing`` `.exclusive` one instance owns the
/// directory, and any other open fails with ``DiskCacheError/Code/locked``.
///
/// **Threads.** All methods may be called from any thread. Reads run in parallel; writes of
/// different keys do their file I/O in parallel. The synchronous calls do their I/O on the
/// caller's thread; in an `async` context the same calls are `async` and do it on a small pool
/// of threads the caches share, never on Swift's cooperative pool. Background work (group
/// commit, access-time batches, compaction, sweeping) runs on a dispatch queue the cache owns.
public final class DiskCache: Sendable {
    /// The cache directory.
    public let directory: URL
    /// The settings the cache was opened with.
    public let configuration: Configuration

    let layout: Layout
    /// Body files kept mapped for checks (``mappedBodyCapacity``; none by default).
    let mappedBodies: MappedBodies
    let blockSize: Int64
    let state: StateLock
    /// Shared mode's page and locks (see ``SharedRegion``); nil in exclusive mode.
    let sharedRegion: SharedRegion?
    /// How deep ``asHousekeeper(wait:_:)`` calls are nested (they all run on the maintenance
    /// queue, so nesting is the only way two overlap).
    let housekeepingDepth = PthreadMutex(0)
    let journalSynced = PthreadMutex(Journal.Position(generation: 0, end: 0))
    let stripes: [StripeLock] = (0..<SharedRegion.stripeCount).map { _ in StripeLock() }
    /// `LOCK` and the directory, `flock`ed while the cache is open; emptied by `close()`.
    let locks: PthreadMutex<[SharedDescriptor]>
    let temporaryCounter = Atomic<UInt64>(0)
    /// Names this instance's files in `tmp/` apart from any other's (see `temporaryFile`).
    let temporaryTag = String(UInt32.random(in: 0...UInt32.max), radix: 36)
    /// This instance's `.meta` files of replaced and removed entries, for writes to reuse.
    let retiredFiles = RetiredFiles()
    /// Entry files kept open after a read (`Configuration.keptOpenFiles`).
    let keptFiles: KeptFiles
    let maintenance: Maintenance
    let logger: Logger

    // MARK: - Opening

    /// Opens the cache in `directory`, creating it (mode 0700) if it does not exist.
    ///
    /// #### Errors
    /// - ``DiskCacheError/Code/notADirectory``: the path is a file (a symbolic link to a
    ///   directory is followed; links inside the cache never are).
    /// - ``DiskCacheError/Code/permissionDenied``: the directory cannot be read and written.
    /// - ``DiskCacheError/Code/notACache``: the directory is not empty and does not carry the
    ///   cache's mark (a `VERSION` file, see `docs/on-disk-format.md`); nothing in it was touched.
    ///   A cache whose mark was lost is marked again by ``restoreMark(directory:)``.
    /// - ``DiskCacheError/Code/locked``: it is open exclusively elsewhere, or this open is
    ///   exclusive and others have it open (in this process or another).
    /// - ``DiskCacheError/Code/newerFormat``: written by a newer version; left untouched.
    /// - ``DiskCacheError/Code/otherKind``: the directory holds a cache of another
    ///   ``Configuration/kind``; left untouched.
    ///
    /// #### Implementation details
    /// Reads the `VERSION` mark before anything else, takes `flock(LOCK_EX|LOCK_NB)` on `LOCK`
    /// and on the directory, empties `tmp/`, replays `journal` (cutting a
    /// torn tail with `ftruncate`), or rebuilds it by scanning the shards if it is missing.
    public init(directory: URL, configuration: Configuration = Configuration()) throws {
        self.directory = directory
        self.configuration = configuration
        self.logger = configuration.logger
        let opener = try Opener(path: directory.path, configuration: configuration)
        let opened = try opener.open()
        self.layout = opened.layout
        self.mappedBodies = opener.mappedBodies
        self.blockSize = opened.blockSize
        self.locks = PthreadMutex(opened.locks)
        var state = opened.state
        self.keptFiles = KeptFiles(limit: configuration.keptOpenFiles, budget: configuration.keptFilesBudget)
        state.keptFiles = keptFiles
        self.state = StateLock(state)
        self.sharedRegion = opened.state.shared?.region
        self.journalSynced.withLock { $0 = opened.state.journalEnd }
        self.maintenance = Maintenance(interval: configuration.maintenanceInterval)
        self.maintenance.start(owner: self, scanForOrphans: opened.needsOrphanScan)
        if let wanted = configuration.applicationVersion, opened.applicationVersion != wanted {
            // Entries another version of the same kind wrote (the open refused any other kind,
            // and a mark without a kind whose version differs): emptied first, then marked, so
            // that a crash in between empties it again at the next open.
            logger.warning("Emptying a cache written by another version of the application", metadata: [
                "path": "\(layout.root)", "kind": "\(opened.kind ?? "none")",
                "found": "\(opened.applicationVersion.map { "\($0)" } ?? "none")", "version": "\(wanted)",
                "entries": "\(count)",
            ])
            try removeAll()
            try flush()
            try Opener.writeVersion(layout, application: wanted, kind: opened.kind)
        }
    }

    deinit {
        try? close()
    }

    /// Writes the clean-shutdown record when this is the last instance to close and nothing is
    /// left to clean up: in exclusive mode unless the orphan scan is unfinished; in shared mode,
    /// as the last instance (no other holds the presence lock), when every instance that opened
    /// the cache since it was recovered closed cleanly (none was killed: it could have left
    /// files no record vouches for) and no orphan scan is due. Only the last one gives back
    /// the journal's reserved blocks.
    private func markClosed() throws(DiskCacheError) {
        guard let sharedRegion else {
            try state.withLock { state throws(DiskCacheError) in
                // Without a finished orphan scan, the next open must count as unclean and scan.
                guard !state.orphanScanPending else { return }
                _ = try state.append(Journal.encode(.close), records: 1, path: layout.journal)
            }
            return
        }
        // A page that cannot be trusted (its group is ending): nothing in it is counted, and the
        // journal gets no clean-shutdown record, so the next open recovers as after a crash.
        guard sharedRegion.broken == nil else { return }
        try sharedRegion.withLock(.opening) { () throws(DiskCacheError) in
            // Out before the next open or close begins: an instance opening after this one
            // must find it gone (or find it the last and recover, not join a closed journal).
            defer {
                state.withLock { $0.isClosed = true }
                sharedRegion.lock(.presence, .unlock)
            }
            let last: Bool
            if case .success = sharedRegion.lock(.presence, .exclusive, wait: false) { last = true } else { last = false }
            let stillOpen = sharedRegion.add(.openCount, -1)
            guard last else { return }
            try state.withLock { state throws(DiskCacheError) in
                let scanDue = state.orphanScanPending || sharedRegion[.flags] & SharedRegion.flagOrphanScanDue != 0
                if stillOpen == 0 && !scanDue {
                    _ = try state.append(Journal.encode(.close), records: 1, path: layout.journal)
                }
                try state.withAppendLock { state throws(DiskCacheError) in state.cutJournal() }
            }
        }
    }

    // MARK: - Reading

    /// The value stored for `key`, or nil on a miss, an expired entry, or an entry that fails
    /// its checksum (which is then removed and counted in ``statistics``).
    ///
    /// #### Implementation details
    /// One index lookup (which notes the access time, journaled later in a batch), then
    /// `open`/`pread`/`close` of the `.meta` file (and of the `.body` file unless the body is
    /// inline), and an XXH3-64 over the body. An inline body is handed out without a copy.
    public func data(for key: String) -> Data? {
        read(key, withEntry: false, pageCacheOnly: nil)?.data
    }

    /// The value and its entry (key, dates, metadata) in one read; nil as for ``data(for:)-7qmtl``.
    public func dataAndEntry(for key: String) -> (data: Data, entry: Entry)? {
        dataAndEntry(for: key, pageCacheOnly: nil)
    }

    /// ``dataAndEntry(for:)``, reading only what the page cache holds when `pageCacheOnly` is given.
    package func dataAndEntry(for key: String, pageCacheOnly: PageCacheOnly?) -> (data: Data, entry: Entry)? {
        guard let (data, entry) = read(key, withEntry: true, pageCacheOnly: pageCacheOnly), let entry else { return nil }
        return (data, entry)
    }

    /// The shared read path: index lookup, file reads, key and checksum checks, expiry. Without
    /// `withEntry` the metadata file is read in place (``EntryMetadata/ReadView``) instead of
    /// being decoded whole.
    private func read(_ key: String, withEntry: Bool, pageCacheOnly: PageCacheOnly?) -> (data: Data, entry: Entry?)? {
        // Nothing below throws: `open` never does.
        return try? openBody(for: key, pageCacheOnly: pageCacheOnly, reading: { hash, expected in
            withEntry ? readEntry(hash, key: key, expected: expected, wantBody: true, pageCacheOnly: pageCacheOnly)
                      : readValue(hash, key: key, expected: expected, pageCacheOnly: pageCacheOnly)
        }) { _, entry, meta, body in
            guard let body else { return .replaced }  // the files had no body this time: look again
            return .found((body, withEntry ? Entry(meta, entry) : nil))
        }
    }

    /// The entry's key, size, dates and metadata, without reading its body; nil when
    /// ``data(for:)-7qmtl`` would return nil for a missing or expired entry.
    public func entry(for key: String) -> Entry? {
        entry(for: key, pageCacheOnly: nil)
    }

    /// ``entry(for:)``, reading only what the page cache holds when `pageCacheOnly` is given.
    package func entry(for key: String, pageCacheOnly: PageCacheOnly?) -> Entry? {
        let hash = configuration.keyHasher.hash(key)
        // Looked up again when a write replaced the entry while its file was read.
        for _ in 0..<4 {
            guard let indexEntry = state.withLock({ $0.isClosed ? nil : $0.index[hash] }) else { return nil }
            let now = configuration.clock()
            guard !indexEntry.hasExpired(atMilliseconds: now) else { return nil }
            switch readEntry(hash, key: key, expected: indexEntry, wantBody: false, pageCacheOnly: pageCacheOnly) {
            case .found(let read): return read.meta.expires.map({ $0 > now }) ?? true ? Entry(read.meta, indexEntry) : nil
            case .replaced: continue
            default: return nil
            }
        }
        return nil
    }

    /// True if a value is stored for `key` (by the index alone: no file is read, so a
    /// damaged entry may still report true until it is read).
    public func contains(_ key: String) -> Bool {
        let hash = configuration.keyHasher.hash(key)
        let now = configuration.clock()
        return state.withLock { $0.index[hash].map { !$0.hasExpired(atMilliseconds: now) } ?? false }
    }

    /// ``contains(_:)`` of each of `keys`, under one lock.
    package func containing(_ keys: [String]) -> [Bool] {
        let hashes = keys.map { configuration.keyHasher.hash($0) }
        let now = configuration.clock()
        return state.withLock { state in hashes.map { state.index[$0].map { !$0.hasExpired(atMilliseconds: now) } ?? false } }
    }

    /// The body size the index records for `key` (no file is read); nil when there is no live entry.
    func indexedSize(for key: String) -> Int64? {
        let hash = configuration.keyHasher.hash(key)
        let now = configuration.clock()
        return state.withLock { state in
            state.index[hash].flatMap { $0.hasExpired(atMilliseconds: now) ? nil : $0.size }
        }
    }

    /// Live entries.
    public var count: Int { state.withLock { $0.index.count } }

    /// Bytes the cache occupies on disk: bodies, metadata files and the journal, each rounded
    /// up to the filesystem's block size. This is what ``Configuration/diskCapacity`` limits.
    public var totalSize: Int64 {
        state.withLock { $0.index.diskUsage + $0.journalDiskUsage(blockSize: blockSize) }
    }

    /// Sum of the body sizes of the live entries.
    public var logicalSize: Int64 { state.withLock { $0.index.logicalSize } }

    /// Counters since the cache was opened.
    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// Checks that the cache's directory and journal are still the ones this cache opened, and
    /// throws ``DiskCacheError/Code/notFound`` when they are not: the directory (or the journal
    /// in it) was removed, or the path now names another directory, while the cache was open.
    /// Such a cache goes on answering from its index, but nothing it stores persists and reads
    /// of stored entries miss; reopen it to start afresh. Three `stat` calls, cheap enough
    /// for a health check on every request; throws ``DiskCacheError/Code/closed`` once closed.
    public func checkDirectory() throws(DiskCacheError) {
        let root = layout.root
        func gone(_ what: String) -> DiskCacheError {
            DiskCacheError(code: .notFound, message: "\(what) while the cache was open: nothing stored from now on persists; reopen the cache",
                           path: root)
        }
        let opened: stat
        switch Syscall.fstat(layout.directory.fd) {
        case .success(let info): opened = info
        case .failure(let errno): throw DiskCacheError.io(errno, "stat the open cache directory", path: root)
        }
        if opened.st_nlink == 0 { throw gone("The cache directory was removed") }
        switch Syscall.statPath(root) {
        case .success(let now) where now.st_ino != opened.st_ino || now.st_dev != opened.st_dev:
            throw gone("The cache directory was replaced by another")
        case .success: break
        case .failure(let errno) where errno == .noSuchFileOrDirectory || errno == .notDirectory:
            throw gone("The cache directory was moved or removed")
        case .failure(let errno):
            throw DiskCacheError.io(errno, "stat the cache directory", path: root)
        }
        // A shared-mode instance may hold a journal generation a compaction elsewhere has
        // replaced (and unlinked) until its next append: only an exclusive one's must be linked.
        let journalUnlinked = try state.withLock { state throws(DiskCacheError) -> Bool in
            guard !state.isClosed else { throw DiskCacheError.closed() }
            guard state.shared == nil, case .success(let journal) = Syscall.fstat(state.journal.fd) else { return false }
            return journal.st_nlink == 0
        }
        if journalUnlinked { throw gone("The cache's journal was removed") }
    }

    // MARK: - Writing

    /// Stores `data` for `key`, replacing any earlier value (unless ``Configuration/admission``
    /// declines it).
    ///
    /// - Parameters:
    ///   - data: the value's bytes, stored as they are.
    ///   - key: any string; it is hashed for the file names and kept whole in the `.meta` file.
    ///   - metadata: strings kept with the entry and returned by ``entry(for:)-1kjfh``.
    ///   - expires: after this date the entry reads as a miss and the sweeper removes it.
    /// - Returns: true when the value was written; false when ``Configuration/admission``
    ///   declined it (never with the default, `.everyStore`), leaving the cache as it was.
    ///
    /// #### Errors
    /// ``DiskCacheError/Code/diskFull`` when the volume is full, ``DiskCacheError/Code/ioFailure``
    /// for other I/O errors, ``DiskCacheError/Code/invalidArgument`` when the metadata cannot fit
    /// in an entry (1 MiB), ``DiskCacheError/Code/closed``. A failed store leaves every other
    /// entry as it was, and the earlier value of `key` too: new files are written beside the
    /// committed ones and replace them only when the journal record commits.
    ///
    /// #### Implementation details
    /// Creates the entry's files directly under their names in the slot the committed entry does
    /// not use (`O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600, one `pwritev(2)` each: the metadata file
    /// holds the body too when it is at most ``Configuration/inlineThreshold``; or a `.meta` file
    /// of a replaced entry no longer than the new one, retired to `retired/`, renamed there and
    /// written over),
    /// appends a PUT record to the journal (the commit point), then discards the previous slot's
    /// files (its `.meta` file retired for reuse, its `.body` file unlinked). With
    /// `.immediate` durability it also fsyncs the journal after the append; before it, an inline
    /// entry whose metadata file is at most 256 KiB has the whole file copied into its record
    /// (PUT+FILE, synced by a checkpoint within a second), and any other entry has its files,
    /// then the shard directory, fsynced.
    @discardableResult
    public func store(_ data: Data, for key: String, metadata: [String: String] = [:], expires: Date? = nil) throws -> Bool {
        let hash = configuration.keyHasher.hash(key)
        guard admits(hash) else { return false }
        let now = configuration.clock()
        let checksum = data.withUnsafeBytes { Checksum.xxh3($0) }
        let meta = EntryMetadata(key: key, size: Int64(data.count), checksum: checksum, created: now, accessed: now,
                                 expires: expires?.milliseconds, metadata: metadata, inlineBody: nil)
        var isInline = data.count <= configuration.inlineThreshold
        var parts = meta.encodedParts(inlineBodyCount: isInline ? data.count : nil)
        var metaSize = parts.head.count + parts.tail.count + (isInline ? data.count : 0)
        if isInline && metaSize > IndexEntry.maximumMetaSize {
            isInline = false
            parts = meta.encodedParts(inlineBodyCount: nil)
            metaSize = parts.head.count + parts.tail.count
        }
        try EntryMetadata.checkFits(metaSize)
        let immediate = configuration.durability.mode == .immediate
        // `.immediate` with an inline body: the journal record carries the `.meta` file and is
        // the one flush; the file is left to the next checkpoint (see `PlacedFiles`).
        let carriesFile = immediate && isInline && metaSize <= Journal.maximumCarriedFile
        try commitWrite(hash, recordSize: Journal.putRecordSize + (carriesFile ? metaSize : 0)) { _, slot throws(DiskCacheError) in
            let put = Journal.Put(hash: hash, size: Int64(data.count), metaSize: UInt32(metaSize),
                                  isInline: isInline, slot: slot, checksum: checksum, created: now, accessed: now,
                                  expires: meta.expires)
            return try parts.head.withUnsafeBytes { head in
                parts.tail.withUnsafeBytes { tail in
                    data.withUnsafeBytes { body in
                        Result { () throws(DiskCacheError) -> PlacedFiles in
                            if !isInline {
                                try writeEntryFile(layout.bodyFile(hash, slot: slot), [body], hash: hash, sync: immediate,
                                                   action: "write the body")
                            }
                            let file = isInline ? [head, body, tail] : [head, tail]
                            try writeEntryFile(layout.metaFile(hash, slot: slot), file, hash: hash,
                                               sync: immediate && !carriesFile, reusing: true, action: "write the metadata")
                            return PlacedFiles(put: put, carryingRecord: carriesFile ? Journal.encodePut(put, carrying: file) : nil)
                        }
                    }
                }
            }.get()
        }
        return true
    }

    /// Counts a store of `key` toward ``Configuration/admission`` and says whether it is to be
    /// written: what ``store(_:for:metadata:expires:)-9xfei`` asks before it writes. Always true
    /// with `.everyStore`. The streamed stores (`store(contentsOf:…)`, `store(_:for:…)` of an
    /// `AsyncSequence`, `makeWriter(for:…)`) always write, since their bytes are on their way:
    /// ask this first and skip them when false.
    public func admitsStore(for key: String) -> Bool {
        admits(configuration.keyHasher.hash(key))
    }

    /// Removes the value stored for `key`, if any.
    ///
    /// #### Implementation details
    /// Appends a REMOVE record, then discards the entry's files (as a store discards a
    /// replaced value's).
    public func removeValue(for key: String) throws {
        let hash = configuration.keyHasher.hash(key)
        guard let entry = state.withLock({ $0.index[hash] }) else {
            try throwIfClosed()
            try syncRemovals()
            return
        }
        // Never remove another key's entry because its hash collides with this key.
        if case .otherKey = readEntry(hash, key: key, expected: entry, wantBody: false) { return }
        try remove(hash, reason: .explicit, key: key)
    }

    /// Removes every entry.
    ///
    /// #### Implementation details
    /// Appends a CLEAR record, renames the shard directories into `tmp/`, makes 256 empty ones
    /// (and fsyncs the cache directory), then deletes the old ones on the background queue (and
    /// at the next open, should the process stop first).
    public func removeAll() throws {
        let immediate = configuration.durability.mode == .immediate
        let trash = temporaryFile("trash")
        let position: Journal.Position = try withAllStripes { () throws(DiskCacheError) in
            let position = try state.withLock { state throws(DiskCacheError) in
                guard !state.isClosed else { throw DiskCacheError.closed() }
                let position = try state.append(Journal.encode(.clear), records: 1, path: layout.journal)
                state.statistics.removals += state.index.count
                state.index.removeAll()
                state.keptFiles?.dropAll()
                state.pendingAccess.removeAll()
                return position
            }
            // tmp/ replaced by a link or a file would be refused: make it a directory again first.
            if !layout.directory.lstat(layout.temp).isDirectory { _ = restoreDirectory(layout.temp) }
            _ = layout.directory.mkdir(trash)
            if case .success(let names) = layout.directory.listDirectory(layout.root) {
                for (name, _) in names where Layout.isShardName(name) {
                    _ = layout.directory.rename(layout.root + "/" + name, trash + "/" + name)
                }
            }
            // Every shard exists again, durably, before a store can be acknowledged into one.
            try Opener.makeShards(layout)
            return position
        }
        if immediate { try syncJournal(through: position) }
        // Not skipped by a close that follows: `close()` waits for the queue.
        maintenance.queue.async { [layout] in layout.directory.removeTree(trash) }
    }

    /// Removes the entries stored at or after `date` (`NSURLCache`'s
    /// `removeCachedResponsesSinceDate:`). Stamps go by the millisecond: what was stored in
    /// `date`'s millisecond goes, even just before it.
    public func removeEntries(modifiedSince date: Date) throws {
        let since = date.millisecondsAsLowerBound
        let hashes = try state.withLock { state throws(DiskCacheError) in
            guard !state.isClosed else { throw DiskCacheError.closed() }
            return state.index.entries.compactMap { $0.value.created >= since ? $0.key : nil }
        }
        for hash in hashes {
            try remove(hash, reason: .explicit, key: nil) { $0.created >= since }
        }
        try syncRemovals()
    }

    /// Journals pending access times and makes every acknowledged write durable now, whatever
    /// the durability mode.
    ///
    /// #### Implementation details
    /// `syncfs(2)` on the cache's filesystem (bodies, metadata and directories), then `fdatasync(2)`
    /// on the journal. In `.immediate` mode it is also a checkpoint (a CHECKPOINT record after
    /// the `syncfs`; see <doc:ChoosingADurabilityMode>).
    public func flush() throws {
        try flushPendingAccess()
        if let synced = try syncFiles(onlyIfNeeded: false) { try syncJournal(through: synced) }
    }

    /// Journals what is pending, marks a clean shutdown, releases the directory lock and
    /// stops background work. Later calls read as misses and writes throw
    /// ``DiskCacheError/Code/closed``. Called by `deinit` if you do not.
    public func close() throws {
        guard state.withLock({ !$0.isClosed }) else { return }
        maintenance.stop()
        let durable = configuration.durability.mode != .none
        // Holding every stripe: no write is between its rename and its journal append, and
        // none can start one; after this, appends throw `closed`. (This instance's stripes
        // only: writes of other instances sharing the cache go on.)
        let failure: DiskCacheError? = try withAllStripes(acrossInstances: false) { () throws(DiskCacheError) -> DiskCacheError? in
            guard state.withLock({ !$0.isClosed }) else { return nil }
            var failure: DiskCacheError?
            do throws(DiskCacheError) {
                try flushPendingAccess()
                let journal = state.withLock { $0.journal }
                // The renames and unlinks of this session reach the disk before a CLOSE record
                // says there is nothing left to clean up.
                if durable {
                    try Syscall.syncFileSystem(journal.fd).get(orThrow: "sync the cache's filesystem", path: layout.root)
                }
                try markClosed()
                if durable {
                    let journal = state.withLock { $0.journal }
                    try Syscall.fsync(journal.fd).get(orThrow: "sync the journal", path: layout.journal)
                    try syncJournalName()
                }
            } catch {
                failure = error
            }
            state.withLock { state in
                if state.shared == nil {
                    // Give back blocks reserved, and zeros written, past the end of the journal.
                    state.cutJournal()
                }
                state.isClosed = true
            }
            return failure
        }
        // Closed: no write takes or retires a file any more.
        retiredFiles.removeAll(layout: layout)
        sharedRegion?.lock(.presence, .unlock)
        locks.withLock { locks in
            for lock in locks { Syscall.unlock(lock.fd) }
            locks = []
        }
        mappedBodies.dropAll()
        if let failure { throw failure }
    }
}

extension DiskCache {
    /// Replaces the metadata of `key`'s entry without rewriting its body (an HTTP cache
    /// refreshing stored headers after a `304 Not Modified`). The entry counts as written now
    /// (for ``removeEntries(modifiedSince:)-3pt0b``); its expiry is kept.
    ///
    /// - Returns: false when there is no entry for `key` (or its files do not check out), in
    ///   which case nothing changed.
    ///
    /// #### Errors
    /// As ``store(_:for:metadata:expires:)-9xfei``.
    ///
    /// #### Implementation details
    /// Writes the new `.meta` file in the entry's unused slot (an inline body is copied into it;
    /// a `.body` file gets a second name there with `link(2)`, no bytes copied), appends a PUT
    /// record, then discards the old slot's files. The same crash guarantees as a store hold.
    @discardableResult
    public func updateMetadata(_ metadata: [String: String], for key: String) throws -> Bool {
        let hash = configuration.keyHasher.hash(key)
        let now = configuration.clock()
        let immediate = configuration.durability.mode == .immediate
        return try commitWrite(hash, counting: .metadata) { current, slot throws(DiskCacheError) -> PlacedFiles? in
            guard let current,
                  case .success(let file?) = FileIO.read(layout.metaFile(hash, slot: current.slot), count: Int(current.metaSize), in: layout.directory)
            else { return nil }
            guard var meta = file.withBytes(EntryMetadata.decode), meta.key == key, meta.checksum == current.checksum, meta.size == current.size,
                  (meta.inlineBody != nil) == current.isInline,
                  meta.expires.map({ $0 > now }) ?? true
            else { return nil }
            // An inline body is checked before it is copied into the new file.
            if let inline = meta.inlineBody, configuration.verifiesChecksums,
               inline.withUnsafeBytes({ Checksum.xxh3($0) }) != meta.checksum {
                return nil
            }
            meta.metadata = metadata
            meta.created = now
            meta.accessed = now
            let bytes = meta.encoded()
            try EntryMetadata.checkFits(bytes.count)
            if !current.isInline {
                let body = layout.bodyFile(hash, slot: slot)
                _ = layout.directory.unlink(body)  // a leftover of an interrupted write, if any
                switch layout.directory.link(layout.bodyFile(hash, slot: current.slot), body) {
                case .success: break
                case .failure(.noSuchFileOrDirectory): return nil  // the body is gone: nothing to update
                case .failure(let error): throw DiskCacheError.io(error, "link the body", path: body)
                }
            }
            try bytes.withUnsafeBytes { raw in
                Result { () throws(DiskCacheError) in
                    try writeEntryFile(layout.metaFile(hash, slot: slot), [raw], hash: hash, sync: immediate,
                                       reusing: true, action: "write the metadata")
                }
            }.get()
            return PlacedFiles(put: Journal.Put(hash: hash, size: meta.size, metaSize: UInt32(bytes.count),
                                                isInline: current.isInline, slot: slot, checksum: meta.checksum,
                                                created: now, accessed: now, expires: meta.expires))
        }
    }
}

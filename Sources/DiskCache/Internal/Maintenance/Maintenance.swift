import CDiskCacheSupport
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

/// The cache's background work, on a serial dispatch queue it owns (never Swift's
/// cooperative pool): a timer for group commit and access-time batches, and one-off jobs
/// (compaction, the orphan scan after an unclean shutdown, deleting `removeAll`'s trash).
///
/// A tick with nothing to do takes a lock and reads a few integers; it touches no file.
final class Maintenance: Sendable {
    let queue = DispatchQueue(label: "DiskCache.maintenance", qos: .utility)
    let interval: Duration
    /// Group commit (`.batched` mode) has a queue and a timer of its own, so that a long job on
    /// `queue` (an orphan scan of a large cache, a big sweep) never delays it.
    let commitQueue = DispatchQueue(label: "DiskCache.commit", qos: .utility)
    private let timer = PthreadMutex<TimerBox?>(nil)
    private let commitTimer = PthreadMutex<TimerBox?>(nil)
    private static let commitQueueKey = DispatchSpecificKey<Bool>()
    private let stopping = Atomic<Bool>(false)
    private let compactionScheduled = Atomic<Bool>(false)
    private let sweepScheduled = Atomic<Bool>(false)
    /// How many sweeps ``requestSweep(owner:)`` has started.
    private let sweepsStarted = Atomic<Int>(0)
    /// Writers over a limit waiting for room (``waitForRoom(owner:)``), each with the number of
    /// sweeps started before it came.
    private let roomWaiters = PthreadMutex<[(sweepsStartedBefore: Int, room: DispatchSemaphore)]>([])
    private let hasRoomWaiters = Atomic<Bool>(false)
    /// Whether a tick has logged that the cache directory went away (logged once).
    let reportedDirectoryGone = Atomic<Bool>(false)
    /// When the last background sweep check ran (ContinuousClock instant as nanoseconds).
    private let lastSweepCheck = Atomic<Int64>(0)
    private static let queueKey = DispatchSpecificKey<Bool>()

    init(interval: Duration) {
        self.interval = interval
        queue.setSpecific(key: Self.queueKey, value: true)
        commitQueue.setSpecific(key: Self.commitQueueKey, value: true)
    }

    private static func nanoseconds(_ duration: Duration) -> Int {
        max(1_000_000, Int(duration.nanoseconds))
    }

    private static func timer(on queue: DispatchQueue, every duration: Duration, _ handler: @escaping @Sendable () -> Void) -> TimerBox {
        let source = DispatchSource.makeTimerSource(queue: queue)
        let step = nanoseconds(duration)
        source.schedule(deadline: .now() + .nanoseconds(step), repeating: .nanoseconds(step), leeway: .nanoseconds(step / 10))
        source.setEventHandler(handler: handler)
        source.resume()
        return TimerBox(source: source)
    }

    var isStopping: Bool { stopping.load(ordering: .relaxed) }

    func start(owner: DiskCache, scanForOrphans: Bool) {
        var tick = interval
        if let sweep = owner.configuration.sweepInterval { tick = min(tick, sweep) }
        timer.withLock { $0 = Self.timer(on: queue, every: tick) { [weak owner] in owner?.maintenanceTick() } }
        switch owner.configuration.durability.mode {
        case .batched(let batch):
            commitTimer.withLock { $0 = Self.timer(on: commitQueue, every: batch) { [weak owner] in owner?.groupCommit() } }
        case .immediate:
            commitTimer.withLock {
                $0 = Self.timer(on: commitQueue, every: owner.configuration.checkpointInterval) { [weak owner] in owner?.checkpoint() }
            }
        case .none:
            break
        }
        if scanForOrphans {
            async(owner: owner) { $0.removeOrphans() }
        }
    }

    /// Runs `work` on the maintenance queue unless the cache has gone or is closing.
    func async(owner: DiskCache, _ work: @escaping @Sendable (DiskCache) -> Void) {
        queue.async { [weak owner, self] in
            guard !self.isStopping, let owner else { return }
            work(owner)
        }
    }

    /// Schedules a sweep at once (unless one is already waiting). When it ends, the writers
    /// that were waiting for room before it started go (``waitForRoom(owner:)``).
    func requestSweep(owner: DiskCache) {
        guard !sweepScheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.async { [weak owner, self] in
            sweepScheduled.store(false, ordering: .releasing)
            // Counted, and the waiters it serves seen, under the waiters' lock: a writer that
            // comes after it was counted waits for a later sweep, never for this one.
            let (started, servesWriters) = roomWaiters.withLock { waiters in
                (sweepsStarted.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue, !waiters.isEmpty)
            }
            if !isStopping, let owner {
                // A sweep writers wait for waits, in shared mode, for another instance's to end.
                owner.runSweep(wait: servesWriters)
            }
            // It ran whole after the writes of those waiting since before it started.
            releaseRoomWaiters { $0 < started }
        }
    }

    /// A writer over a limit waits here: it asks for a sweep and goes as soon as an eviction
    /// has brought the cache back under its limits (the sweep goes on down to the low
    /// watermark beside the writes that follow: eviction on the maintenance queue's thread,
    /// writes on theirs), or once a sweep that started after it came has ended.
    private func waitForRoom(owner: DiskCache) {
        let room = DispatchSemaphore(value: 0)
        roomWaiters.withLock { waiters in
            waiters.append((sweepsStarted.load(ordering: .acquiring), room))
            hasRoomWaiters.store(true, ordering: .releasing)
        }
        requestSweep(owner: owner)
        room.wait()
    }

    /// Called by a sweep after each removal: lets the writers waiting for room go once the
    /// cache is under its limits. Costs one atomic load when nobody waits.
    func noteRemoval(owner: DiskCache) {
        guard hasRoomWaiters.load(ordering: .acquiring), !owner.isOverLimits else { return }
        releaseRoomWaiters { _ in true }
    }

    private func releaseRoomWaiters(where goes: (_ sweepsStartedBefore: Int) -> Bool) {
        let going = roomWaiters.withLock { waiters -> [DispatchSemaphore] in
            var going: [DispatchSemaphore] = []
            waiters.removeAll { waiter in
                guard goes(waiter.sweepsStartedBefore) else { return false }
                going.append(waiter.room)
                return true
            }
            hasRoomWaiters.store(!waiters.isEmpty, ordering: .releasing)
            return going
        }
        for room in going { room.signal() }
    }

    /// Whether the periodic sweep check is due at this tick.
    func sweepCheckIsDue(interval: Duration?) -> Bool {
        guard let interval else { return false }
        let now = Int64(cdiskcache_monotonic_nanoseconds())
        let last = lastSweepCheck.load(ordering: .relaxed)
        let step = interval.nanoseconds
        guard now - last >= step else { return false }
        lastSweepCheck.store(now, ordering: .relaxed)
        return true
    }

    /// Called after each write (holding no lock): when the write took the cache over its count
    /// limit or disk capacity, the writer waits until a sweep on the maintenance queue has
    /// brought it back under (``waitForRoom(owner:)``); the sweep goes on to the low watermark
    /// while the writes go on. So whatever the write rate, the cache holds at most its limits
    /// plus one entry for each write in flight (with the background sweeper off, limits hold at
    /// each ``DiskCache/sweep()`` only). A write made from the maintenance queue itself (an
    /// `onEviction` callback's) only asks for a sweep. Also schedules a compaction when the
    /// journal has become mostly redundant.
    func noteWrite(owner: DiskCache) {
        if owner.configuration.sweepInterval != nil, owner.isOverLimits {
            if DispatchQueue.getSpecific(key: Self.queueKey) == true {
                requestSweep(owner: owner)
            } else {
                waitForRoom(owner: owner)
            }
        }
        guard owner.needsCompaction, !compactionScheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        async(owner: owner) { [self] cache in
            cache.compactJournal()
            compactionScheduled.store(false, ordering: .releasing)
        }
    }

    /// Runs `body` on the maintenance queue and waits for it; runs it at once when already there
    /// (a callback such as `onEviction` calling `sweep()` must not wait for itself).
    func sync<T>(_ body: () -> T) -> T {
        if DispatchQueue.getSpecific(key: Self.queueKey) == true { return body() }
        return queue.sync(execute: body)
    }

    /// Stops the timer and waits for running work to finish (it checks `isStopping` and returns early).
    func stop() {
        stopping.store(true, ordering: .relaxed)
        // No sweep makes room any more: writers waiting for one go.
        releaseRoomWaiters { _ in true }
        timer.withLock { source in
            source?.source.cancel()
            source = nil
        }
        commitTimer.withLock { source in
            source?.source.cancel()
            source = nil
        }
        if DispatchQueue.getSpecific(key: Self.queueKey) != true {
            queue.sync {}
        }
        if DispatchQueue.getSpecific(key: Self.commitQueueKey) != true {
            commitQueue.sync {}
        }
    }
}

extension DiskCache {
    /// One timer tick: journal batched access times, group-commit in `.batched` mode, compact if due.
    func maintenanceTick() {
        _ = try? flushPendingAccess()
        if needsCompaction { compactJournal() }
        if maintenance.sweepCheckIsDue(interval: configuration.sweepInterval) {
            do throws(DiskCacheError) {
                try checkDirectory()
            } catch DiskCacheError.Code.notFound {
                if !maintenance.reportedDirectoryGone.exchange(true, ordering: .relaxed) {
                    logger.error("The cache directory went away while the cache was open; nothing stored persists until it is reopened",
                                 metadata: ["path": "\(layout.root)"])
                }
                return
            } catch {}
            if sweepIsDue(now: configuration.clock()) { runSweep() }
        }
    }

    /// `.immediate` mode's checkpoint, on the group-commit queue every
    /// `configuration.checkpointInterval` (1 s) when this instance appended a PUT+FILE record since the
    /// last: one `syncfs` makes the files of every record before the journal's current end
    /// durable, and a CHECKPOINT record covering that offset tells a recovery it need not look
    /// at them. The record is not synced: lost in a power cut, it only makes the recovery look at
    /// more records.
    func checkpoint() {
        do throws(DiskCacheError) {
            try syncFiles(onlyIfNeeded: true)
        } catch DiskCacheError.Code.closed {
        } catch {
            logger.error("Checkpoint failed; will retry", metadata: ["error": "\(error)"])
        }
    }

    /// ``syncFiles(through:journal:)`` up to the journal's current end, returning that end; with
    /// `onlyIfNeeded`, nothing (nil) unless this instance appended a PUT+FILE record since the
    /// last checkpoint began. A failure leaves the checkpoint due.
    @discardableResult
    func syncFiles(onlyIfNeeded: Bool) throws(DiskCacheError) -> Journal.Position? {
        let due = state.withLock { state -> (position: Journal.Position, journal: SharedDescriptor)? in
            guard !onlyIfNeeded || (state.needsCheckpoint && !state.isClosed) else { return nil }
            state.needsCheckpoint = false
            return (state.journalEnd, state.journal)
        }
        guard let due else { return nil }
        do throws(DiskCacheError) {
            try syncFiles(through: due.position, journal: due.journal)
        } catch {
            state.withLock { $0.needsCheckpoint = true }
            throw error
        }
        return due.position
    }

    /// One `syncfs`: every file written before the records up to `due.end` were appended is
    /// durable after it. When the journal holds PUT+FILE records, a CHECKPOINT record then says
    /// so, naming `due.end` by its distance back from the record (unless a compaction replaced
    /// the file meanwhile).
    func syncFiles(through due: Journal.Position, journal: SharedDescriptor) throws(DiskCacheError) {
        try Syscall.syncFileSystem(journal.fd).get(orThrow: "sync the cache's filesystem", path: layout.root)
        try state.withLock { state throws(DiskCacheError) in
            guard state.journalCarriesFiles, !state.isClosed else { return }
            _ = try state.append(path: layout.journal) { state -> (bytes: [UInt8], records: Int, result: Void)? in
                // After a compaction (whose new file has no record to check before its tail):
                // nothing to mark.
                guard state.journalGeneration == due.generation else { return nil }
                // The record goes at `journalLength`: it covers what lies `back` bytes before it.
                return (Journal.encode(.checkpoint(back: state.journalLength - due.end)), 1, ())
            }
        }
    }

    /// `.batched` mode's group commit, on its own queue: one `syncfs` and one journal fsync make
    /// everything written since the last one durable.
    func groupCommit() {
        let dirty = state.withLock { state -> (Journal.Position, SharedDescriptor)? in
            guard state.isDirty, !state.isClosed else { return nil }
            state.isDirty = false
            return (state.journalEnd, state.journal)
        }
        guard let (end, journal) = dirty else { return }
        do {
            // One syncfs covers every body, metadata file and directory written in the interval.
            try Syscall.syncFileSystem(journal.fd).get(orThrow: "sync the cache's filesystem", path: layout.root)
            try syncJournal(through: end)
        } catch {
            state.withLock { $0.isDirty = true }
            logger.error("Group commit failed; will retry", metadata: ["error": "\(error)"])
        }
    }

    var needsCompaction: Bool {
        let threshold = configuration.compactionThreshold
        return state.withLock { state in
            // A compacted journal's REMOVE records of the ghost's keys are not redundant.
            let redundant = state.journalRecords - state.index.count - state.index.ghostCount
            return !state.isClosed && !state.isCompacting && redundant >= threshold && redundant >= state.index.count
        }
    }

    /// Runs `body` as the one instance doing housekeeping (compaction, sweeps), in shared mode
    /// holding the housekeeping lock: with `wait` false, nil at once when another instance holds
    /// it (that one does the work). In exclusive mode it just runs `body`.
    func asHousekeeper<T>(wait: Bool, _ body: () throws(DiskCacheError) -> T) throws(DiskCacheError) -> T? {
        guard let sharedRegion else { return try body() }
        // Nested (a callback of a sweep calling `compact()`, say): the lock is this instance's
        // already, and only the outermost call lets go of it.
        let depth = housekeepingDepth.withLock { depth in
            depth += 1
            return depth
        }
        defer { housekeepingDepth.withLock { $0 -= 1 } }
        guard depth == 1 else { return try body() }
        guard case .success = sharedRegion.lock(.housekeeping, .exclusive, wait: wait) else { return nil }
        defer { sharedRegion.lock(.housekeeping, .unlock) }
        return try body()
    }

    /// Rewrites the journal as one PUT a live entry.
    ///
    /// The snapshot is taken under the lock and written to `journal.tmp` outside it; then,
    /// under the lock (and in shared mode the append lock), the records appended to the old
    /// journal since the snapshot are copied over, the file is synced and renamed over
    /// `journal` (a pause of one fsync). A crash at any point leaves either the old journal or
    /// the new one, both complete. In shared mode the shared page then tells the other
    /// instances where the new file takes over (``SharedRegion``).
    func compactJournal() {
        do {
            try compactJournalNow(wait: false)
        } catch DiskCacheError.Code.closed {
            // A close overtook it: the journal is unchanged, nothing to report.
        } catch {
            logger.error("Journal compaction failed; the journal is unchanged", metadata: ["error": "\(error)"])
        }
    }

    /// What a compaction starts from: the live entries, and where in which journal they stand.
    struct CompactionSnapshot {
        /// In eviction order, each queue oldest first, with its place in it.
        var entries: [(hash: KeyHash, entry: IndexEntry, placement: Index.Placement)]
        /// The keys S3-FIFO's ghost remembers, oldest first.
        var ghost: [KeyHash]
        /// The journal's end when the entries were taken.
        var position: Journal.Position
        var records: Int
    }

    func compactJournalNow(wait: Bool) throws(DiskCacheError) {
        let compacted: Void? = try asHousekeeper(wait: wait) { () throws(DiskCacheError) in
            guard let snapshot = try state.withLock({ state throws(DiskCacheError) -> CompactionSnapshot? in
                guard !state.isClosed else { throw DiskCacheError.closed() }
                guard !state.isCompacting else { return nil }
                state.isCompacting = true
                // Reads not yet journaled go in first: the snapshot's order already counts them.
                if let record = state.takePendingAccessRecord() {
                    _ = try? state.append(record, records: 1, path: layout.journal)
                }
                return CompactionSnapshot(entries: state.index.entriesInEvictionOrder, ghost: state.index.ghostKeys,
                                          position: state.journalEnd, records: state.journalRecords)
            }) else { return }
            defer { state.withLock { $0.isCompacting = false } }
            do throws(DiskCacheError) {
                try writeCompactedJournal(snapshot)
                state.withLock { $0.statistics.compactions += 1 }
            } catch {
                _ = layout.directory.unlink(layout.journalTemp)
                throw error
            }
        }
        // Asked to wait (`compact()`, a repair) and another instance kept the housekeeping lock:
        // say so rather than report a compaction that did not happen.
        if wait, compacted == nil, let sharedRegion { throw sharedRegion.timeoutError("the housekeeping lock") }
    }

    private func writeCompactedJournal(_ snapshot: CompactionSnapshot) throws(DiskCacheError) {
        let temp = layout.journalTemp
        // Whatever is left at journal.tmp (a file, or a directory someone made) is in the way.
        layout.directory.removeTree(temp)
        let file = SharedDescriptor(try layout.directory.open(temp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600)
            .get(orThrow: "create journal.tmp", path: temp))
        var buffer = Journal.header()
        buffer.reserveCapacity(1 << 20)
        var length: Int64 = 0
        func drain(_ force: Bool) throws(DiskCacheError) {
            guard force || buffer.count >= 1 << 20 else { return }
            try buffer.withUnsafeBytes { Syscall.pwriteAll(file.fd, $0, at: length) }.get(orThrow: "write journal.tmp", path: temp)
            length += Int64(buffer.count)
            buffer.removeAll(keepingCapacity: true)
        }
        if state.withLock({ $0.journalCarriesFiles }) {
            // The snapshot's PUT+FILE records become plain PUTs below: the files they carry,
            // all written before the snapshot was taken, are made durable first.
            try Syscall.syncFileSystem(file.fd).get(orThrow: "sync the cache's filesystem", path: layout.root)
        }
        for (hash, entry, placement) in snapshot.entries {
            let put = Journal.Put(hash: hash, size: entry.size, metaSize: entry.metaSize, isInline: entry.isInline, slot: entry.slot,
                                  checksum: entry.checksum, created: entry.created, accessed: entry.accessedMilliseconds,
                                  expires: entry.expiresSeconds == 0 ? nil : Int64(entry.expiresSeconds) * 1000,
                                  placement: placement)
            Journal.encode(.put(put), into: &buffer)
            try drain(false)
        }
        for hash in snapshot.ghost {
            Journal.encode(.remove(hash), into: &buffer)
            try drain(false)
        }
        try drain(true)
        try Syscall.fsync(file.fd).get(orThrow: "sync journal.tmp", path: temp)
        if maintenance.isStopping { throw DiskCacheError.closed() }
        try state.withLock { state throws(DiskCacheError) in
            guard !state.isClosed else { throw DiskCacheError.closed() }
            try state.withAppendLock { state throws(DiskCacheError) in
                // Only the housekeeper compacts, so the journal is still the snapshot's.
                guard state.journalGeneration == snapshot.position.generation else { throw DiskCacheError.closed() }
                // The records appended since the snapshot, read back from the old journal.
                var from = snapshot.position.end
                while from < state.journalLength {
                    let count = Int(min(state.journalLength - from, 1 << 20))
                    buffer = [UInt8](repeating: 0, count: count)
                    let read = try buffer.withUnsafeMutableBytes { Syscall.preadAll(state.journal.fd, $0, at: from) }
                        .get(orThrow: "read the journal", path: layout.journal)
                    guard read == count else {
                        throw DiskCacheError(code: .ioFailure, message: "The journal is shorter than this instance has read", path: layout.journal)
                    }
                    try drain(true)
                    from += Int64(count)
                }
                try Syscall.fsync(file.fd).get(orThrow: "sync journal.tmp", path: temp)
                try layout.directory.rename(temp, layout.journal).get(orThrow: "replace the journal", path: layout.journal)
                // Past the rename there is no going back: a failed sync is made again before
                // the next record is reported durable (`syncJournalName()`).
                if case .failure = layout.directory.fsyncDirectory(layout.root) { state.journalNameUnsynced = true }
                #if DEBUG
                if configuration.stopsCompactionAfterRename {
                    // What the next holder of the append lock learns when this process dies here.
                    state.shared?.region[.holderDied] = 1
                    throw DiskCacheError.closed()
                }
                #endif
                state.journal = file
                state.journalLength = length
                state.reservedEnd = length
                state.canReserve = true
                state.journalRecords = snapshot.entries.count + snapshot.ghost.count + (state.journalRecords - snapshot.records)
                state.journalGeneration &+= 1
                if let region = state.shared?.region {
                    // Where the new file takes over, then the generation, then `end`: an
                    // instance that reads `end` without the append lock and the generation
                    // unchanged after it knows `end` is the old file's; one that sees the new
                    // generation takes the append lock (held here until all is in place) and
                    // finds `base` already set, even if this process dies before `end`.
                    region[.base] = UInt64(length)
                    region[.baseRecords] = UInt64(state.journalRecords)
                    region[.generation] = UInt64(truncatingIfNeeded: state.journalGeneration)
                    // The new file's identity after the generation: a process dying before this
                    // leaves a page that names the old file, which the next holder of the
                    // append lock notices (see `followHoldingAppendLock`).
                    if case .success(let info) = Syscall.fstat(file.fd) { region.nameJournal(info) }
                    region[.end] = UInt64(length)
                }
                state.writtenAhead = length  // the new file has none
            }
        }
    }

    /// After an unclean shutdown: removes entry files that no journal record vouches for
    /// (a write interrupted between rename and journal append, the old slot of a write
    /// interrupted after it, a remove interrupted before its unlink, a body beside an entry
    /// that is now inline).
    ///
    /// A scan cut short by `close()` leaves `orphanScanPending` set, so that the journal gets no
    /// clean-shutdown record and the next open scans again.
    func removeOrphans() {
        var removed = 0
        var finished = true
        ShardScanner(layout: layout).forEachEntryFile { hash, slot, kind, path in
            if maintenance.isStopping {
                finished = false
                return false
            }
            let answered = (try? withStripe(hash) { () -> Bool in
                guard let vouched = isVouched(hash, slot: slot, kind: kind) else { return false }
                if !vouched, layout.directory.removeEntryFile(path) { removed += 1 }
                return true
            }) ?? false
            // Behind the journal (or the stripe not had): the scan stops unfinished, and the
            // next open scans again.
            if !answered { finished = false }
            return answered
        }
        if removed > 0 {
            logger.info("Removed files no journal record vouched for", metadata: ["files": "\(removed)"])
        }
        state.withLock { state in
            state.statistics.recovery.orphanFilesRemoved += removed
            if finished {
                state.orphanScanPending = false
                if let region = state.shared?.region { region[.flags] = region[.flags] & ~SharedRegion.flagOrphanScanDue }
            }
        }
    }
}

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
    /// When the last background sweep check ran (ContinuousClock instant as nanoseconds).
    private let lastSweepCheck = Atomic<Int64>(0)
    private static let queueKey = DispatchSpecificKey<Bool>()

    init(interval: Duration) {
        self.interval = interval
        queue.setSpecific(key: Self.queueKey, value: true)
        commitQueue.setSpecific(key: Self.commitQueueKey, value: true)
    }

    private static func nanoseconds(_ duration: Duration) -> Int {
        max(1_000_000, Int(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000))
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
        if case .batched(let batch) = owner.configuration.durability.mode {
            commitTimer.withLock { $0 = Self.timer(on: commitQueue, every: batch) { [weak owner] in owner?.groupCommit() } }
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

    /// Schedules a sweep at once (unless one is already waiting).
    func requestSweep(owner: DiskCache) {
        guard !sweepScheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        async(owner: owner) { [self] cache in
            sweepScheduled.store(false, ordering: .releasing)
            cache.runSweep()
        }
    }

    /// Whether the periodic sweep check is due at this tick.
    func sweepCheckIsDue(interval: Duration?) -> Bool {
        guard let interval else { return false }
        let now = Self.nanosecondsNow()
        let last = lastSweepCheck.load(ordering: .relaxed)
        let step = interval.components.seconds * 1_000_000_000 + interval.components.attoseconds / 1_000_000_000
        guard now - last >= step else { return false }
        lastSweepCheck.store(now, ordering: .relaxed)
        return true
    }

    private static func nanosecondsNow() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }

    /// Called after each write: wakes the sweeper when the cache went over a limit, and
    /// schedules a compaction when the journal has become mostly redundant.
    func noteWrite(owner: DiskCache) {
        if owner.configuration.sweepInterval != nil, owner.isOverLimits { requestSweep(owner: owner) }
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

/// Dispatch sources are thread-safe to cancel from any thread, but not marked `Sendable`.
final class TimerBox: @unchecked Sendable {  // unchecked: DispatchSource is internally synchronised
    let source: any DispatchSourceTimer
    init(source: any DispatchSourceTimer) { self.source = source }
}

extension DiskCache {
    /// One timer tick: journal batched access times, group-commit in `.batched` mode, compact if due.
    func maintenanceTick() {
        _ = try? flushPendingAccess()
        if needsCompaction { compactJournal() }
        if maintenance.sweepCheckIsDue(interval: configuration.sweepInterval), sweepIsDue(now: configuration.clock()) {
            runSweep()
        }
    }

    /// `.batched` mode's group commit, on its own queue: one `syncfs` and one journal fsync make
    /// everything written since the last one durable.
    func groupCommit() {
        let dirty = state.withLock { state -> (Int, Int64, FileDescriptor)? in
            guard state.isDirty, !state.isClosed else { return nil }
            state.isDirty = false
            return (state.journalGeneration, state.journalLength, state.journal)
        }
        guard let (generation, length, journal) = dirty else { return }
        do {
            // One syncfs covers every body, metadata file and directory written in the interval.
            try Syscall.syncFileSystem(journal.fd).get(orThrow: "sync the cache's filesystem", path: layout.root)
            try syncJournal(through: (generation, length))
        } catch {
            state.withLock { $0.isDirty = true }
            logger.error("Group commit failed; will retry", metadata: ["error": "\(error)"])
        }
    }

    var needsCompaction: Bool {
        let threshold = configuration.compactionThreshold
        return state.withLock { state in
            let redundant = state.journalRecords - state.index.count
            return !state.isClosed && state.compactionDelta == nil && redundant >= threshold && redundant >= state.index.count
        }
    }

    /// Rewrites the journal as one PUT a live entry.
    ///
    /// The snapshot is taken under the lock, written to `journal.tmp` outside it while
    /// records appended meanwhile are collected, then those are copied over, the file is
    /// synced and renamed over `journal` under the lock (a pause of one fsync). A crash at any
    /// point leaves either the old journal or the new one, both complete.
    func compactJournal() {
        do {
            try compactJournalNow()
        } catch DiskCacheError.Code.closed {
            // A close overtook it: the journal is unchanged, nothing to report.
        } catch {
            logger.error("Journal compaction failed; the journal is unchanged", metadata: ["error": "\(error)"])
        }
    }

    func compactJournalNow() throws(DiskCacheError) {
        guard let snapshot = try state.withLock({ state throws(DiskCacheError) -> [(KeyHash, IndexEntry)]? in
            guard !state.isClosed else { throw DiskCacheError.closed() }
            guard state.compactionDelta == nil else { return nil }
            state.compactionDelta = []
            state.journalRecordsAtSnapshot = state.journalRecords
            return state.index.entries.map { ($0.key, $0.value) }
        }) else { return }
        do throws(DiskCacheError) {
            try writeCompactedJournal(snapshot)
            state.withLock { $0.statistics.compactions += 1 }
        } catch {
            _ = layout.directory.unlink(layout.journalTemp)
            state.withLock { $0.compactionDelta = nil }
            throw error
        }
    }

    private func writeCompactedJournal(_ snapshot: [(KeyHash, IndexEntry)]) throws(DiskCacheError) {
        let temp = layout.journalTemp
        // Whatever is left at journal.tmp (a file, or a directory someone made) is in the way.
        layout.directory.removeTree(temp)
        let fd = try layout.directory.open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600).get(orThrow: "create journal.tmp", path: temp)
        let file = FileDescriptor(fd)
        var buffer = Journal.header()
        buffer.reserveCapacity(1 << 20)
        var length: Int64 = 0
        func drain(_ force: Bool) throws(DiskCacheError) {
            guard force || buffer.count >= 1 << 20 else { return }
            try buffer.withUnsafeBytes { Syscall.pwriteAll(file.fd, $0, at: length) }.get(orThrow: "write journal.tmp", path: temp)
            length += Int64(buffer.count)
            buffer.removeAll(keepingCapacity: true)
        }
        for (hash, entry) in snapshot {
            let put = Journal.Put(hash: hash, size: entry.size, metaSize: entry.metaSize, isInline: entry.isInline, slot: entry.slot,
                                  checksum: entry.checksum, created: entry.created, accessed: entry.accessedMilliseconds,
                                  expires: entry.expiresSeconds == 0 ? nil : Int64(entry.expiresSeconds) * 1000)
            Journal.encode(.put(put), into: &buffer)
            try drain(false)
        }
        try drain(true)
        try Syscall.fsync(file.fd).get(orThrow: "sync journal.tmp", path: temp)
        if maintenance.isStopping { throw DiskCacheError.closed() }
        try state.withLock { state throws(DiskCacheError) in
            guard !state.isClosed, let delta = state.compactionDelta else { throw DiskCacheError.closed() }
            buffer = delta
            try drain(true)
            try Syscall.fsync(file.fd).get(orThrow: "sync journal.tmp", path: temp)
            try layout.directory.rename(temp, layout.journal).get(orThrow: "replace the journal", path: layout.journal)
            _ = layout.directory.fsyncDirectory(layout.root)
            let deltaRecords = state.journalRecords - state.journalRecordsAtSnapshot
            state.journal = file
            state.journalLength = length
            state.reservedEnd = length
            state.journalRecords = snapshot.count + deltaRecords
            state.journalGeneration += 1
            state.compactionDelta = nil
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
            stripe(hash).mutex.withLock { _ in
                let entry = state.withLock { $0.index[hash] }
                let vouched = entry.map { $0.slot == slot && (kind == .meta || !$0.isInline) } ?? false
                if !vouched, layout.directory.removeEntryFile(path) { removed += 1 }
            }
            return true
        }
        if removed > 0 {
            logger.info("Removed files no journal record vouched for", metadata: ["files": "\(removed)"])
        }
        state.withLock { state in
            state.statistics.recovery.orphanFilesRemoved += removed
            if finished { state.orphanScanPending = false }
        }
    }
}

import Foundation
import Logging
import DiskCacheLocking

extension DiskCache {
    /// One removal, reported to ``Configuration/onEviction`` (like `NSCache`'s
    /// `cache(_:willEvictObject:)`, but after the fact).
    public struct Eviction: Hashable, Sendable {
        /// The key, read from the entry's metadata file (nil if that file was unreadable).
        public var key: String?
        /// Body size in bytes.
        public var size: Int64
        public var reason: RemovalReason
    }

    /// What one sweep did.
    public struct SweepReport: Hashable, Sendable {
        /// Entries removed, by reason.
        public var removedEntries: [RemovalReason: Int] = [:]
        /// Bytes on disk freed (at block granularity), by reason.
        public var removedBytes: [RemovalReason: Int64] = [:]
        /// How long the pass took.
        public var duration: Duration = .zero

        public var totalRemovedEntries: Int { removedEntries.values.reduce(0, +) }
        public var totalRemovedBytes: Int64 { removedBytes.values.reduce(0, +) }

        mutating func add(_ reason: RemovalReason, bytes: Int64) {
            removedEntries[reason, default: 0] += 1
            removedBytes[reason, default: 0] += bytes
        }
    }

    /// The free space and size of the cache's volume, in bytes.
    public struct VolumeSpace: Hashable, Sendable {
        public var available: Int64
        public var total: Int64
        public init(available: Int64, total: Int64) {
            self.available = available
            self.total = total
        }
    }

    // MARK: - Limits that can change while open

    /// The disk capacity in force. Starts as ``Configuration/diskCapacity``; a new value takes
    /// effect on the next sweep, which a value the cache is over starts at once (when the
    /// background sweeper is on; otherwise at the next ``sweep()-2dxyb``).
    public var diskCapacity: Int64 {
        get { state.withLock { $0.diskCapacity } }
        set {
            state.withLock { $0.diskCapacity = max(0, newValue) }
            if configuration.sweepInterval != nil, isOverLimits { maintenance.requestSweep(owner: self) }
        }
    }

    /// The count limit in force (nil: none). Starts as ``Configuration/countLimit``; takes effect
    /// as ``diskCapacity`` does.
    public var countLimit: Int? {
        get { state.withLock { $0.countLimit } }
        set {
            state.withLock { $0.countLimit = newValue.map { max(0, $0) } }
            if configuration.sweepInterval != nil, isOverLimits { maintenance.requestSweep(owner: self) }
        }
    }

    // MARK: - Sweeping

    /// Runs one sweep now and returns what it removed: expired entries, then entries in the
    /// eviction order (``Configuration/evictionPolicy``) while the cache is over its count limit
    /// or disk capacity (down to the low watermark) or the volume's free space is under the floor. Runs on the cache's maintenance
    /// queue; the caller waits for it.
    @discardableResult
    public func sweep() -> SweepReport {
        maintenance.sync { runSweep(wait: true) }
    }

    /// Evicts entries in the eviction order until the cache occupies at most `size` bytes on disk
    /// (counted as ``totalSize`` counts). The capacity itself is unchanged.
    @discardableResult
    public func trim(toSize size: Int64) -> SweepReport {
        maintenance.sync {
            // In shared mode, as the one instance sweeping (waiting for another's sweep to end).
            (try? asHousekeeper(wait: true) { () -> SweepReport in trimPass(toSize: size) }) ?? SweepReport()
        }
    }

    private func trimPass(toSize size: Int64) -> SweepReport {
        var report = SweepReport()
        let clock = ContinuousClock()
        let start = clock.now
        evictInOrder(reason: .capacity, measure: .diskUsage(limit: size), report: &report) { state in
            state.index.diskUsage + state.journalDiskUsage(blockSize: blockSize) > size
        }
        syncRemovals(of: report)
        report.duration = clock.now - start
        return report
    }

    /// True when the cache is over a hard limit: a store checks this and wakes the sweeper.
    var isOverLimits: Bool {
        state.withLock { state in
            if let limit = state.countLimit, state.index.count > limit { return true }
            return state.index.diskUsage + state.journalDiskUsage(blockSize: blockSize) > state.diskCapacity
        }
    }

    func volumeSpace() -> VolumeSpace? {
        if let probe = configuration.volumeSpaceProbe { return probe(layout.root) }
        guard case .success(let info) = Syscall.statvfs(layout.root) else { return nil }
        // Clamped: a filesystem's absurd answer makes an absurd volume, not a trap.
        let unit = Int64(clamping: info.f_frsize > 0 ? info.f_frsize : info.f_bsize)
        func bytes(_ blocks: some BinaryInteger) -> Int64 {
            let (product, overflow) = Int64(clamping: blocks).multipliedReportingOverflow(by: unit)
            return overflow ? .max : product
        }
        return VolumeSpace(available: bytes(info.f_bavail), total: bytes(info.f_blocks))
    }

    /// The free-space floor for a volume of `total` bytes.
    func freeSpaceFloor(total: Int64) -> Int64 {
        max(configuration.minimumFreeSpace, Int64(Double(total) * configuration.minimumFreeFraction))
    }

    /// Whether a sweep has anything to do; cheap enough for every tick (no file is touched
    /// except one `statvfs`, and no index scan unless something has expired).
    func sweepIsDue(now: Int64) -> Bool {
        if isOverLimits { return true }
        let expiry = state.withLock { $0.earliestExpirySeconds }
        if expiry != 0 && Int64(expiry) * 1000 <= now { return true }
        if let space = volumeSpace(), space.available < freeSpaceFloor(total: space.total) { return true }
        return false
    }

    /// One pass; runs on the maintenance queue. In shared mode only one instance sweeps at a
    /// time: without `wait`, a sweep another instance is running stands for this one (an empty
    /// report; the limits are the cache's, and that instance sees every entry).
    @discardableResult
    func runSweep(wait: Bool = false) -> SweepReport {
        (try? asHousekeeper(wait: wait) { () -> SweepReport in sweepPass() }) ?? SweepReport()
    }

    private func sweepPass() -> SweepReport {
        let clock = ContinuousClock()
        let start = clock.now
        var report = SweepReport()
        // Files another process removed free their blocks only once unmapped here.
        mappedBodies.prune(in: layout.directory)
        removeExpiredEntries(report: &report)
        let low = configuration.lowWatermark
        if let limit = countLimit, count > limit {
            let target = Int(Double(limit) * low)
            evictInOrder(reason: .countLimit, measure: .count(limit: limit), report: &report) { $0.index.count > target }
        }
        let (usage, capacity) = state.withLock { ($0.index.diskUsage + $0.journalDiskUsage(blockSize: blockSize), $0.diskCapacity) }
        if usage > capacity {
            let target = Int64(Double(capacity) * low)
            evictInOrder(reason: .capacity, measure: .diskUsage(limit: capacity), report: &report) { state in
                state.index.diskUsage + state.journalDiskUsage(blockSize: blockSize) > target
            }
        }
        if let space = volumeSpace() {
            let floor = freeSpaceFloor(total: space.total)
            if space.available < floor {
                // Free up to 10 % past the floor so the next write does not start it again.
                let needed = floor - space.available + floor / 10
                let usageNow = state.withLock { $0.index.diskUsage }
                let target = usageNow - needed
                logger.notice("Free space is under the floor; evicting",
                              metadata: ["available": "\(space.available)", "floor": "\(floor)"])
                evictInOrder(reason: .freeSpace, measure: .diskUsage(limit: max(0, target)), report: &report) { $0.index.diskUsage > target }
            }
        }
        syncRemovals(of: report)
        report.duration = clock.now - start
        if let onSweepCompleted = configuration.onSweepCompleted { onSweepCompleted(report) }
        return report
    }

    /// In `.immediate`, makes a sweep's removals durable together: one journal sync.
    private func syncRemovals(of report: SweepReport) {
        guard report.totalRemovedEntries > 0 else { return }
        do {
            try syncRemovals()
        } catch {
            logger.error("Could not sync a sweep's removals", metadata: ["error": "\(error)"])
        }
    }

    private func removeExpiredEntries(report: inout SweepReport) {
        let now = configuration.clock()
        let expired = state.withLock { state -> [(KeyHash, IndexEntry)] in
            guard state.earliestExpirySeconds != 0, Int64(state.earliestExpirySeconds) * 1000 <= now else { return [] }
            var expired: [(KeyHash, IndexEntry)] = []
            var earliest: UInt32 = 0
            for (hash, entry) in state.index.entries where entry.expiresSeconds != 0 {
                if entry.hasExpired(atMilliseconds: now) {
                    expired.append((hash, entry))
                } else if earliest == 0 || entry.expiresSeconds < earliest {
                    earliest = entry.expiresSeconds
                }
            }
            state.earliestExpirySeconds = earliest
            return expired
        }
        for (hash, entry) in expired {
            if maintenance.isStopping { break }
            evict(hash, entry, reason: .expired, report: &report)
            maintenance.noteRemoval(owner: self)
        }
        // Whatever could not be removed (a failed removal, a sweep cut short) is tracked again.
        state.withLock { state in
            for (hash, _) in expired { if let entry = state.index[hash] { state.noteExpiry(entry) } }
        }
    }

    /// Evicts entries in the eviction order (``Configuration/evictionPolicy``) while `isOver`
    /// holds; `measure` is the limit being enforced, which S3-FIFO shares between its queues.
    ///
    /// - Complexity: amortised O(1) per entry evicted (see `Index+Eviction.swift`).
    private func evictInOrder(reason: RemovalReason, measure: Index.Measure, report: inout SweepReport,
                              while isOver: (inout CacheState) -> Bool) {
        // A removal that fails (an I/O error) leaves its entry first in line: give up after a
        // few in a row rather than spin on it; the next sweep tries again.
        var failuresInARow = 0
        while !maintenance.isStopping, failuresInARow < 8 {
            guard let candidate = state.withLock({ state -> (hash: KeyHash, entry: IndexEntry)? in
                guard isOver(&state) else { return nil }
                return state.index.evictionCandidate(for: measure)
            }) else { return }
            if evict(candidate.hash, candidate.entry, reason: reason, report: &report) {
                failuresInARow = 0
            } else {
                failuresInARow += 1
            }
            maintenance.noteRemoval(owner: self)
        }
    }

    /// Removes one entry if it still holds the commit the sweep saw (a read meanwhile changes
    /// nothing that matters), reporting it. Returns whether it went.
    @discardableResult
    private func evict(_ hash: KeyHash, _ entry: IndexEntry, reason: RemovalReason, report: inout SweepReport) -> Bool {
        guard (try? remove(hash, reason: reason, key: nil, where: { $0.isSameCommit(as: entry) })) == true else { return false }
        report.add(reason, bytes: entry.diskUsage(blockSize: blockSize))
        return true
    }

    /// The key an entry was stored under, read from its metadata file.
    func keyOfEntry(_ hash: KeyHash, _ entry: IndexEntry) -> String? {
        guard case .success(let bytes?) = FileIO.read(layout.metaFile(hash, slot: entry.slot), count: Int(entry.metaSize), in: layout.directory) else {
            return nil
        }
        // Read without the key's lock: the file may have been written again for another key since.
        guard let key = bytes.withBytes(EntryMetadata.decode)?.key, configuration.keyHasher.hash(key) == hash else { return nil }
        return key
    }
}

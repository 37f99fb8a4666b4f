@testable import DiskCache
import Foundation
import MemoryCache
import DiskCacheLocking
import Testing
import TestSupport

/// A volume whose free space the test sets.
final class FakeVolume: Sendable {
    let space: PthreadMutex<DiskCache.VolumeSpace>
    init(available: Int64, total: Int64) { space = PthreadMutex(.init(available: available, total: total)) }
    var probe: @Sendable (String) -> DiskCache.VolumeSpace? { { [self] _ in space.withLock { $0 } } }
}

/// Evictions, in order.
final class EvictionLog: Sendable {
    let events = PthreadMutex<[DiskCache.Eviction]>([])
    var callback: @Sendable (DiskCache.Eviction) -> Void { { [self] event in events.withLock { $0.append(event) } } }
    var all: [DiskCache.Eviction] { events.withLock { $0 } }
}

struct SweeperTests {
    /// A configuration whose background sweeper is off, so each test sweeps when it wants.
    /// These tests work out LRU's order and a low watermark of 0.9 by hand
    /// (EvictionOrderTests does S3-FIFO's, the default, and the default watermark).
    func configuration(clock: ManualClock, capacity: Int64 = 1 << 40, countLimit: Int? = nil,
                       volume: FakeVolume? = nil, log: EvictionLog? = nil) -> DiskCache.Configuration {
        var configuration = DiskCache.Configuration.testing(inlineThreshold: 0, clock: clock)
        configuration.evictionPolicy = .leastRecentlyUsed
        configuration.lowWatermark = 0.9
        configuration.diskCapacity = capacity
        configuration.countLimit = countLimit
        configuration.sweepInterval = nil
        configuration.onEviction = log?.callback
        configuration.volumeSpaceProbe = (volume ?? FakeVolume(available: 1 << 40, total: 1 << 41)).probe
        return configuration
    }

    /// Stores k0…k(n-1), one second apart, each 10,000 bytes (three 4 KiB blocks + one for metadata).
    func fill(_ cache: DiskCache, _ clock: ManualClock, count: Int) throws {
        for i in 0..<count {
            try cache.store(randomData(count: 10_000, seed: UInt64(i)), for: "k\(i)")
            clock.advance(seconds: 1)
        }
    }

    func present(_ cache: DiskCache, _ count: Int) -> [Int] {
        (0..<count).filter { cache.contains("k\($0)") }
    }

    @Test func capacityEvictsLeastRecentlyUsedDownToTheLowWatermark() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let log = EvictionLog()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(clock: clock, log: log))
        try fill(cache, clock, count: 10)
        // Touch k0 and k1 so they become the most recently used.
        _ = cache.data(for: "k0")
        _ = cache.data(for: "k1")
        let perEntry = (cache.totalSize - cache.journalDiskUsageForTesting) / 10
        // Room for 6 entries (plus the journal): the sweep must go down to 90 %, i.e. 5 entries.
        cache.diskCapacity = cache.journalDiskUsageForTesting + 6 * perEntry
        let report = cache.sweep()
        #expect(present(cache, 10) == [0, 1, 7, 8, 9])
        #expect(report.removedEntries == [.capacity: 5])
        #expect(report.removedBytes[.capacity] == 5 * perEntry)
        #expect(cache.totalSize <= Int64(Double(cache.diskCapacity) * 0.9))
        #expect(log.all.map(\.key) == ["k2", "k3", "k4", "k5", "k6"])
        #expect(log.all.allSatisfy { $0.reason == .capacity && $0.size == 10_000 })
        #expect(cache.sweep().totalRemovedEntries == 0)  // under the limit: nothing more
    }

    @Test func leastRecentlyUsedOrderSurvivesReopen() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        do {
            let cache = try DiskCache(directory: dir.cache, configuration: configuration(clock: clock))
            try fill(cache, clock, count: 6)
            _ = cache.data(for: "k0")
            try cache.close()
        }
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(clock: clock))
        let perEntry = (cache.totalSize - cache.journalDiskUsageForTesting) / 6
        cache.diskCapacity = cache.journalDiskUsageForTesting + 4 * perEntry
        cache.sweep()
        // 90 % of four entries' room holds three: k0 (read last) and the two newest writes.
        #expect(present(cache, 6) == [0, 4, 5])
    }

    @Test func countLimitIsEnforcedWithWatermark() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let log = EvictionLog()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(clock: clock, countLimit: 20, log: log))
        try fill(cache, clock, count: 25)
        let report = cache.sweep()
        #expect(cache.count == 18)
        #expect(report.removedEntries == [.countLimit: 7])
        #expect(present(cache, 25) == Array(7..<25))
        #expect(log.all.count == 7 && log.all.allSatisfy { $0.reason == .countLimit })
    }

    @Test func storeOverCapacityWakesTheSweeperAtOnce() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        var config = configuration(clock: clock, countLimit: 10)
        config.sweepInterval = .seconds(3600)  // the periodic check would not run during the test
        let done = PthreadMutex(0)
        config.onSweepCompleted = { report in done.withLock { $0 += report.totalRemovedEntries } }
        let cache = try DiskCache(directory: dir.cache, configuration: config)
        try fill(cache, clock, count: 11)
        let deadline = Date().addingTimeInterval(10)
        while done.withLock({ $0 }) == 0 && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(cache.count == 9)
    }

    /// A writer over a limit waits only until there is room: once the first eviction has
    /// brought the cache back under its count limit it goes on, while the sweep goes on to the
    /// low watermark. The sweep here stops at its second eviction until the writer has come
    /// back; a writer that waited for the whole sweep would never come back, and the eviction
    /// would give up waiting for it after 60 s.
    @Test func aWriterOverALimitGoesOnOnceThereIsRoom() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let writerBack = DispatchSemaphore(value: 0)
        let evictions = PthreadMutex(0)
        let sawWriterBack = PthreadMutex<Bool?>(nil)
        var config = configuration(clock: clock, countLimit: 10)
        config.sweepInterval = .seconds(3600)
        config.onEviction = { _ in
            let count = evictions.withLock { $0 += 1; return $0 }
            if count == 2 { sawWriterBack.withLock { $0 = writerBack.wait(timeout: .now() + 60) == .success } }
        }
        let done = DispatchSemaphore(value: 0)
        config.onSweepCompleted = { _ in done.signal() }
        let cache = try DiskCache(directory: dir.cache, configuration: config)
        try fill(cache, clock, count: 11)
        // The eleventh store went over the limit and came back: one eviction had made room.
        #expect(cache.count <= 10)
        writerBack.signal()
        #expect(done.wait(timeout: .now() + 120) == .success)
        #expect(sawWriterBack.withLock { $0 } == true)
        #expect(cache.count == 9)
    }

    @Test func expiredEntriesAreRemovedBySweep() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let log = EvictionLog()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(clock: clock, log: log))
        try cache.store(bytes("a"), for: "soon", expires: clock.date.addingTimeInterval(5))
        try cache.store(bytes("b"), for: "later", expires: clock.date.addingTimeInterval(500))
        try cache.store(bytes("c"), for: "never")
        #expect(cache.sweep().totalRemovedEntries == 0)
        clock.advance(seconds: 10)
        let report = cache.sweep()
        #expect(report.removedEntries == [.expired: 1])
        #expect(!cache.contains("soon") && cache.contains("later") && cache.contains("never"))
        #expect(log.all == [DiskCache.Eviction(key: "soon", size: 1, reason: .expired)])
        clock.advance(seconds: 1000)
        #expect(cache.sweep().removedEntries == [.expired: 1])
        #expect(cache.count == 1)
    }

    @Test func lowFreeSpacePurgesLeastRecentlyUsedUntilTheFloorIsMet() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let volume = FakeVolume(available: 1 << 30, total: 10 << 30)
        var config = configuration(clock: clock, volume: volume)
        config.minimumFreeSpace = 100_000
        config.minimumFreeFraction = 0
        let cache = try DiskCache(directory: dir.cache, configuration: config)
        try fill(cache, clock, count: 10)
        #expect(cache.sweep().totalRemovedEntries == 0)
        let perEntry = (cache.totalSize - cache.journalDiskUsageForTesting) / 10
        // 50,000 bytes short of the floor (+10 % margin = 60,000): evict entries worth that.
        volume.space.withLock { $0.available = 50_000 }
        let report = cache.sweep()
        let expected = Int((60_000 + perEntry - 1) / perEntry)
        #expect(report.removedEntries == [.freeSpace: expected])
        #expect(present(cache, 10) == Array(expected..<10))
    }

    @Test func freeSpaceFloorCanBeAFractionOfTheVolume() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let volume = FakeVolume(available: 900_000, total: 10_000_000)
        var config = configuration(clock: clock, volume: volume)
        config.minimumFreeSpace = 0
        config.minimumFreeFraction = 0.1  // a floor of 1,000,000 bytes
        let cache = try DiskCache(directory: dir.cache, configuration: config)
        try fill(cache, clock, count: 30)
        let report = cache.sweep()
        let perEntry = (cache.totalSize - cache.journalDiskUsageForTesting) / Int64(cache.count)
        #expect(report.removedEntries[.freeSpace] == Int((200_000 + perEntry - 1) / perEntry))
    }

    @Test func loweringCapacityAtRunTimeTakesEffectOnTheNextSweep() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        var config = configuration(clock: clock)
        config.sweepInterval = .seconds(3600)
        let cache = try DiskCache(directory: dir.cache, configuration: config)
        try fill(cache, clock, count: 10)
        #expect(cache.count == 10)
        cache.diskCapacity = 0
        // Lowering the capacity starts a sweep at once; wait for it.
        let deadline = Date().addingTimeInterval(10)
        while cache.count > 0 && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(cache.count == 0)
    }

    @Test func trimToSizeEvictsWithoutChangingCapacity() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(clock: clock, capacity: 1 << 30))
        try fill(cache, clock, count: 10)
        let perEntry = (cache.totalSize - cache.journalDiskUsageForTesting) / 10
        let report = cache.trim(toSize: cache.journalDiskUsageForTesting + 4 * perEntry)
        #expect(report.removedEntries == [.capacity: 6])
        #expect(present(cache, 10) == [6, 7, 8, 9])
        #expect(cache.diskCapacity == 1 << 30)
    }

    @Test func everyKindOfRemovalIsReportedWithItsReason() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let log = EvictionLog()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(clock: clock, log: log))
        try cache.store(bytes("1"), for: "explicit")
        try cache.store(bytes("22"), for: "expired", expires: clock.date.addingTimeInterval(1))
        try cache.store(bytes("333"), for: "corrupt")
        try cache.removeValue(for: "explicit")
        clock.advance(seconds: 2)
        #expect(cache.data(for: "expired") == nil)
        try writeFile(EntryFiles(cache, key: "corrupt").body, [9, 9, 9])
        #expect(cache.data(for: "corrupt") == nil)
        #expect(log.all == [
            DiskCache.Eviction(key: "explicit", size: 1, reason: .explicit),
            DiskCache.Eviction(key: "expired", size: 2, reason: .expired),
            DiskCache.Eviction(key: "corrupt", size: 3, reason: .corrupt),
        ])
    }

    @Test func closeDuringASweepStopsItCleanly() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(clock: clock))
        for i in 0..<2000 { try cache.store(bytes("v\(i)"), for: "k\(i)") }
        cache.maintenance.requestSweep(owner: cache)  // what lowering the capacity does with the sweeper on
        cache.diskCapacity = 0
        try cache.close()  // races the sweep that lowering the capacity started
        let reopened = try DiskCache(directory: dir.cache, configuration: configuration(clock: clock))
        #expect(!reopened.statistics.recovery.wasUncleanShutdown)
        // Whatever the sweep removed is gone, whatever it did not is whole.
        var whole = 0
        for i in 0..<2000 where reopened.contains("k\(i)") {
            #expect(reopened.data(for: "k\(i)") == bytes("v\(i)"))
            whole += 1
        }
        #expect(whole == reopened.count)
        #expect(try reopened.verify().isHealthy)
    }

    @Test func idleSweepTouchesNoFileAndRemovesNothing() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(clock: clock))
        try fill(cache, clock, count: 5)
        #expect(!cache.sweepIsDue(now: clock.milliseconds))
        #expect(cache.sweep().totalRemovedEntries == 0)
        #expect(cache.count == 5)
    }

    #if DEBUG  // the file system's test hooks exist in debug builds only
    /// In `.immediate` the removals a sweep makes are synced together once it ends, not one by
    /// one (so a put at capacity pays one flush, not two); a removal a caller asks for is still
    /// synced before it returns. Counted as the journal's `fdatasync` calls.
    @Test func aSweepSyncsItsRemovalsOnceInImmediateMode() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        var config = configuration(clock: clock)
        config.durability = .immediate
        let cache = try DiskCache(directory: dir.cache, configuration: config)
        try fill(cache, clock, count: 10)
        let journal = cache.state.withLock { $0.journal.fd }
        let syncs = PthreadMutex(0)
        let token = FileSystemObservers.add { event in
            if case .fsync(let fd) = event, fd == journal { syncs.withLock { $0 += 1 } }
        }
        defer { FileSystemObservers.remove(token) }
        cache.countLimit = 4
        #expect(cache.sweep().removedEntries == [.countLimit: 7])
        #expect(syncs.withLock { $0 } == 1)
        #expect(cache.sweep().totalRemovedEntries == 0)
        #expect(syncs.withLock { $0 } == 1)
        try cache.removeValue(for: "k9")
        #expect(syncs.withLock { $0 } == 2)
        #expect(cache.state.withLock { $0.journal.fd } == journal)
    }
    #endif
}

extension DiskCache {
    var journalDiskUsageForTesting: Int64 { state.withLock { $0.journalDiskUsage(blockSize: blockSize) } }
}

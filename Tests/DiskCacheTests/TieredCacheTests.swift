@testable import DiskCache
import Foundation
import Testing
import TestSupport

struct TieredCacheTests {
    func makeCache(_ dir: TemporaryDirectory, memory: Int = 1 << 20, clock: ManualClock? = nil) throws -> TieredCache {
        try TieredCache(memoryCapacity: memory, diskCapacity: 1 << 30, directory: dir.cache, configuration: .testing(clock: clock))
    }

    @Test func writesGoThroughToDiskAndReadsHitMemoryFirst() throws {
        let dir = TemporaryDirectory()
        let cache = try makeCache(dir)
        try cache.store(bytes("value"), for: "k", metadata: ["a": "b"])
        #expect(cache.disk?.data(for: "k") == bytes("value"))
        let record = try #require(cache.record(for: "k"))
        #expect(record.data == bytes("value"))
        #expect(record.metadata == ["a": "b"])
        #expect(cache.statistics.memoryHits == 1)
        #expect(cache.statistics.diskHits == 0)
        #expect(cache.currentMemoryUsage > 5)
        #expect(cache.currentDiskUsage > 0)
    }

    @Test func diskHitIsPromotedIntoMemory() throws {
        let dir = TemporaryDirectory()
        do {
            let cache = try makeCache(dir)
            try cache.store(bytes("persisted"), for: "k", metadata: ["m": "1"])
            try cache.disk?.close()
        }
        let cache = try makeCache(dir)
        #expect(cache.currentMemoryUsage == 0)
        #expect(cache.record(for: "k")?.metadata == ["m": "1"])
        #expect(cache.statistics.diskHits == 1)
        #expect(cache.data(for: "k") == bytes("persisted"))
        #expect(cache.statistics.memoryHits == 1)
        #expect(cache.statistics.diskHits == 1)
    }

    @Test func memoryOnlyPolicyNeverTouchesDiskAndReplacesADiskValue() throws {
        let dir = TemporaryDirectory()
        let cache = try makeCache(dir)
        try cache.store(bytes("old"), for: "k")
        try cache.store(bytes("new"), for: "k", policy: .allowedInMemoryOnly)
        #expect(cache.disk?.data(for: "k") == nil)
        #expect(cache.data(for: "k") == bytes("new"))
        try cache.store(bytes("mem"), for: "m", policy: .allowedInMemoryOnly)
        #expect(cache.disk?.count == 0)
    }

    @Test func notAllowedPolicyStoresNothingAndDropsTheEarlierValue() throws {
        let dir = TemporaryDirectory()
        let cache = try makeCache(dir)
        try cache.store(bytes("old"), for: "k")
        try cache.store(bytes("new"), for: "k", policy: .notAllowed)
        #expect(cache.data(for: "k") == nil)
        #expect(cache.disk?.count == 0)
    }

    @Test func memoryCapacityBoundsTheMemoryTier() throws {
        let dir = TemporaryDirectory()
        let cache = try makeCache(dir, memory: 10_000)
        cache.largeBodyThreshold = 10_000  // not 5 % of the capacity: these bodies are what it bounds
        for i in 0..<10 { try cache.store(randomData(count: 2_000, seed: UInt64(i)), for: "k\(i)") }
        #expect(cache.currentMemoryUsage <= 10_000)
        #expect(cache.statistics.memoryEvictions >= 5)
        // Evicted from memory, still on disk.
        for i in 0..<10 { #expect(cache.data(for: "k\(i)") == randomData(count: 2_000, seed: UInt64(i))) }
        cache.memoryCapacity = 0
        #expect(cache.currentMemoryUsage == 0)
        #expect(cache.data(for: "k0") != nil)
        #expect(cache.currentMemoryUsage == 0)
    }

    @Test func expiredRecordIsNotServedFromMemory() throws {
        let dir = TemporaryDirectory()
        let cache = try makeCache(dir)
        try cache.store(bytes("v"), for: "k", expires: Date().addingTimeInterval(-1), policy: .allowedInMemoryOnly)
        #expect(cache.record(for: "k") == nil)
        #expect(cache.statistics.misses == 1)
    }

    @Test func removeEntriesModifiedSinceClearsBothTiers() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try makeCache(dir, clock: clock)
        try cache.store(bytes("old"), for: "old", policy: .allowedInMemoryOnly)
        try cache.store(bytes("old-disk"), for: "old-disk")
        clock.advance(seconds: 0.01)
        let cut = clock.date
        clock.advance(seconds: 0.01)
        try cache.store(bytes("new"), for: "new", policy: .allowedInMemoryOnly)
        try cache.store(bytes("new-disk"), for: "new-disk")
        try cache.removeEntries(modifiedSince: cut)
        #expect(cache.data(for: "old") == bytes("old"))
        #expect(cache.data(for: "old-disk") == bytes("old-disk"))
        #expect(cache.data(for: "new") == nil)
        #expect(cache.data(for: "new-disk") == nil)
    }

    /// The millisecond edge of ``StoreTests``' test of the same name, in both tiers.
    @Test func aStoreInTheSameMillisecondAsTheCutGoesWhateverItsRounding() throws {
        let dir = TemporaryDirectory()
        let edge = Date(timeIntervalSince1970: 1_796_675_231.782_999_992)
        let clock = ManualClock(Date(timeIntervalSince1970: 1_796_675_231.782))
        let cache = try makeCache(dir, clock: clock)
        try cache.store(bytes("memory"), for: "memory", policy: .allowedInMemoryOnly)
        try cache.store(bytes("disk"), for: "disk")
        try cache.removeEntries(modifiedSince: edge)
        #expect(cache.data(for: "memory") == nil)
        #expect(cache.data(for: "disk") == nil)
    }

    @Test func memoryOnlyCacheWorksWithoutADirectory() throws {
        let cache = try TieredCache(memoryCapacity: 1000, diskCapacity: 0, directory: nil)
        try cache.store(bytes("v"), for: "k")
        #expect(cache.data(for: "k") == bytes("v"))
        #expect(cache.currentDiskUsage == 0)
        try cache.removeAll()
        #expect(cache.data(for: "k") == nil)
    }
}

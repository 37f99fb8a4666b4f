import Testing
@testable import MemoryCache

struct StatisticsTests {
    /// What the tiered cache reads to choose among HTTP variants must not count as a use: the
    /// value looked at stays first in line for eviction, and no lookup is counted.
    @Test func aValueReadWithoutUseKeepsItsPlaceAndCountsNothing() {
        let cache = MemoryCache<String, Int>(countLimit: 2, policy: .leastRecentlyUsed)
        cache.store(1, for: "a")
        cache.store(2, for: "b")
        let before = cache.statistics
        #expect(cache.valueWithoutUse(for: "a") == 1)
        #expect(cache.valueWithoutUse(for: "z") == nil)
        #expect(cache.statistics == before)
        cache.store(3, for: "c")  // evicts the least recently used: still a
        #expect(cache.valueWithoutUse(for: "a") == nil)
        #expect(cache.valueWithoutUse(for: "b") == 2)

        // The same read through value(for:) is a use: b then outlives c.
        _ = cache.value(for: "b")
        cache.store(4, for: "d")
        #expect(cache.valueWithoutUse(for: "b") == 2)
        #expect(cache.valueWithoutUse(for: "c") == nil)
    }

    @Test func countersFollowEveryOperation() {
        let cache = MemoryCache<String, Int>(countLimit: 2, totalCostLimit: 10, policy: .leastRecentlyUsed)
        #expect(cache.statistics == MemoryCacheStatistics())
        cache.store(1, for: "a")
        cache.store(2, for: "b")
        _ = cache.value(for: "a")
        _ = cache.value(for: "z")
        cache.store(3, for: "c")  // evicts b
        cache.store(4, for: "a")  // replaces a
        cache.store(5, for: "x", cost: 11)  // rejected
        cache.removeValue(for: "c")
        cache.removeValue(for: "nothing")
        cache.trim(toCount: 0)  // trims a

        let statistics = cache.statistics
        #expect(statistics.hits == 1)
        #expect(statistics.misses == 1)
        #expect(statistics.lookups == 2)
        #expect(statistics.hitRatio == 0.5)
        #expect(statistics.insertions == 5)
        #expect(statistics.removals == 1)
        #expect(statistics.evictions(.countLimit) == 1)
        #expect(statistics.evictions(.replaced) == 1)
        #expect(statistics.evictions(.costLimit) == 1)
        #expect(statistics.evictions(.trimmed) == 1)
        #expect(statistics.evictions(.discardedContent) == 0)
        #expect(statistics.evictions == 4)
        #expect(cache.count == statistics.insertions - statistics.evictions - statistics.removals)
    }

    @Test func removeAllCountsEachValueAsARemoval() {
        let cache = MemoryCache<Int, Int>()
        for key in 0..<7 { cache.store(key, for: key) }
        cache.removeAll()
        #expect(cache.statistics.removals == 7)
        #expect(cache.statistics.insertions == 7)
    }

    @Test func hitRatioIsZeroBeforeTheFirstLookup() {
        #expect(MemoryCacheStatistics().hitRatio == 0)
    }

    @Test func nameIsSettableAndShownInTheDescription() {
        let cache = MemoryCache<Int, Int>(name: "thumbnails")
        #expect(cache.name == "thumbnails")
        cache.name = "avatars"
        cache.store(1, for: 1, cost: 3)
        #expect(cache.description == "MemoryCache(name: avatars, policy: S3-FIFO, count: 1, totalCost: 3)")
    }
}

import DiskCacheLocking
import Testing
@testable import MemoryCache

struct EvictionCallbackTests {
    @Test func everyEvictionIsReportedOnceWithItsReason() {
        let (cache, recorder) = MemoryCache<String, Int>.recording(countLimit: 3, totalCostLimit: 100)
        cache.store(1, for: "a", cost: 10)
        cache.store(2, for: "b", cost: 10)
        cache.store(3, for: "c", cost: 10)
        cache.store(4, for: "d", cost: 10)  // a: countLimit
        cache.store(20, for: "b", cost: 10)  // b: replaced
        cache.store(5, for: "e", cost: 101)  // e: costLimit, never stored
        cache.store(6, for: "f", cost: 75)  // c: countLimit (b was just used; 95 fits the cost)
        cache.totalCostLimit = 80  // d, b: costLimit
        cache.removeValue(for: "f")  // not reported
        cache.store(7, for: "g", cost: 1)
        cache.store(8, for: "h", cost: 1)
        cache.trim(toCount: 1)  // g: trimmed

        let expected = ["a=1:countLimit", "b=2:replaced", "e=5:costLimit", "c=3:countLimit", "d=4:costLimit", "b=20:costLimit", "g=7:trimmed"]
        #expect(recorder.all.map { "\($0.key)=\($0.value):\($0.reason)" } == expected)
        let statistics = cache.statistics
        for reason in EvictionReason.allCases {
            #expect(statistics.evictions(reason) == recorder.count(reason), "\(reason)")
        }
        #expect(statistics.evictions == expected.count)
    }

    @Test func handlerRunsAfterTheValueHasLeft() {
        let cache = MemoryCache<Int, Int>(countLimit: 1, policy: .leastRecentlyUsed)
        let seen = PthreadMutex<[String]>([])
        cache.onEviction = { [unowned cache] eviction in
            let stillThere = cache.value(for: eviction.key) != nil
            seen.withLock { $0.append("\(eviction.key) there: \(stillThere), count: \(cache.count)") }
        }
        cache.store(1, for: 1)
        cache.store(2, for: 2)
        #expect(seen.withLock { $0 } == ["1 there: false, count: 1"])
    }

    @Test func handlerMayCallBackIntoTheCache() throws {
        let cache = MemoryCache<Int, Int>(countLimit: 2, policy: .leastRecentlyUsed)
        let spilled = PthreadMutex<[Int]>([])
        cache.onEviction = { [unowned cache] eviction in
            // Every kind of call, including one that evicts again (and re-enters this handler).
            _ = cache.value(for: eviction.key)
            _ = cache.statistics
            _ = cache.count
            cache.removeValue(for: -1)
            if eviction.key < 100 {
                cache.store(eviction.value, for: eviction.key + 100)
            }
            spilled.withLock { $0.append(eviction.key) }
        }
        let finished: Void? = finishing {
            cache.store(1, for: 1)
            cache.store(2, for: 2)
            // Evicts 1, whose handler stores 101, evicting 2, whose handler stores 102, evicting 3,
            // whose handler stores 103, evicting 101. The innermost handler finishes first.
            cache.store(3, for: 3)
        }
        try #require(finished != nil)
        #expect(spilled.withLock { $0 } == [101, 3, 2, 1])
        #expect(cache.storedKeys(among: [102, 103]) == [102, 103])
        #expect(cache.count == 2)
        #expect(cache._checkInvariants() == [])
    }

    @Test func handlerCanBeReplacedAndRemoved() {
        let cache = MemoryCache<Int, Int>(countLimit: 1)
        let first = EvictionRecorder<Int, Int>()
        let second = EvictionRecorder<Int, Int>()
        cache.onEviction = first.handler
        cache.store(1, for: 1)
        cache.store(2, for: 2)
        cache.onEviction = second.handler
        cache.store(3, for: 3)
        cache.onEviction = nil
        cache.store(4, for: 4)
        #expect(first.keys == [1])
        #expect(second.keys == [2])
        #expect(cache.statistics.evictions == 3)
    }
}

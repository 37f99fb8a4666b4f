import Dispatch
import DiskCacheLocking
import Synchronization
import Testing
@testable import MemoryCache

struct ConcurrencyTests {
    @Test(arguments: EvictionPolicy.allCases)
    func randomOperationsFromManyThreadsKeepEveryInvariant(policy: EvictionPolicy) throws {
        let keySpace = 500
        let countLimit = 100
        let totalCostLimit = 1_000
        let reported = PthreadMutex<[EvictionReason: Int]>([:])
        let cache = MemoryCache<Int, Int>(countLimit: countLimit, totalCostLimit: totalCostLimit, policy: policy) { eviction in
            precondition(eviction.value == eviction.key * 7, "value stored under the wrong key")
            reported.withLock { $0[eviction.reason, default: 0] += 1 }
        }
        let (lookups, wrongValues) = try #require(finishing {
            let lookups = Atomic<Int>(0)
            let wrongValues = Atomic<Int>(0)
            DispatchQueue.concurrentPerform(iterations: 8) { thread in
                var generator = SplitMix64(state: UInt64(thread) &* 0x1234_5678_9ABC)
                for _ in 0..<20_000 {
                    let key = Int(generator.next() % UInt64(keySpace))
                    switch generator.next() % 100 {
                    case 0..<50:
                        lookups.add(1, ordering: .relaxed)
                        if let value = cache.value(for: key), value != key * 7 {
                            wrongValues.add(1, ordering: .relaxed)
                        }
                    case 50..<85:
                        // Now and then a value too costly to store.
                        let cost = generator.next() % 200 == 0 ? totalCostLimit + 1 : Int(generator.next() % 20)
                        cache.store(key * 7, for: key, cost: cost)
                    case 85..<97:
                        if let value = cache.removeValue(for: key), value != key * 7 {
                            wrongValues.add(1, ordering: .relaxed)
                        }
                    case 97..<99:
                        _ = cache.count
                        _ = cache.statistics
                    default:
                        if generator.next() % 20 == 0 { cache.trim(toCount: countLimit / 2) }
                    }
                }
            }
            return (lookups.load(ordering: .relaxed), wrongValues.load(ordering: .relaxed))
        })

        #expect(wrongValues == 0)
        #expect(cache._checkInvariants() == [])
        let count = cache.count
        #expect(count <= countLimit)
        #expect(cache.totalCost <= totalCostLimit)
        let statistics = cache.statistics
        #expect(statistics.lookups == lookups)
        #expect(count == statistics.insertions - statistics.evictions - statistics.removals)
        let reportedCounts = reported.withLock { $0 }
        for reason in EvictionReason.allCases {
            #expect(statistics.evictions(reason) == reportedCounts[reason, default: 0], "\(reason)")
        }
        #expect(statistics.evictions(.countLimit) > 0)
        #expect(statistics.evictions(.costLimit) > 0)
        #expect(statistics.evictions(.replaced) > 0)
        #expect(statistics.evictions(.trimmed) > 0)
        #expect(cache.storedKeys(among: 0..<keySpace).count == count)
    }

    @Test func concurrentLookupsOfDiscardableValuesBalanceTheirAccesses() throws {
        let cache = MemoryCache<Int, Purgeable>(countLimit: 16)
        let values = (0..<16).map(Purgeable.init)
        for value in values { cache.store(value, for: value.id) }
        let finished: Void? = finishing {
            DispatchQueue.concurrentPerform(iterations: 4) { thread in
                for i in 0..<5_000 {
                    if let value = cache.value(for: (i + thread) % 16) {
                        value.endContentAccess()
                    }
                    if i % 1_000 == 0 { values[thread].purge() }
                }
            }
        }
        try #require(finished != nil)
        for value in values {
            #expect(value.counters.accessCount == 0, "\(value)")
        }
        #expect(cache.count == 12)
        #expect(cache.statistics.evictions(.discardedContent) == 4)
    }
}

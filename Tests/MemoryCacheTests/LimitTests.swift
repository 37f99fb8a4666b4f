import Testing
@testable import MemoryCache

struct LimitTests {
    @Test(arguments: EvictionPolicy.allCases)
    func countLimitHoldsAfterEveryStore(policy: EvictionPolicy) {
        let (cache, recorder) = MemoryCache<Int, String>.recording(countLimit: 3, policy: policy)
        for key in 0..<10 {
            cache.store("v\(key)", for: key)
            #expect(cache.count == min(key + 1, 3))
        }
        // Nothing was read, so both policies evict in insertion order.
        #expect(recorder.keys == Array(0..<7))
        #expect(recorder.reasons == Array(repeating: .countLimit, count: 7))
        #expect(cache.storedKeys(among: 0..<10) == [7, 8, 9])
        #expect(cache._checkInvariants() == [])
    }

    @Test(arguments: EvictionPolicy.allCases)
    func costLimitHoldsAfterEveryStore(policy: EvictionPolicy) {
        let (cache, recorder) = MemoryCache<String, Int>.recording(totalCostLimit: 10, policy: policy)
        cache.store(1, for: "a", cost: 4)
        cache.store(2, for: "b", cost: 4)
        #expect(cache.totalCost == 8)
        cache.store(3, for: "c", cost: 5)
        #expect(cache.totalCost == 9)
        #expect(recorder.keys == ["a"])
        cache.store(4, for: "d", cost: 10)
        #expect(cache.totalCost == 10)
        #expect(cache.count == 1)
        #expect(recorder.keys == ["a", "b", "c"])
        #expect(recorder.reasons == [.costLimit, .costLimit, .costLimit])
        #expect(cache.value(for: "d") == 4)
    }

    @Test(arguments: EvictionPolicy.allCases)
    func bothLimitsAreEnforcedTogether(policy: EvictionPolicy) {
        let (cache, recorder) = MemoryCache<String, Int>.recording(countLimit: 3, totalCostLimit: 10, policy: policy)
        cache.store(1, for: "a", cost: 4)
        cache.store(2, for: "b", cost: 4)
        cache.store(3, for: "c", cost: 4)  // cost 12 > 10
        #expect(recorder.reasons == [.costLimit])
        cache.store(4, for: "d", cost: 1)
        cache.store(5, for: "e", cost: 1)  // count 4 > 3
        #expect(recorder.keys == ["a", "b"])
        #expect(recorder.reasons == [.costLimit, .countLimit])
        #expect(cache.count == 3)
        #expect(cache.totalCost == 6)
        #expect(cache._checkInvariants() == [])
    }

    @Test func zeroLimitsMeanNoLimit() {
        let (cache, recorder) = MemoryCache<Int, Int>.recording()
        for key in 0..<1_000 { cache.store(key, for: key, cost: 1_000_000) }
        #expect(cache.count == 1_000)
        #expect(cache.totalCost == 1_000_000_000)
        #expect(cache.countLimit == 0)
        #expect(cache.totalCostLimit == 0)
        #expect(recorder.all.isEmpty)
    }

    @Test(arguments: EvictionPolicy.allCases)
    func loweringCountLimitEvictsAtOnce(policy: EvictionPolicy) {
        let (cache, recorder) = MemoryCache<Int, Int>.recording(policy: policy)
        for key in 0..<10 { cache.store(key, for: key, cost: 1) }
        cache.countLimit = 4
        #expect(cache.count == 4)
        #expect(recorder.keys == Array(0..<6))
        #expect(recorder.reasons == Array(repeating: .countLimit, count: 6))
        cache.countLimit = 0
        for key in 10..<20 { cache.store(key, for: key, cost: 1) }
        #expect(cache.count == 14)
        #expect(recorder.all.count == 6)
    }

    @Test(arguments: EvictionPolicy.allCases)
    func loweringCostLimitEvictsAtOnce(policy: EvictionPolicy) {
        let (cache, recorder) = MemoryCache<Int, Int>.recording(totalCostLimit: 100, policy: policy)
        for key in 0..<10 { cache.store(key, for: key, cost: 10) }
        #expect(cache.totalCost == 100)
        cache.totalCostLimit = 25
        #expect(cache.totalCost == 20)
        #expect(cache.count == 2)
        #expect(recorder.keys == Array(0..<8))
        #expect(recorder.reasons == Array(repeating: .costLimit, count: 8))
        #expect(cache._checkInvariants() == [])
    }

    @Test func loweringCostLimitBelowOneValueEvictsIt() {
        let (cache, recorder) = MemoryCache<Int, Int>.recording()
        cache.store(1, for: 1, cost: 50)
        cache.store(2, for: 2, cost: 5)
        cache.totalCostLimit = 10
        // LRU order: 1 is the oldest and has to go anyway; 2 fits.
        #expect(recorder.keys == [1])
        #expect(cache.storedKeys(among: [1, 2]) == [2])
        cache.totalCostLimit = 4
        #expect(cache.count == 0)
        #expect(cache.totalCost == 0)
    }

    @Test(arguments: EvictionPolicy.allCases)
    func valueCostlierThanTheLimitIsNotStoredAndIsReported(policy: EvictionPolicy) {
        let (cache, recorder) = MemoryCache<String, Int>.recording(totalCostLimit: 10, policy: policy)
        cache.store(1, for: "small", cost: 3)
        cache.store(2, for: "huge", cost: 11)
        #expect(cache.value(for: "huge") == nil)
        #expect(cache.value(for: "small") == 1)
        #expect(cache.totalCost == 3)
        #expect(recorder.all.count == 1)
        #expect(recorder.all.first?.key == "huge")
        #expect(recorder.all.first?.value == 2)
        #expect(recorder.all.first?.cost == 11)
        #expect(recorder.all.first?.reason == .costLimit)
    }

    @Test func valueCostlierThanTheLimitRemovesTheOldValueOfItsKey() {
        let (cache, recorder) = MemoryCache<String, Int>.recording(totalCostLimit: 10)
        cache.store(1, for: "k", cost: 5)
        cache.store(2, for: "k", cost: 20)
        #expect(cache.value(for: "k") == nil)
        #expect(cache.count == 0)
        #expect(cache.totalCost == 0)
        #expect(recorder.all.map { "\($0.value):\($0.reason)" } == ["1:replaced", "2:costLimit"])
    }

    @Test func valueCostingExactlyTheLimitIsStored() {
        let cache = MemoryCache<Int, Int>(totalCostLimit: 10)
        cache.store(1, for: 1, cost: 10)
        #expect(cache.value(for: 1) == 1)
        #expect(cache.totalCost == 10)
    }

    @Test(arguments: EvictionPolicy.allCases)
    func replacingAValueUpdatesItsCost(policy: EvictionPolicy) {
        let (cache, recorder) = MemoryCache<String, Int>.recording(policy: policy)
        cache.store(1, for: "k", cost: 5)
        cache.store(2, for: "k", cost: 7)
        #expect(cache.count == 1)
        #expect(cache.totalCost == 7)
        #expect(cache.value(for: "k") == 2)
        #expect(recorder.all.count == 1)
        #expect(recorder.all.first.map { "\($0.key) \($0.value) \($0.cost) \($0.reason)" } == "k 1 5 replaced")
        cache.store(3, for: "k")
        #expect(cache.totalCost == 0)
    }

    @Test(arguments: EvictionPolicy.allCases)
    func replacingWithACostlierValueEvictsOthersButNotItself(policy: EvictionPolicy) {
        let (cache, recorder) = MemoryCache<String, Int>.recording(totalCostLimit: 10, policy: policy)
        cache.store(1, for: "a", cost: 4)
        cache.store(2, for: "b", cost: 4)
        cache.store(3, for: "a", cost: 8)
        #expect(cache.storedKeys(among: ["a", "b"]) == ["a"])
        #expect(cache.totalCost == 8)
        #expect(recorder.all.map { "\($0.key):\($0.reason)" } == ["a:replaced", "b:costLimit"])
    }

    @Test func trimToCostEvictsUntilTheTargetAndKeepsTheLimits() {
        let (cache, recorder) = MemoryCache<Int, Int>.recording(totalCostLimit: 100)
        for key in 0..<10 { cache.store(key, for: key, cost: 10) }
        cache.trim(toCost: 35)
        #expect(cache.totalCost == 30)
        #expect(recorder.keys == Array(0..<7))
        #expect(recorder.reasons == Array(repeating: .trimmed, count: 7))
        #expect(cache.totalCostLimit == 100)
        for key in 10..<20 { cache.store(key, for: key, cost: 10) }
        #expect(cache.totalCost == 100)
    }

    @Test func trimToCountEvictsUntilTheTarget() {
        let (cache, recorder) = MemoryCache<Int, Int>.recording(countLimit: 50)
        for key in 0..<10 { cache.store(key, for: key) }
        cache.trim(toCount: 4)
        #expect(cache.storedKeys(among: 0..<10) == [6, 7, 8, 9])
        #expect(recorder.reasons == Array(repeating: .trimmed, count: 6))
        cache.trim(toCount: 0)
        #expect(cache.count == 0)
        #expect(cache.countLimit == 50)
    }

    @Test func explicitRemovalsReturnTheValueAndAreNotReported() {
        let (cache, recorder) = MemoryCache<String, Int>.recording(countLimit: 10)
        cache.store(1, for: "a", cost: 3)
        cache.store(2, for: "b", cost: 4)
        #expect(cache.removeValue(for: "a") == 1)
        #expect(cache.removeValue(for: "a") == nil)
        #expect(cache.totalCost == 4)
        cache.removeAll()
        #expect(cache.count == 0)
        #expect(cache.totalCost == 0)
        #expect(recorder.all.isEmpty)
        #expect(cache.statistics.removals == 2)
        cache.store(3, for: "c")
        #expect(cache.value(for: "c") == 3)
        #expect(cache._checkInvariants() == [])
    }
}

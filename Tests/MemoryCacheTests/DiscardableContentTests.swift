import Testing
@testable import MemoryCache

struct DiscardableContentTests {
    @Test func valueWhoseContentWasDiscardedIsRemovedOnAccess() {
        let (cache, recorder) = MemoryCache<Int, Purgeable>.recording()
        let purgeable = Purgeable(1)
        cache.store(purgeable, for: 1, cost: 5)
        purgeable.purge()
        #expect(cache.value(for: 1) == nil)
        #expect(cache.count == 0)
        #expect(cache.totalCost == 0)
        #expect(recorder.all.map { "\($0.key) \($0.value.id) \($0.cost) \($0.reason)" } == ["1 1 5 discardedContent"])
        #expect(purgeable.counters.beginCalls == 1)
        #expect(purgeable.counters.accessCount == 0)
        let statistics = cache.statistics
        #expect(statistics.hits == 0)
        #expect(statistics.misses == 1)
        #expect(statistics.evictions(.discardedContent) == 1)
    }

    @Test func eachHitBeginsOneContentAccess() throws {
        let cache = MemoryCache<Int, Purgeable>()
        let purgeable = Purgeable(1)
        cache.store(purgeable, for: 1)
        #expect(purgeable.counters.beginCalls == 0)
        let first = try #require(cache.value(for: 1))
        let second = try #require(cache.value(for: 1))
        #expect(first === purgeable && second === purgeable)
        #expect(purgeable.counters.accessCount == 2)
        first.endContentAccess()
        second.endContentAccess()
        #expect(purgeable.counters.accessCount == 0)
        #expect(purgeable.counters.beginCalls == 2)
        #expect(purgeable.counters.endCalls == 2)
        #expect(cache.statistics.hits == 2)
    }

    @Test func evictionDiscardsContentThatIsNotInUse() {
        let (cache, recorder) = MemoryCache<Int, Purgeable>.recording(countLimit: 1)
        let old = Purgeable(1)
        cache.store(old, for: 1)
        cache.store(Purgeable(2), for: 2)
        #expect(recorder.reasons == [.countLimit])
        #expect(old.counters.discardCalls == 1)
        #expect(old.isContentDiscarded)
    }

    @Test func evictionLeavesContentInUseAlone() throws {
        let cache = MemoryCache<Int, Purgeable>(totalCostLimit: 10)
        let old = Purgeable(1)
        cache.store(old, for: 1, cost: 10)
        let inUse = try #require(cache.value(for: 1))
        cache.store(Purgeable(2), for: 2, cost: 10)
        #expect(old.counters.discardCalls == 1)
        #expect(!old.isContentDiscarded)
        inUse.endContentAccess()
    }

    @Test func trimmingAndRejectingDiscardContent() {
        let cache = MemoryCache<Int, Purgeable>(totalCostLimit: 10)
        let trimmed = Purgeable(1)
        let rejected = Purgeable(2)
        cache.store(trimmed, for: 1, cost: 1)
        cache.store(rejected, for: 2, cost: 11)
        cache.trim(toCount: 0)
        #expect(trimmed.counters.discardCalls == 1)
        #expect(rejected.counters.discardCalls == 1)
    }

    @Test func replacedOrRemovedValuesAreNotDiscarded() {
        let cache = MemoryCache<Int, Purgeable>()
        let replaced = Purgeable(1)
        let removed = Purgeable(2)
        let cleared = Purgeable(3)
        cache.store(replaced, for: 1)
        cache.store(Purgeable(4), for: 1)
        cache.store(removed, for: 2)
        cache.removeValue(for: 2)
        cache.store(cleared, for: 3)
        cache.removeAll()
        for purgeable in [replaced, removed, cleared] {
            #expect(purgeable.counters.discardCalls == 0, "\(purgeable)")
            #expect(purgeable.counters.beginCalls == 0, "\(purgeable)")
        }
    }

    @Test func trimSweepsDiscardedContentBeforeEvictingAnythingElse() {
        let (cache, recorder) = MemoryCache<Int, Purgeable>.recording(policy: .leastRecentlyUsed)
        let values = (1...4).map(Purgeable.init)
        for value in values { cache.store(value, for: value.id, cost: 1) }
        values[2].purge()
        cache.trim(toCount: 3)
        #expect(recorder.all.map { "\($0.key):\($0.reason)" } == ["3:discardedContent"])
        cache.trim(toCost: 1)
        #expect(recorder.all.map { "\($0.key):\($0.reason)" } == ["3:discardedContent", "1:trimmed", "2:trimmed"])
        #expect(cache._keysInEvictionOrder().main == [4])
    }

    @Test func discardedContentStaysWhenEvictionIsSwitchedOff() {
        let (cache, recorder) = MemoryCache<Int, Purgeable>.recording(evictsObjectsWithDiscardedContent: false)
        #expect(!cache.evictsObjectsWithDiscardedContent)
        let purgeable = Purgeable(1)
        cache.store(purgeable, for: 1)
        purgeable.purge()
        #expect(cache.value(for: 1) == nil)
        cache.trim(toCount: 1)
        #expect(cache.count == 1)
        #expect(recorder.all.isEmpty)
        #expect(cache.statistics.misses == 1)

        cache.evictsObjectsWithDiscardedContent = true
        #expect(cache.value(for: 1) == nil)
        #expect(cache.count == 0)
        #expect(recorder.reasons == [.discardedContent])
    }

    @Test func defaultIsToEvictDiscardedContent() {
        #expect(MemoryCache<Int, Purgeable>().evictsObjectsWithDiscardedContent)
    }

    @Test func valuesOfOtherTypesAreNeverAskedForAccess() {
        // A cache of existentials holds both kinds; only the conforming one is asked.
        let cache = MemoryCache<Int, any Sendable>()
        let purgeable = Purgeable(1)
        cache.store(purgeable, for: 1)
        cache.store("plain", for: 2)
        #expect(cache.value(for: 2) as? String == "plain")
        #expect(cache.value(for: 1) as? Purgeable === purgeable)
        #expect(purgeable.counters.beginCalls == 1)
        purgeable.endContentAccess()
    }
}

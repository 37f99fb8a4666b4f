import Testing
@testable import MemoryCache

struct EvictionPolicyTests {
    @Test func defaultPolicyIsS3FIFO() {
        #expect(MemoryCache<Int, Int>().policy == .s3FIFO)
    }

    @Test func leastRecentlyUsedEvictsTheEntryUnreadForLongest() {
        let (cache, recorder) = MemoryCache<String, Int>.recording(countLimit: 3, policy: .leastRecentlyUsed)
        cache.store(1, for: "a")
        cache.store(2, for: "b")
        cache.store(3, for: "c")
        #expect(cache.value(for: "a") == 1)
        #expect(cache._keysInEvictionOrder().main == ["b", "c", "a"])
        cache.store(4, for: "d")
        #expect(recorder.keys == ["b"])
        #expect(cache.value(for: "c") == 3)
        cache.store(5, for: "e")
        #expect(recorder.keys == ["b", "a"])
        #expect(cache._keysInEvictionOrder().main == ["d", "c", "e"])
    }

    @Test func leastRecentlyUsedTreatsReplacementAsAUse() {
        let (cache, recorder) = MemoryCache<String, Int>.recording(countLimit: 2, policy: .leastRecentlyUsed)
        cache.store(1, for: "a")
        cache.store(2, for: "b")
        cache.store(10, for: "a")
        cache.store(3, for: "c")
        #expect(recorder.all.map { "\($0.key):\($0.reason)" } == ["a:replaced", "b:countLimit"])
    }

    @Test func leastRecentlyUsedIsFlushedByAScan() {
        let cache = MemoryCache<Int, Int>(countLimit: 10, policy: .leastRecentlyUsed)
        for key in 0..<10 { cache.store(key, for: key) }
        for _ in 0..<3 { for key in 0..<5 { _ = cache.value(for: key) } }
        for key in 100..<200 { cache.store(key, for: key) }
        #expect(cache.storedKeys(among: 0..<10) == [])
    }

    @Test func s3FIFOKeepsHotKeysThroughAScan() {
        let (cache, recorder) = MemoryCache<Int, Int>.recording(countLimit: 10, policy: .s3FIFO)
        for key in 0..<10 { cache.store(key, for: key) }
        for key in 0..<5 { #expect(cache.value(for: key) == key) }
        for key in 100..<200 { cache.store(key, for: key) }
        // The hot keys were promoted to the main queue; the scan passed through the small one.
        #expect(cache.storedKeys(among: 0..<10) == [0, 1, 2, 3, 4])
        #expect(cache.count == 10)
        #expect(Set(recorder.keys).isDisjoint(with: 0..<5))
        #expect(recorder.all.count == 100)
        #expect(cache._checkInvariants() == [])
    }

    @Test func s3FIFOAdmitsNewKeysToTheSmallQueueAndPromotesReadOnes() {
        let (cache, recorder) = MemoryCache<Int, Int>.recording(countLimit: 10, policy: .s3FIFO)
        for key in 0..<10 { cache.store(key, for: key) }
        #expect(cache._keysInEvictionOrder().small == Array(0..<10))
        #expect(cache._keysInEvictionOrder().main == [])
        _ = cache.value(for: 0)
        _ = cache.value(for: 1)
        cache.store(10, for: 10)
        // 0 and 1 were read while they waited: moved to main. 2 was not: evicted.
        #expect(recorder.keys == [2])
        #expect(cache._keysInEvictionOrder().main == [0, 1])
        #expect(cache._keysInEvictionOrder().small == Array(3...10))
    }

    @Test func s3FIFOSendsAKeyRememberedByTheGhostQueueStraightToMain() {
        let (cache, recorder) = MemoryCache<Int, Int>.recording(countLimit: 4, policy: .s3FIFO)
        for key in 0..<5 { cache.store(key, for: key) }
        #expect(recorder.keys == [0])
        cache.store(0, for: 0)
        #expect(cache._keysInEvictionOrder().main == [0])
        #expect(recorder.keys == [0, 1])
    }

    @Test func s3FIFOGivesReadEntriesOfTheMainQueueAnotherRound() {
        let (cache, recorder) = MemoryCache<Int, Int>.recording(countLimit: 10, policy: .s3FIFO)
        // Fill main through the ghost queue: store 0..<10, push them out with 10..<20, store them again.
        for key in 0..<20 { cache.store(key, for: key) }
        for key in 0..<10 { cache.store(key, for: key) }
        #expect(cache._keysInEvictionOrder().main == Array(0..<10))
        recorder.removeAll()
        _ = cache.value(for: 0)
        cache.store(100, for: 100)  // small is empty: main's tail 0 was read, so 1 goes
        #expect(recorder.keys == [1])
        #expect(cache._keysInEvictionOrder().main == Array(2..<10) + [0])
    }
}

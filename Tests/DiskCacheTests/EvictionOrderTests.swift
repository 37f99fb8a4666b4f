@testable import DiskCache
import Foundation
import MemoryCache
import Testing
import TestSupport

/// Which entries the sweeper evicts: S3-FIFO (the default) and LRU, decisions worked out by
/// hand, kept across a close and reopen (with and without a compaction) and across instances
/// sharing one cache.
struct EvictionOrderTests {
    func configuration(_ policy: EvictionPolicy, countLimit: Int, clock: ManualClock = ManualClock()) -> DiskCache.Configuration {
        var configuration = DiskCache.Configuration.testing(clock: clock)
        configuration.countLimit = countLimit
        configuration.evictionPolicy = policy
        configuration.lowWatermark = 1
        configuration.sweepInterval = nil
        return configuration
    }

    /// Stores `key`, then sweeps if that took the cache over its count limit (as a writer over
    /// the limit waits for the sweeper).
    func store(_ cache: DiskCache, _ key: String) throws {
        try cache.store(Data(key.utf8), for: key)
        if let limit = cache.countLimit, cache.count > limit { cache.sweep() }
    }

    func present(_ cache: DiskCache, _ keys: Range<Int>) -> [Int] {
        keys.filter { cache.contains("k\($0)") }
    }

    @Test func s3FIFOEvictsWhatWasReadOnceAndKeepsWhatWasReadTwice() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(.s3FIFO, countLimit: 10))
        for i in 0..<10 { try store(cache, "k\(i)") }
        // k0 read twice, k1 once: at the small queue's old end k0 moves to the main queue and
        // k1, read once, is the one evicted (LRU would evict k2, the least recently used).
        _ = cache.data(for: "k0")
        _ = cache.data(for: "k0")
        _ = cache.data(for: "k1")
        try store(cache, "k10")
        #expect(present(cache, 0..<11) == [0, 2, 3, 4, 5, 6, 7, 8, 9, 10])
        // k1 is remembered: stored again it joins the main queue, and the small queue's oldest,
        // k2, goes next.
        try store(cache, "k1")
        #expect(present(cache, 0..<11) == [0, 1, 3, 4, 5, 6, 7, 8, 9, 10])
        // A scan of new keys passes through the small queue: the main queue's k0 and k1 stay.
        for i in 11..<40 { try store(cache, "k\(i)") }
        #expect(cache.contains("k0") && cache.contains("k1"))
        #expect(cache.count == 10)
    }

    @Test func lruEvictsTheLeastRecentlyReadEvenWithinOneSecond() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(.leastRecentlyUsed, countLimit: 10, clock: clock))
        // Every store and read in the same second: the order is the reads', not the writes'.
        for i in 0..<10 { try store(cache, "k\(i)") }
        for i in [3, 0, 1, 2] { _ = cache.data(for: "k\(i)") }
        try store(cache, "k10")
        try store(cache, "k11")
        #expect(present(cache, 0..<12) == [0, 1, 2, 3, 6, 7, 8, 9, 10, 11])
        try store(cache, "k12")
        try store(cache, "k13")
        try store(cache, "k14")
        #expect(present(cache, 0..<15) == [0, 1, 2, 3, 9, 10, 11, 12, 13, 14])
    }

    /// A trace of reads (a store on each miss) with a hot set, a warm set and one-hit wonders.
    func trace(count: Int, seed: UInt64) -> [Int] {
        var random = SplitMix64(seed: seed)
        var next = 1000
        return (0..<count).map { _ in
            let u = Double(random.next() >> 11) / Double(1 << 53)
            if u < 0.5 { return Int(random.next() % 8) }
            if u < 0.8 { return 8 + Int(random.next() % 40) }
            next += 1
            return next
        }
    }

    /// Replays `keys`: true for a hit.
    func replay(_ cache: DiskCache, _ keys: ArraySlice<Int>) throws -> [Bool] {
        try keys.map { key in
            if cache.data(for: "k\(key)") != nil { return true }
            try store(cache, "k\(key)")
            return false
        }
    }

    @Test(arguments: [EvictionPolicy.s3FIFO, .leastRecentlyUsed], [false, true])
    func theSameDecisionsAfterAReopen(policy: EvictionPolicy, compacting: Bool) throws {
        let keys = trace(count: 1200, seed: 7)
        let clock = ManualClock()
        let straight = TemporaryDirectory(), reopened = TemporaryDirectory()
        let configuration = configuration(policy, countLimit: 20, clock: clock)
        let reference = try DiskCache(directory: straight.cache, configuration: configuration)
        let expected = try replay(reference, keys[...])
        try reference.close()

        var cache = try DiskCache(directory: reopened.cache, configuration: configuration)
        var hits = try replay(cache, keys[..<600])
        if compacting { try cache.compact() }
        try cache.close()
        cache = try DiskCache(directory: reopened.cache, configuration: configuration)
        hits += try replay(cache, keys[600...])
        try cache.close()
        #expect(hits == expected)
        // The policy did keep something: the trace's hot keys hit.
        #expect(hits.filter { $0 }.count > 300)
    }

    @Test func twoInstancesEvictByTheirCombinedReads() throws {
        let dir = TemporaryDirectory()
        let writer = try DiskCache(directory: dir.cache, configuration: configuration(.s3FIFO, countLimit: 10))
        let reader = try DiskCache(directory: dir.cache, configuration: configuration(.s3FIFO, countLimit: 10))
        for i in 0..<10 { try store(writer, "k\(i)") }
        // Only the other instance reads k0 and k1, twice each.
        for _ in 0..<2 {
            _ = reader.data(for: "k0")
            _ = reader.data(for: "k1")
        }
        try reader.flush()
        try store(writer, "k10")
        try store(writer, "k11")
        #expect(present(writer, 0..<12) == [0, 1, 4, 5, 6, 7, 8, 9, 10, 11])
        try reader.close()
        try writer.close()
    }

    @Test func aSweepAtTheLimitKeepsTheCacheNearlyFull() throws {
        let dir = TemporaryDirectory()
        var configuration = DiskCache.Configuration.testing()
        configuration.countLimit = 200
        configuration.sweepInterval = nil
        let cache = try DiskCache(directory: dir.cache, configuration: configuration)
        for i in 0..<201 { try cache.store(Data([1]), for: "k\(i)") }
        cache.sweep()
        // The default low watermark takes a small batch off, not a tenth.
        #expect(cache.count >= 198 && cache.count <= 200)
    }
}

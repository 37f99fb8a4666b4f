@testable import DiskCache
import Foundation
import MemoryCache
import Testing

/// `Configuration.admission`: which stores are written, worked out by hand. Admission decides
/// only once the cache has reached its limits: most tests open a cache of one entry and fill it
/// (``full(_:)``), and sweep by hand, so that it stays at its limit.
struct AdmissionTests {
    func configuration(_ admission: DiskCache.Admission, countLimit: Int? = 1,
                       policy: EvictionPolicy = .s3FIFO) -> DiskCache.Configuration {
        var configuration = DiskCache.Configuration.testing()
        configuration.admission = admission
        configuration.countLimit = countLimit
        configuration.evictionPolicy = policy
        configuration.lowWatermark = 1
        configuration.sweepInterval = nil
        return configuration
    }

    /// `cache` filled to its count limit with entries of its own.
    @discardableResult
    func full(_ cache: DiskCache) throws -> DiskCache {
        var filler = 0
        while cache.count < cache.countLimit ?? 0 {
            try cache.store(Data(), for: "filler-\(filler)")
            filler += 1
        }
        return cache
    }

    @Test func everyStoreIsWrittenByDefault() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(DiskCache.Configuration().admission == .everyStore)
        #expect(try cache.store(Data("a".utf8), for: "a"))
        #expect(cache.data(for: "a") == Data("a".utf8))
        #expect(cache.statistics.declinedStores == 0)
    }

    @Test func aKeyIsWrittenOnItsSecondStore() throws {
        let dir = TemporaryDirectory()
        let cache = try full(DiskCache(directory: dir.cache, configuration: configuration(.minimumUses(2, window: 10))))
        #expect(try cache.store(Data("one".utf8), for: "k") == false)
        #expect(cache.data(for: "k") == nil)
        #expect(cache.count == 1)
        #expect(try cache.store(Data("two".utf8), for: "k"))
        #expect(cache.data(for: "k") == Data("two".utf8))
        // Held now: a store that replaces it is written at once.
        #expect(try cache.store(Data("three".utf8), for: "k"))
        #expect(cache.data(for: "k") == Data("three".utf8))
        #expect(try cache.store(value: 1, for: "typed") == false)
        #expect(try cache.store(value: 2, for: "typed"))
        let statistics = cache.statistics
        #expect(statistics.declinedStores == 2)
        #expect(statistics.writes == 4)
        // Nothing of the declined stores was left behind: no file but the filler's and the writes'.
        try cache.close()
        let entryFiles = try FileManager.default.subpathsOfDirectory(atPath: dir.cache.path).filter { $0.hasSuffix(".meta") }
        #expect(entryFiles.count == 3)
    }

    /// S3-FIFO remembers a key that leaves its small queue, removed as well as evicted: stored
    /// again, it is written at once. LRU remembers none: the count starts over.
    @Test(arguments: [EvictionPolicy.s3FIFO, .leastRecentlyUsed])
    func aKeyRemovedLately(_ policy: EvictionPolicy) throws {
        let dir = TemporaryDirectory()
        let cache = try full(DiskCache(directory: dir.cache, configuration: configuration(.minimumUses(2, window: 10), policy: policy)))
        _ = try cache.store(Data("1".utf8), for: "k")
        #expect(try cache.store(Data("2".utf8), for: "k"))
        try cache.removeValue(for: "k")
        #expect(try cache.store(Data("3".utf8), for: "k") == (policy == .s3FIFO))
        #expect(try cache.store(Data("4".utf8), for: "k"))
    }

    @Test func theNthStoreWithAHigherMinimum() throws {
        let dir = TemporaryDirectory()
        let cache = try full(DiskCache(directory: dir.cache, configuration: configuration(.minimumUses(3, window: 10))))
        #expect(try cache.store(Data(), for: "k") == false)
        #expect(try cache.store(Data(), for: "j") == false)
        #expect(try cache.store(Data(), for: "k") == false)
        #expect(try cache.store(Data(), for: "k"))
        #expect(try cache.store(Data(), for: "j") == false)
        #expect(try cache.store(Data(), for: "j"))
        #expect(cache.statistics.declinedStores == 4)
    }

    @Test func theWindowForgetsTheOldestKeysDeclined() throws {
        let dir = TemporaryDirectory()
        let cache = try full(DiskCache(directory: dir.cache, configuration: configuration(.minimumUses(2, window: 3))))
        for key in ["a", "b", "c", "d"] { #expect(try cache.store(Data(), for: key) == false) }
        // "a" was pushed out of the window of three by "d": its count starts over.
        #expect(try cache.store(Data(), for: "a") == false)
        #expect(try cache.store(Data(), for: "c"))
        #expect(try cache.store(Data(), for: "d"))
        #expect(try cache.store(Data(), for: "a"))
    }

    @Test func theWindowIsTheCountLimitByDefault() throws {
        let dir = TemporaryDirectory()
        let cache = try full(DiskCache(directory: dir.cache, configuration: configuration(.minimumUses(2), countLimit: 2)))
        for key in ["a", "b", "c"] { #expect(try cache.store(Data(), for: key) == false) }
        #expect(try cache.store(Data(), for: "a") == false)
        #expect(try cache.store(Data(), for: "c"))
    }

    @Test func aKeyEvictedFromTheSmallQueueLatelyIsWrittenAtOnce() throws {
        let dir = TemporaryDirectory()
        let cache = try full(DiskCache(directory: dir.cache, configuration: configuration(.minimumUses(2, window: 10), countLimit: 4)))
        func put(_ key: String) throws -> Bool {
            let stored = try cache.store(Data(key.utf8), for: key)
            if cache.count > 4 { cache.sweep() }
            return stored
        }
        for i in 0..<5 {
            _ = try put("k\(i)")
            #expect(try put("k\(i)"))
        }
        // k0, never read, left the small queue for the ghost: asked again, it comes back at once.
        #expect(!cache.contains("k0"))
        #expect(try put("k0"))
        #expect(cache.contains("k0"))
    }

    @Test func streamedStoresAskFirst() async throws {
        let dir = TemporaryDirectory()
        let cache = try full(DiskCache(directory: dir.cache, configuration: configuration(.minimumUses(2))))
        #expect(cache.admitsStore(for: "video") == false)
        #expect(cache.admitsStore(for: "video"))
        let (pieces, continuation) = AsyncStream<Data>.makeStream()
        continuation.yield(Data("abc".utf8))
        continuation.finish()
        try await cache.store(pieces, for: "video")
        #expect(try await cache.data(for: "video") == Data("abc".utf8))
        // The store of a key held is always admitted.
        #expect(cache.admitsStore(for: "video"))
    }

    @Test func theAsyncAndTypedStoresSayWhetherTheyWrote() async throws {
        let dir = TemporaryDirectory()
        let cache = try full(DiskCache(directory: dir.cache, configuration: configuration(.minimumUses(2, window: 10))))
        #expect(try await cache.store(Data(), for: "a") == false)
        #expect(try await cache.store(Data(), for: "a"))
        // The typed stores, sync and async.
        #expect(try await cache.store(value: 1, for: "b") == false)
        #expect(try await cache.store(value: 2, for: "b"))
        #expect(try await cache.value(Int.self, for: "b") == 2)
    }

    /// Below its limits' low watermark nothing would be evicted for a store: every one is
    /// written, and admission starts once the cache has filled.
    @Test func aCacheBelowItsLimitsTakesEveryStore() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(.minimumUses(2), countLimit: 3))
        for key in ["a", "b", "c"] { #expect(try cache.store(Data(), for: key)) }
        #expect(try cache.store(Data(), for: "d") == false)
        try cache.removeValue(for: "a")
        #expect(try cache.store(Data(), for: "e"))
        // By bytes alone, the same: a cache far below its disk capacity takes every store.
        let roomy = TemporaryDirectory()
        let big = try DiskCache(directory: roomy.cache, configuration: configuration(.minimumUses(2), countLimit: nil))
        for key in 0..<100 { #expect(try big.store(Data(count: 100), for: "k\(key)")) }
        #expect(big.statistics.declinedStores == 0)
    }

    @Test func aClosedCacheStillThrowsClosed() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(.minimumUses(2)))
        try cache.close()
        #expect(throws: DiskCacheError.self) { try cache.store(Data(), for: "a") }
    }

    @Test func useCountsForgetCountsOfKeysTheyNoLongerRemember() {
        var uses = UseCounts<Int>()
        var admitted = 0
        for key in 0..<10_000 where uses.admits(key, minimumUses: 3, window: 100) { admitted += 1 }
        for key in 0..<10_000 where uses.admits(key, minimumUses: 3, window: 100) { admitted += 1 }
        #expect(admitted == 0)
        #expect(uses.count == 100)
        // Each key's second offer came 10,000 offers after its first, outside the window: every
        // count started over, and only the last 100 keys are remembered, once each.
        let third = uses.admits(9_999, minimumUses: 3, window: 100)
        let fourth = uses.admits(9_999, minimumUses: 3, window: 100)
        #expect(!third && fourth)
    }
}

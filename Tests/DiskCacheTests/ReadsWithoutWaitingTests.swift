@testable import DiskCache
import Foundation
import Testing
import TestSupport

/// `DiskCache.PageCacheOnly`: reads that take only what the page cache holds, for an
/// event loop that must not block. A read that would wait gives up as a plain miss that keeps
/// the entry and counts nothing; once the page cache holds the files, the same read succeeds.
@Suite(.enabled(if: PageCache.canDrop, "the temporary directory's file system keeps its pages in memory"))
struct ReadsWithoutWaitingTests {
    /// Writes back and drops from the page cache every file of the cache in `dir`.
    func dropEveryFile(_ dir: TemporaryDirectory) throws {
        let files = FileManager.default.enumerator(at: dir.cache, includingPropertiesForKeys: nil)!
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "meta" || $0.pathExtension == "body" }
        #expect(files.count == 3)  // two .meta files and the large value's .body
        #expect(PageCache.dropEntryFiles(under: dir.cache), "a file stayed in the page cache")
    }

    /// Reads with `read` (given a fresh `PageCacheOnly`), the `extensions` files dropped from the
    /// page cache before each attempt, until an attempt gives up (at most 20); how many
    /// succeeded before that, or nil (an issue recorded) when none gave up. A read that would
    /// wait still starts the disk read (readahead), and a fast disk can finish it before the
    /// kernel looks again, so an attempt can succeed on a cold page cache: each that does must
    /// give the right value (`isRight`) and is counted as the hit it is.
    func succeededBeforeGivingUp<T>(_ dir: TemporaryDirectory, extensions: Set<String> = ["meta", "body"],
                                    _ read: (DiskCache.PageCacheOnly) -> T?, isRight: (T) -> Bool,
                                    sourceLocation: SourceLocation = #_sourceLocation) -> Int? {
        for attempt in 0..<20 {
            guard PageCache.dropEntryFiles(under: dir.cache, extensions: extensions) else {
                Issue.record("a file stayed in the page cache", sourceLocation: sourceLocation)
                return nil
            }
            let outcome = Self.withoutWaiting(read)
            guard let value = outcome.value else {
                #expect(outcome.waited, "a read that did not wait gave nothing", sourceLocation: sourceLocation)
                return attempt
            }
            #expect(!outcome.waited && isRight(value), sourceLocation: sourceLocation)
        }
        Issue.record("20 reads from a dropped page cache all succeeded", sourceLocation: sourceLocation)
        return nil
    }

    /// `read` given a fresh `PageCacheOnly`: what it returned, and whether a read gave up.
    static func withoutWaiting<T>(_ read: (DiskCache.PageCacheOnly) -> T) -> (value: T, waited: Bool) {
        let reads = DiskCache.PageCacheOnly()
        let value = read(reads)
        return (value, reads.gaveUp)
    }

    /// The size of a checked body, if any, whose file is closed as it goes.
    static func size(_ body: consuming DiskCache.CheckedBody?) -> Int64? {
        guard let body else { return nil }
        return body.size
    }

    @Test func aReadThatWouldWaitGivesUpKeepsTheEntryAndCountsNothing() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 8 << 10))
        let small = Data((0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7) })
        let large = Data((0..<(300 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 5) })
        try cache.store(small, for: "small")
        try cache.store(large, for: "large")
        try cache.flush()
        try dropEveryFile(dir)
        let before = cache.statistics

        // Every file dropped before each attempt: one that gives up still starts the disk read.
        var succeeded = 0
        for (key, value) in [("small", small), ("large", large)] {
            succeeded += try #require(succeededBeforeGivingUp(dir, { cache.dataAndEntry(for: key, pageCacheOnly: $0)?.data }, isRight: { $0 == value }))
        }
        succeeded += try #require(succeededBeforeGivingUp(dir, { Self.size(try? cache.checkedBody(for: "large", pageCacheOnly: $0)) },
                                                          isRight: { $0 == Int64(large.count) }))
        #expect(cache.statistics.hits == before.hits + succeeded && cache.statistics.misses == before.misses)
        #expect(cache.statistics.corruptEntriesRemoved == 0)
        #expect(cache.contains("small") && cache.contains("large"))

        // Read the ordinary way (which waits), and the page cache holds the files again.
        #expect(cache.data(for: "small") == small)
        #expect(cache.data(for: "large") == large)
        for (key, value) in [("small", small), ("large", large)] {
            let again = Self.withoutWaiting { cache.dataAndEntry(for: key, pageCacheOnly: $0)?.data }
            #expect(again.value == value && !again.waited, "\(key)")
        }
        let body = Self.withoutWaiting { Self.size(try? cache.checkedBody(for: "large", pageCacheOnly: $0)) }
        #expect(!body.waited && body.value == Int64(large.count))
        succeeded += 5
        #expect(cache.statistics.hits == before.hits + succeeded && cache.statistics.misses == before.misses)

        // Only the body file gone from the page cache: the read that hashes a body file as it
        // reads it, and the check of a body file in place, give up too.
        succeeded += try #require(succeededBeforeGivingUp(dir, extensions: ["body"], { cache.dataAndEntry(for: "large", pageCacheOnly: $0)?.data },
                                                          isRight: { $0 == large }))
        succeeded += try #require(succeededBeforeGivingUp(dir, extensions: ["body"], { Self.size(try? cache.checkedBody(for: "large", pageCacheOnly: $0)) },
                                                          isRight: { $0 == Int64(large.count) }))
        #expect(cache.statistics.hits == before.hits + succeeded && cache.statistics.misses == before.misses)
        #expect(cache.contains("large"))
    }

    /// The check of a body kept mapped (`mappedBodyCapacity`) asks the page cache first
    /// (`mincore`): touching a page it lacks would wait for the disk on the event loop.
    @Test func aMappedCheckThatWouldWaitGivesUpAndKeepsTheEntry() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 8 << 10))
        cache.mappedBodyCapacity = 64 << 20
        let large = Data((0..<(300 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) })
        try cache.store(large, for: "large")
        try cache.flush()
        let before = cache.statistics
        // Only the body file dropped: its `.meta` file is read without waiting, and the body's
        // check is what must give up.
        for _ in 0..<2 {
            #expect(PageCache.dropEntryFiles(under: dir.cache, extensions: ["body"]), "a body stayed in the page cache")
            let attempt = Self.withoutWaiting { Self.size(try? cache.checkedBody(for: "large", pageCacheOnly: $0)) }
            #expect(attempt.value == nil && attempt.waited)
        }
        #expect(cache.statistics.hits == before.hits && cache.statistics.corruptEntriesRemoved == 0)
        #expect(cache.contains("large"))

        // Checked the ordinary way (which waits) through the same mapping, then without waiting.
        for waiting in [true, false] {
            let body = waiting ? (value: Self.size(try? cache.checkedBody(for: "large")), waited: false)
                               : Self.withoutWaiting { Self.size(try? cache.checkedBody(for: "large", pageCacheOnly: $0)) }
            #expect(!body.waited && body.value == Int64(large.count))
        }
        #expect(cache.mappedBodies.usage.count == 1)
    }

    @Test func aTieredReadThatWouldWaitCountsNoMiss() throws {
        let dir = TemporaryDirectory()
        let cache = try TieredCache(memoryCapacity: 0, diskCapacity: 1 << 30, directory: dir.cache,
                                    configuration: .testing(inlineThreshold: 8 << 10))
        let large = Data(repeating: 9, count: 300 << 10)
        try cache.store(Data(repeating: 1, count: 100), for: "small")
        try cache.store(large, for: "large")
        try cache.disk?.flush()
        try dropEveryFile(dir)
        let before = cache.statistics
        var succeeded = try #require(succeededBeforeGivingUp(dir, { cache.record(for: "large", pageCacheOnly: $0) },
                                                             isRight: { $0.data == large }))
        succeeded += try #require(succeededBeforeGivingUp(dir, { Self.size(try? cache.checkedBody(for: "large", pageCacheOnly: $0)) },
                                                          isRight: { $0 == Int64(large.count) }))
        #expect(cache.statistics.misses == before.misses && cache.statistics.diskHits == before.diskHits + succeeded)
        #expect(cache.record(for: "large")?.data == large)
        #expect(cache.statistics.diskHits == before.diskHits + succeeded + 1 && cache.statistics.misses == before.misses)
    }
}

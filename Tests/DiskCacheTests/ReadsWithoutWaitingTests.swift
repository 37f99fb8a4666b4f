@testable import DiskCache
import Foundation
import Testing
import TestSupport

/// `DiskCache.withoutWaitingForDisk`: reads that take only what the page cache holds, for an
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

        // Dropped again before each read: a read that gives up still starts the disk read
        // (readahead), which could otherwise bring back what the next read needs.
        for key in ["small", "large"] {
            try dropEveryFile(dir)
            let attempt = DiskCache.withoutWaitingForDisk { cache.data(for: key) }
            #expect(attempt.value == nil && attempt.waited, "\(key)")
        }
        try dropEveryFile(dir)
        let checked = DiskCache.withoutWaitingForDisk { try? cache.checkedBody(for: "large") }
        #expect(checked.value == nil && checked.waited)
        #expect(cache.statistics.hits == before.hits && cache.statistics.misses == before.misses)
        #expect(cache.statistics.corruptEntriesRemoved == 0)
        #expect(cache.contains("small") && cache.contains("large"))

        // Read the ordinary way (which waits), and the page cache holds the files again.
        #expect(cache.data(for: "small") == small)
        #expect(cache.data(for: "large") == large)
        for (key, value) in [("small", small), ("large", large)] {
            let again = DiskCache.withoutWaitingForDisk { cache.data(for: key) }
            #expect(again.value == value && !again.waited, "\(key)")
        }
        let body = DiskCache.withoutWaitingForDisk { try? cache.checkedBody(for: "large") }
        #expect(!body.waited && body.value?.size == Int64(large.count))
        if case .file(let descriptor)? = body.value?.source { close(descriptor) }
        #expect(cache.statistics.hits == before.hits + 5 && cache.statistics.misses == before.misses)

        // Only the body file gone from the page cache: the read that hashes a body file as it
        // reads it, and the check of a body file in place, give up too.
        #expect(PageCache.dropEntryFiles(under: dir.cache, extensions: ["body"]), "a body stayed in the page cache")
        let bodyGone = DiskCache.withoutWaitingForDisk { cache.data(for: "large") }
        #expect(bodyGone.value == nil && bodyGone.waited)
        #expect(PageCache.dropEntryFiles(under: dir.cache, extensions: ["body"]), "a body stayed in the page cache")
        let bodyUnchecked = DiskCache.withoutWaitingForDisk { try? cache.checkedBody(for: "large") }
        #expect(bodyUnchecked.value == nil && bodyUnchecked.waited)
        #expect(cache.statistics.hits == before.hits + 5 && cache.statistics.misses == before.misses)
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
            let attempt = DiskCache.withoutWaitingForDisk { try? cache.checkedBody(for: "large") }
            #expect(attempt.value == nil && attempt.waited)
        }
        #expect(cache.statistics.hits == before.hits && cache.statistics.corruptEntriesRemoved == 0)
        #expect(cache.contains("large"))

        // Checked the ordinary way (which waits) through the same mapping, then without waiting.
        for waiting in [true, false] {
            let body = waiting ? (value: try? cache.checkedBody(for: "large"), waited: false)
                               : DiskCache.withoutWaitingForDisk { try? cache.checkedBody(for: "large") }
            #expect(!body.waited && body.value?.size == Int64(large.count))
            if case .file(let descriptor)? = body.value?.source { close(descriptor) }
        }
        #expect(cache.layout.directory.mappedBodies.usage.count == 1)
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
        let record = DiskCache.withoutWaitingForDisk { cache.record(for: "large") }
        #expect(record.value == nil && record.waited)
        try dropEveryFile(dir)  // again: the read that gave up started the disk read (readahead)
        let checked = DiskCache.withoutWaitingForDisk { try? cache.checkedBody(for: "large") }
        #expect(checked.value == nil && checked.waited)
        #expect(cache.statistics.misses == before.misses && cache.statistics.diskHits == before.diskHits)
        #expect(cache.record(for: "large")?.data == large)
        #expect(cache.statistics.diskHits == before.diskHits + 1 && cache.statistics.misses == before.misses)
    }
}

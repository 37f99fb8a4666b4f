@testable import DiskCache
import Foundation
import Testing
import TestSupport

struct StoreTests {
    @Test(arguments: [0, 1, 100, 8 << 10, (8 << 10) + 1, 300_000])
    func storedBytesReadBackExactly(size: Int) throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        let value = randomData(count: size, seed: UInt64(size))
        try cache.store(value, for: "k")
        #expect(cache.data(for: "k") == value)
        #expect(cache.count == 1)
        #expect(cache.logicalSize == Int64(size))
        let files = EntryFiles(cache, key: "k")
        #expect(fileExists(files.meta))
        // Bodies up to the inline threshold live in the .meta file; larger ones in .body.
        #expect(fileExists(files.body) == (size > 8 << 10))
    }

    @Test func missReturnsNil() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(cache.data(for: "absent") == nil)
        #expect(cache.statistics.misses == 1)
        #expect(cache.statistics.hits == 0)
    }

    @Test(arguments: [0, 1 << 20])
    func storeReplacesEarlierValue(inlineThreshold: Int) throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: inlineThreshold))
        try cache.store(bytes("first"), for: "k")
        try cache.store(bytes("second, longer"), for: "k")
        #expect(cache.data(for: "k") == bytes("second, longer"))
        #expect(cache.count == 1)
        #expect(cache.logicalSize == 14)
    }

    @Test func bodyMovingFromFileToInlineLeavesNoBodyFile() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 100))
        try cache.store(randomData(count: 1000, seed: 1), for: "k")
        let files = EntryFiles(cache, key: "k")
        #expect(fileExists(files.body))
        try cache.store(bytes("small"), for: "k")
        #expect(!fileExists(files.body))
        #expect(!fileExists(EntryFiles(cache, key: "k").body))
        #expect(cache.data(for: "k") == bytes("small"))
    }

    @Test func removeValueDeletesEntryAndFiles() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 0))
        try cache.store(bytes("a"), for: "a")
        try cache.store(bytes("b"), for: "b")
        let files = EntryFiles(cache, key: "a")
        try cache.removeValue(for: "a")
        #expect(cache.data(for: "a") == nil)
        #expect(cache.data(for: "b") == bytes("b"))
        #expect(cache.count == 1)
        #expect(!fileExists(files.meta) && !fileExists(files.body))
        try cache.removeValue(for: "never stored")  // not an error
        #expect(cache.count == 1)
    }

    @Test func removeAllEmptiesTheCacheAndItsShards() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        for i in 0..<50 { try cache.store(bytes("v\(i)"), for: "k\(i)") }
        try cache.removeAll()
        #expect(cache.count == 0)
        #expect(cache.logicalSize == 0)
        for i in 0..<50 { #expect(cache.data(for: "k\(i)") == nil) }
        // The 256 shard directories are there again, empty.
        let shards = try FileManager.default.contentsOfDirectory(atPath: dir.cache.path).filter { $0.count == 2 }
        #expect(shards.count == 256)
        for shard in shards {
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.cache.appendingPathComponent(shard).path).isEmpty)
        }
        // Writes after a clear work, and survive a reopen while the cleared ones stay gone.
        try cache.store(bytes("after"), for: "k1")
        try cache.close()
        let reopened = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(reopened.count == 1)
        #expect(reopened.data(for: "k1") == bytes("after"))
        #expect(reopened.data(for: "k2") == nil)
    }

    @Test func removeEntriesModifiedSinceKeepsOlderOnes() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(clock: clock))
        try cache.store(bytes("old"), for: "old")
        clock.advance(seconds: 10)
        let cut = clock.date
        try cache.store(bytes("new"), for: "new")
        clock.advance(seconds: 10)
        try cache.store(bytes("newer"), for: "newer")
        try cache.removeEntries(modifiedSince: cut)
        #expect(cache.data(for: "old") == bytes("old"))
        #expect(cache.data(for: "new") == nil)
        #expect(cache.data(for: "newer") == nil)
        #expect(cache.count == 1)
    }

    /// A date taken just before a store, in the millisecond the store is stamped with, whose
    /// `Double` seconds round up across the millisecond's edge (as `Date()` gives about once in
    /// 11,000): the store still counts as at or after it.
    @Test func aStoreInTheSameMillisecondAsTheCutGoesWhateverItsRounding() throws {
        let dir = TemporaryDirectory()
        let edge = Date(timeIntervalSince1970: 1_796_675_231.782_999_992)
        #expect(edge.milliseconds == 1_796_675_231_783)  // the rounding this test is about
        let clock = ManualClock(Date(timeIntervalSince1970: 1_796_675_231.782))
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(clock: clock))
        try cache.store(bytes("same millisecond"), for: "k")
        try cache.removeEntries(modifiedSince: edge)
        #expect(cache.data(for: "k") == nil)
    }

    @Test func everythingSurvivesReopen() throws {
        let dir = TemporaryDirectory()
        var expected: [String: Data] = [:]
        do {
            let cache = try DiskCache(directory: dir.cache, configuration: .testing())
            for i in 0..<300 {
                let value = randomData(count: (i * 97) % 20_000, seed: UInt64(i))
                try cache.store(value, for: "key \(i)")
                expected["key \(i)"] = value
            }
            for i in stride(from: 0, to: 300, by: 7) {
                try cache.removeValue(for: "key \(i)")
                expected["key \(i)"] = nil
            }
            try cache.store(bytes("replaced"), for: "key 1")
            expected["key 1"] = bytes("replaced")
            try cache.close()
        }
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(cache.count == expected.count)
        #expect(cache.statistics.recovery.wasUncleanShutdown == false)
        for i in 0..<300 {
            #expect(cache.data(for: "key \(i)") == expected["key \(i)"], "key \(i)")
        }
    }

    static let hostileKeys: [String] = [
        "",
        " ",
        "../../etc/passwd",
        "/absolute/path",
        "a/b\\c:d*e?f\"g<h>i|j",
        "\0nul\0",
        "line\nbreak\r\n",
        "ключ",
        "キー🔑👨‍👩‍👧",
        "e\u{301}",  // decomposed é
        "\u{e9}",  // precomposed é: a different key
        String(repeating: "x", count: 100_000),
        String(repeating: "長", count: 20_000),
    ]

    @Test func keysOfEveryShapeRoundTripAndSurviveReopen() throws {
        let dir = TemporaryDirectory()
        do {
            let cache = try DiskCache(directory: dir.cache, configuration: .testing())
            for (i, key) in Self.hostileKeys.enumerated() { try cache.store(bytes("value \(i)"), for: key) }
            for (i, key) in Self.hostileKeys.enumerated() { #expect(cache.data(for: key) == bytes("value \(i)")) }
            try cache.close()
        }
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(cache.count == Self.hostileKeys.count)
        for (i, key) in Self.hostileKeys.enumerated() {
            #expect(cache.data(for: key) == bytes("value \(i)"))
            #expect(cache.entry(for: key)?.key == key)
        }
        // Nothing was written outside the cache directory.
        let outside = try FileManager.default.contentsOfDirectory(atPath: dir.path)
        #expect(outside == ["cache"])
    }

    @Test func expiredEntryReadsAsMissAndIsRemoved() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(clock: clock))
        try cache.store(bytes("short"), for: "short", expires: clock.date.addingTimeInterval(1.5))
        try cache.store(bytes("long"), for: "long", expires: clock.date.addingTimeInterval(3600))
        try cache.store(bytes("forever"), for: "forever")
        #expect(cache.data(for: "short") == bytes("short"))
        clock.advance(seconds: 1.4)
        #expect(cache.data(for: "short") == bytes("short"))
        clock.advance(seconds: 0.2)
        #expect(cache.data(for: "short") == nil)
        #expect(cache.entry(for: "short") == nil)
        #expect(cache.count == 2)
        #expect(cache.statistics.expiredReads == 1)
        #expect(cache.data(for: "long") == bytes("long"))
        #expect(cache.data(for: "forever") == bytes("forever"))
    }

    @Test func entryReportsMetadataAndDatesWithoutTheBody() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 0, clock: clock))
        let created = clock.date
        let expires = created.addingTimeInterval(60)
        try cache.store(randomData(count: 5000, seed: 9), for: "k", metadata: ["type": "image/png", "ü": "✓"], expires: expires)
        // The body is not needed: delete it and the entry still describes itself.
        try FileManager.default.removeItem(atPath: EntryFiles(cache, key: "k").body)
        let entry = try #require(cache.entry(for: "k"))
        #expect(entry.key == "k")
        #expect(entry.size == 5000)
        #expect(entry.created == created)
        #expect(entry.expires == expires)
        #expect(entry.metadata == ["type": "image/png", "ü": "✓"])
        #expect(entry.checksum == randomData(count: 5000, seed: 9).withUnsafeBytes { Checksum.xxh3($0) })
        #expect(cache.entry(for: "other") == nil)
    }

    @Test func metadataFileIsABinaryPropertyListFoundationReads() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(clock: clock))
        try cache.store(bytes("hello"), for: "greeting ✓", metadata: ["a": "b"], expires: clock.date.addingTimeInterval(10))
        let data = try Data(contentsOf: URL(fileURLWithPath: EntryFiles(cache, key: "greeting ✓").meta))
        var format = PropertyListSerialization.PropertyListFormat.xml
        let plist = try #require(try PropertyListSerialization.propertyList(from: data, format: &format) as? [String: Any])
        #expect(format == .binary)
        #expect(plist["key"] as? String == "greeting ✓")
        #expect((plist["size"] as? NSNumber)?.intValue == 5)
        #expect(plist["body"] as? Data == bytes("hello"))
        #expect(plist["metadata"] as? [String: String] == ["a": "b"])
        #expect(plist["created"] as? Date == clock.date)
        #expect(plist["expires"] as? Date == clock.date.addingTimeInterval(10))
        #expect((plist["format"] as? NSNumber)?.intValue == 1)
    }

    @Test func writesAfterCloseThrowAndReadsMiss() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        try cache.store(bytes("v"), for: "k")
        try cache.close()
        #expect(cache.data(for: "k") == nil)
        #expect(throws: DiskCacheError.self) { try cache.store(bytes("v"), for: "k") }
        do {
            try cache.store(bytes("v"), for: "k")
        } catch DiskCacheError.Code.closed {
            // expected
        }
        try cache.close()  // closing twice is harmless
    }

    @Test func totalSizeCountsBlocksOfBodiesMetadataAndJournal() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 0))
        let empty = cache.totalSize
        try cache.store(randomData(count: 10_000, seed: 1), for: "k")
        let block = cache.blockSize
        // One metadata file (one block) and a 10,000-byte body (rounded up to blocks).
        let expectedEntry = block + (10_000 + block - 1) / block * block
        #expect(cache.totalSize - empty >= expectedEntry)
        #expect(cache.totalSize - empty <= expectedEntry + block)  // the journal may have grown into a new block
    }

    @Test func durabilityModesAllRoundTrip() throws {
        for durability in [DiskCache.Durability.none, .batched(interval: .milliseconds(5)), .immediate] {
            let dir = TemporaryDirectory()
            do {
                let cache = try DiskCache(directory: dir.cache, configuration: .testing(durability: durability))
                try cache.store(bytes("x"), for: "k")
                try cache.store(randomData(count: 50_000, seed: 2), for: "big")
                try cache.flush()
                try cache.removeValue(for: "k")
                try cache.close()
            }
            let cache = try DiskCache(directory: dir.cache, configuration: .testing(durability: durability))
            #expect(cache.data(for: "k") == nil, "\(durability)")
            #expect(cache.data(for: "big") == randomData(count: 50_000, seed: 2), "\(durability)")
        }
    }

    @Test func metadataTooLargeIsRejectedAndNothingChanges() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        try cache.store(bytes("kept"), for: "k")
        let huge = ["blob": String(repeating: "m", count: IndexEntry.maximumMetaSize + 1)]
        #expect(throws: DiskCacheError.self) { try cache.store(bytes("v"), for: "k", metadata: huge) }
        #expect(cache.data(for: "k") == bytes("kept"))
        // Nothing was written for the refused store: only the kept entry's file is in its shard.
        let shard = (EntryFiles(cache, key: "k").meta as NSString).deletingLastPathComponent
        #expect(try FileManager.default.contentsOfDirectory(atPath: shard).count == 1)
    }
}

struct MetadataUpdateTests {
    @Test(arguments: [0, 1 << 20])
    func updatingMetadataKeepsTheBodyAndSurvivesReopen(inlineThreshold: Int) throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        let value = randomData(count: 5000, seed: 4)
        do {
            let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: inlineThreshold, clock: clock))
            try cache.store(value, for: "k", metadata: ["etag": "v1"], expires: clock.date.addingTimeInterval(3600))
            let before = EntryFiles(cache, key: "k")
            let inode = inlineThreshold == 0 ? try FileManager.default.attributesOfItem(atPath: before.body)[.systemFileNumber] as? Int : nil
            clock.advance(seconds: 5)
            #expect(try cache.updateMetadata(["etag": "v1", "checked": "yes"], for: "k"))
            let after = EntryFiles(cache, key: "k")
            #expect(after.meta != before.meta)
            #expect(!fileExists(before.meta) && !fileExists(before.body))
            if inlineThreshold == 0 {
                // The same body file under its new name: linked, not copied.
                #expect(try FileManager.default.attributesOfItem(atPath: after.body)[.systemFileNumber] as? Int == inode)
            }
            let entry = try #require(cache.entry(for: "k"))
            #expect(entry.metadata == ["etag": "v1", "checked": "yes"])
            #expect(entry.created == clock.date)
            #expect(entry.expires == clock.date.addingTimeInterval(3595))
            #expect(cache.statistics.metadataUpdates == 1)
            #expect(cache.statistics.writes == 1)
            #expect(try cache.updateMetadata([:], for: "absent") == false)
            try cache.close()
        }
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(clock: clock))
        #expect(cache.data(for: "k") == value)
        #expect(cache.entry(for: "k")?.metadata == ["etag": "v1", "checked": "yes"])
        #expect(try cache.verify().isHealthy)
    }
}

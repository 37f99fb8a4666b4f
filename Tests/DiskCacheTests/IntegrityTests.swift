@testable import DiskCache
import Foundation
import DiskCacheLocking
import Testing

struct IntegrityTests {
    @Test(arguments: [0, 1 << 20])
    func corruptBodyReadsAsMissIsRemovedAndCounted(inlineThreshold: Int) throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: inlineThreshold))
        let value = randomData(count: 4000, seed: 5)
        try cache.store(value, for: "k")
        try cache.store(bytes("other"), for: "other")
        let files = EntryFiles(cache, key: "k")
        let path = inlineThreshold == 0 ? files.body : files.meta
        var raw = try readFile(path)
        // Flip one byte inside the body bytes (for inline bodies: inside the plist's data object).
        let position = inlineThreshold == 0 ? 1234 : raw.count / 2
        raw[position] ^= 0x01
        try writeFile(path, raw)
        #expect(cache.data(for: "k") == nil)
        #expect(cache.statistics.corruptEntriesRemoved == 1)
        #expect(cache.count == 1)
        #expect(!fileExists(files.meta) && !fileExists(files.body))
        #expect(cache.data(for: "other") == bytes("other"))
        // The removal was journaled.
        try cache.close()
        let reopened = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(reopened.count == 1)
    }

    @Test func missingBodyReadsAsMissAndIsRemoved() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 0))
        try cache.store(randomData(count: 100, seed: 1), for: "k")
        try FileManager.default.removeItem(atPath: EntryFiles(cache, key: "k").body)
        #expect(cache.data(for: "k") == nil)
        #expect(cache.statistics.corruptEntriesRemoved == 1)
        #expect(cache.count == 0)
    }

    @Test func truncatedBodyReadsAsMissEvenWithoutChecksums() throws {
        let dir = TemporaryDirectory()
        var configuration = DiskCache.Configuration.testing(inlineThreshold: 0)
        configuration.verifiesChecksums = false
        let cache = try DiskCache(directory: dir.cache, configuration: configuration)
        try cache.store(randomData(count: 100, seed: 1), for: "k")
        let body = EntryFiles(cache, key: "k").body
        try writeFile(body, Array(try readFile(body).prefix(50)))
        #expect(cache.data(for: "k") == nil)
    }

    @Test func garbageMetadataReadsAsMiss() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        try cache.store(bytes("v"), for: "k")
        let meta = EntryFiles(cache, key: "k").meta
        let original = try readFile(meta)
        try writeFile(meta, [UInt8](randomData(count: original.count, seed: 2)))
        #expect(cache.data(for: "k") == nil)
        #expect(cache.statistics.corruptEntriesRemoved == 1)
    }

    /// Files that are internally consistent but are not the version the journal vouches for
    /// (another value for the same key, put in place behind the cache's back) are never served.
    @Test func filesTheIndexDoesNotVouchForAreNotServed() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 0))
        try cache.store(bytes("later"), for: "k")
        let later = EntryFiles(cache, key: "k")
        let laterMeta = try readFile(later.meta)
        let laterBody = try readFile(later.body)
        try cache.store(bytes("committed"), for: "k")
        // Swap in the "later" files: consistent in themselves, but not what the journal says.
        let committed = EntryFiles(cache, key: "k")
        #expect(committed.meta != later.meta)
        try writeFile(committed.meta, laterMeta)
        try writeFile(committed.body, laterBody)
        #expect(cache.data(for: "k") == nil)
    }

    /// A write that died after renaming its files into place but before its journal record
    /// leaves the earlier value readable, and its files are cleaned up at the next open.
    @Test(arguments: [0, 1 << 20])
    func interruptedOverwriteLeavesTheEarlierValue(inlineThreshold: Int) throws {
        let dir = TemporaryDirectory()
        let donor = TemporaryDirectory()
        // The files an overwrite would have renamed into the entry's other slot.
        var newMeta: [UInt8] = []
        var newBody: [UInt8]?
        do {
            let other = try DiskCache(directory: donor.cache, configuration: .testing(inlineThreshold: inlineThreshold))
            try other.store(randomData(count: 3000, seed: 2), for: "k")
            let files = EntryFiles(other, key: "k")
            newMeta = try readFile(files.meta)
            newBody = inlineThreshold == 0 ? try readFile(files.body) : nil
        }
        var slot1: (meta: String, body: String)
        do {
            let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: inlineThreshold))
            try cache.store(randomData(count: 2000, seed: 1), for: "k")
            let hash = cache.configuration.keyHasher.hash("k")
            slot1 = (cache.layout.metaFile(hash, slot: 1), cache.layout.bodyFile(hash, slot: 1))
            try cache.flush()
            // Simulate the crash: no close (no CLOSE record); the unfinished write's files appear.
            cache.maintenance.stop()
            cache.state.withLock { $0.isClosed = true }
            cache.locks.withLock { $0 = [] }
        }
        try writeFile(slot1.meta, newMeta)
        if let newBody { try writeFile(slot1.body, newBody) }
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: inlineThreshold))
        #expect(cache.statistics.recovery.wasUncleanShutdown)
        #expect(cache.data(for: "k") == randomData(count: 2000, seed: 1))
        let deadline = Date().addingTimeInterval(10)
        while fileExists(slot1.meta) && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(!fileExists(slot1.meta) && !fileExists(slot1.body))
        #expect(cache.data(for: "k") == randomData(count: 2000, seed: 1))
    }

    /// With a hasher that sends every key to one hash, the second key's store takes the slot;
    /// reading the first key is a miss (its key is compared), never the second key's bytes.
    @Test func hashCollisionIsAMissNeverWrongData() throws {
        let dir = TemporaryDirectory()
        let constant = KeyHasher { _ in KeyHash(high: 0xABCD_0000_0000_0001, low: 42) }
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(hasher: constant))
        try cache.store(bytes("first"), for: "first")
        try cache.store(bytes("second"), for: "second")
        #expect(cache.data(for: "first") == nil)
        #expect(cache.statistics.hashCollisions == 1)
        #expect(cache.data(for: "second") == bytes("second"))
        #expect(cache.entry(for: "first") == nil)
        // Removing the colliding key leaves the other key's entry alone.
        try cache.removeValue(for: "first")
        #expect(cache.data(for: "second") == bytes("second"))
    }

    @Test func shardThatIsASymbolicLinkIsNeverFollowed() throws {
        let dir = TemporaryDirectory()
        let hasher = KeyHasher { _ in KeyHash(high: 0xAB12_0000_0000_0000, low: 1) }
        try DiskCache(directory: dir.cache, configuration: .testing(hasher: hasher)).close()
        // Every shard exists from the start: replace one with a link to a directory outside.
        let elsewhere = dir.url.appendingPathComponent("elsewhere")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        let shard = dir.cache.appendingPathComponent("ab")
        try FileManager.default.removeItem(at: shard)
        try FileManager.default.createSymbolicLink(at: shard, withDestinationURL: elsewhere)
        try FileManager.default.createDirectory(at: elsewhere.appendingPathComponent("keep"), withIntermediateDirectories: true)
        // The open removes the link (never its target) and makes the shard again.
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(hasher: hasher))
        try cache.store(bytes("v"), for: "k")
        #expect(cache.data(for: "k") == bytes("v"))
        let info = try FileManager.default.attributesOfItem(atPath: shard.path)
        #expect(info[.type] as? FileAttributeType == .typeDirectory)
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path) == ["keep"])
    }
}

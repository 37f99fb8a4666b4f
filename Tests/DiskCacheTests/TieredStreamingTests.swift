@testable import DiskCache
import Foundation
import Testing

/// Large bodies through the two tiers: kept out of memory above the threshold, stored and read
/// without loading them, and never answered from a memory copy the disk has since replaced.
struct TieredStreamingTests {
    func makeCache(_ dir: TemporaryDirectory, memory: Int = 1 << 20) throws -> TieredCache {
        try TieredCache(memoryCapacity: memory, diskCapacity: 1 << 30, directory: dir.cache, configuration: .testing())
    }

    @Test func bodiesAboveTheThresholdStayOutOfMemory() throws {
        let dir = TemporaryDirectory()
        let cache = try makeCache(dir, memory: 1 << 20)
        #expect(cache.largeBodyThreshold == nil)  // 5 % of the memory capacity: 52,428 bytes
        let large = randomData(count: 60_000, seed: 1)
        try cache.store(large, for: "large")
        #expect(cache.currentMemoryUsage == 0)
        #expect(cache.data(for: "large") == large)
        #expect(cache.data(for: "large") == large)
        #expect(cache.statistics.diskHits == 2)  // never promoted
        #expect(cache.currentMemoryUsage == 0)

        try cache.store(randomData(count: 50_000, seed: 2), for: "small")
        #expect(cache.currentMemoryUsage >= 50_000)

        cache.largeBodyThreshold = 100_000
        #expect(cache.data(for: "large") == large)
        #expect(cache.currentMemoryUsage >= 110_000)  // now promoted
    }

    /// A body stored from a file or from chunks replaces what the memory tier held for the key.
    @Test func aStreamedStoreReplacesTheMemoryCopy() async throws {
        let dir = TemporaryDirectory()
        let cache = try makeCache(dir)
        try await cache.store(bytes("old"), for: "k")
        #expect(try await cache.data(for: "k") == bytes("old"))  // from memory

        let body = randomData(count: 2 << 20, seed: 3)
        let source = dir.url.appendingPathComponent("source.bin")
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        try body.write(to: source)
        try await cache.store(contentsOf: source, for: "k", metadata: ["from": "file"])
        #expect(try await cache.data(for: "k") == body)
        #expect(try await cache.record(for: "k")?.metadata == ["from": "file"])

        try await cache.store(bytes("old again"), for: "k")
        let parts = [randomData(count: 1 << 20, seed: 4), randomData(count: 5, seed: 5)]
        try await cache.store(AsyncStream { continuation in
            for part in parts { continuation.yield(part) }
            continuation.finish()
        }, for: "k")
        #expect(try await cache.data(for: "k") == parts.reduce(Data(), +))
    }

    @Test func chunksAndFilesComeFromTheTierThatHasTheRecord() async throws {
        let dir = TemporaryDirectory()
        let cache = try makeCache(dir)
        let onDisk = randomData(count: 300_000, seed: 6)
        try await cache.store(onDisk, for: "disk")
        let inMemory = randomData(count: 1000, seed: 7)
        try await cache.store(inMemory, for: "memory", policy: .allowedInMemoryOnly)

        var received = Data()
        for try await chunk in try #require(try await cache.chunks(for: "disk", chunkSize: 65536)) { received.append(chunk) }
        #expect(received == onDisk)
        received = Data()
        for try await chunk in try #require(try await cache.chunks(for: "memory", chunkSize: 300)) { received.append(chunk) }
        #expect(received == inMemory)
        #expect(try await cache.chunks(for: "absent") == nil)

        let fromDisk = try await cache.withFile(for: "disk") { try Data(contentsOf: $0.url) }
        #expect(fromDisk == onDisk)
        var temporary: URL?
        let fromMemory = try await cache.withFile(for: "memory") { file in
            temporary = file.url
            return try Data(contentsOf: file.url)
        }
        #expect(fromMemory == inMemory)
        #expect(!FileManager.default.fileExists(atPath: try #require(temporary).path))
        #expect(try await cache.withFile(for: "absent") { _ in true } == nil)
    }

    /// Without a disk tier, a file or a sequence is kept in memory, and a file is left where it was.
    @Test func aMemoryOnlyCacheGathersStreamedBodies() async throws {
        let cache = try TieredCache(memoryCapacity: 1 << 20, diskCapacity: 0, directory: nil)
        let dir = TemporaryDirectory()
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let source = dir.url.appendingPathComponent("source.bin")
        let body = randomData(count: 100_000, seed: 8)
        try body.write(to: source)
        try await cache.store(contentsOf: source, for: "k", transfer: .move)
        #expect(FileManager.default.fileExists(atPath: source.path))  // memory may not keep it: never taken
        #expect(try await cache.data(for: "k") == body)
        let size = try await cache.withFile(for: "k") { $0.size }
        #expect(size == Int64(body.count))
    }
}

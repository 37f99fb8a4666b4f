// Hot paths of the store and the memory tier, through the public API only:
//
//   swift package --package-path Benchmarks benchmark
//   swift package --package-path Benchmarks benchmark --filter "get.*"
//
// Every store benchmark uses durability `none` (no fsync), a warm page cache and a fresh
// temporary directory, removed in teardown.

import Benchmark
import DiskCache
import Foundation
import MemoryCache

/// One cache in a temporary directory, opened in setup and removed in teardown.
final class Fixture: @unchecked Sendable {  // unchecked: set up and torn down by the harness, between runs
    let directory: URL
    var cache: DiskCache?
    let configuration: DiskCache.Configuration

    init(_ name: String, configuration: DiskCache.Configuration = Fixture.configuration) {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("diskcache-benchmark-\(name)-\(getpid())")
        self.configuration = configuration
    }

    static var configuration: DiskCache.Configuration {
        DiskCache.Configuration(diskCapacity: 1 << 40, durability: .none, minimumFreeSpace: 0,
                                minimumFreeFraction: 0, sweepInterval: nil)
    }

    func open() throws -> DiskCache {
        let cache = try DiskCache(directory: directory, configuration: configuration)
        self.cache = cache
        return cache
    }

    func fill(_ count: Int, body: Data) throws {
        let cache = try open()
        for i in 0..<count { try cache.store(body, for: key(i)) }
    }

    func close() throws {
        try cache?.close()
        cache = nil
    }

    func remove() throws {
        try close()
        try? FileManager.default.removeItem(at: directory)
    }
}

func key(_ index: Int) -> String { "https://example.com/resource/\(index)" }

func body(_ size: Int) -> Data {
    var generator = SystemRandomNumberGenerator()
    return Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) })
}

let sizes: [(label: String, bytes: Int)] = [("1K", 1 << 10), ("16K", 16 << 10), ("256K", 256 << 10)]

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        warmupIterations: 10,
        maxDuration: .seconds(2),
        maxIterations: 1_000_000
    )

    // MARK: Key hashing

    // XXH3-128 of the key plus one index probe: `contains` reads no file.
    let hashing = Fixture("hash")
    let keys = (0..<4096).map(key)
    Benchmark("key hash + index probe (contains, missing key)", configuration: .init(scalingFactor: .kilo)) { benchmark in
        let cache = hashing.cache!
        for i in benchmark.scaledIterations { blackHole(cache.contains(keys[i & 4095])) }
    } setup: {
        _ = try hashing.open()
    } teardown: {
        try hashing.remove()
    }

    // MARK: Journal append and replay

    // A store of an empty body: the cheapest write there is (one small inline .meta file, a
    // rename and one journal record), so most of what is left is the journal append.
    let append = Fixture("append")
    let empty = Data()
    Benchmark("put 0 B (inline; journal append path)") { benchmark in
        let cache = append.cache!
        for i in benchmark.scaledIterations { try cache.store(empty, for: key(i & 4095)) }
    } setup: {
        _ = try append.open()
    } teardown: {
        try append.remove()
    }

    for count in [10_000, 100_000] {
        let replay = Fixture("replay-\(count)")
        Benchmark("open (journal replay) of \(count) entries",
                  configuration: .init(metrics: [.wallClock, .mallocCountTotal, .peakMemoryResident], maxDuration: .seconds(5),
                                       maxIterations: 20)) { benchmark in
            for _ in benchmark.scaledIterations {
                benchmark.startMeasurement()
                let cache = try DiskCache(directory: replay.directory, configuration: replay.configuration)
                benchmark.stopMeasurement()
                blackHole(cache.count)
                try cache.close()
            }
        } setup: {
            try replay.fill(count, body: empty)
            try replay.close()
        } teardown: {
            try replay.remove()
        }
    }

    // MARK: Put and get

    for (label, bytes) in sizes {
        let data = body(bytes)
        let putFixture = Fixture("put-\(label)")
        Benchmark("put \(label)", configuration: .init(metrics: [.wallClock, .throughput, .mallocCountTotal, .syscalls])) { benchmark in
            let cache = putFixture.cache!
            // Rewrites of 1000 keys: the shard directories exist, as in a cache in use.
            for i in benchmark.scaledIterations { try cache.store(data, for: key(i % 1000)) }
        } setup: {
            try putFixture.fill(1000, body: data)
        } teardown: {
            try putFixture.remove()
        }

        let getFixture = Fixture("get-\(label)")
        Benchmark("get \(label)", configuration: .init(metrics: [.wallClock, .throughput, .mallocCountTotal, .syscalls])) { benchmark in
            let cache = getFixture.cache!
            for i in benchmark.scaledIterations { blackHole(cache.data(for: key(i % 1000))) }
        } setup: {
            try getFixture.fill(1000, body: data)
        } teardown: {
            try getFixture.remove()
        }
    }

    // MARK: Sweep

    // One pass evicting 5,000 of 10,000 entries; the refill between passes is not measured.
    let sweepFixture = Fixture("sweep")
    Benchmark("sweep evicting 5000 of 10000 entries",
              configuration: .init(metrics: [.wallClock, .mallocCountTotal], maxDuration: .seconds(10), maxIterations: 5)) { benchmark in
        for _ in benchmark.scaledIterations {
            let cache = try sweepFixture.open()
            for i in 0..<10_000 { try cache.store(empty, for: key(i)) }
            let target = Double(cache.totalSize) / 2 / cache.configuration.lowWatermark
            benchmark.startMeasurement()
            cache.diskCapacity = Int64(target)
            cache.sweep()
            benchmark.stopMeasurement()
            try cache.removeAll()
            try sweepFixture.close()
        }
    } teardown: {
        try sweepFixture.remove()
    }

    // MARK: Memory tier

    let memory = MemoryCache<Int, Int>(countLimit: 20_000)
    for i in 0..<10_000 { memory.store(i, for: i) }
    Benchmark("memory cache hit (Int keys, 10000 entries)", configuration: .init(scalingFactor: .mega)) { benchmark in
        for i in benchmark.scaledIterations { blackHole(memory.value(for: i % 10_000)) }
    }
}

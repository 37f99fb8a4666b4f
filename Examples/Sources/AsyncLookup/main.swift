// Server-side lookups from many concurrent request handlers, with the async API.
//
// Every async call (`data(for:)`, `store(_:for:)`, `makeWriter(for:)`, `append`, `commit`, ...)
// does its disk I/O on the cache's own threads (a small pool shared by every cache of the
// process), never on Swift's cooperative pool: a task waiting for the disk leaves the pool's
// few threads free to run the other handlers. The synchronous forms of the same calls block
// the calling thread, so they belong in threads of your own, not in tasks.
import DiskCache
import Foundation

/// Stands in for the expensive work a miss costs (a database query, a rendered page...).
func computeProduct(id: Int) async throws -> Data {
    try await Task.sleep(for: .milliseconds(20))
    return Data(#"{"id":\#(id),"name":"Product \#(id)","price":\#(id * 100 + 99)}"#.utf8)
}

/// One request handler: look the key up, and on a miss compute the value and store it.
/// Returns whether it was a hit.
func handleRequest(productID: Int, cache: DiskCache) async throws -> Bool {
    let key = "products/\(productID)"
    if try await cache.data(for: key) != nil {
        return true
    }
    let body = try await computeProduct(id: productID)
    try await cache.store(body, for: key, expires: Date().addingTimeInterval(300))
    return false
}

/// A wave of `requests` concurrent handlers over `distinctKeys` products, one request arriving
/// every `spacing` (all at once when it is zero). Returns how many hit and how many missed.
func runWave(requests: Int, distinctKeys: Int, spacing: Duration, cache: DiskCache) async throws -> (hits: Int, misses: Int) {
    try await withThrowingTaskGroup(of: Bool.self) { group in
        for request in 0..<requests {
            group.addTask {
                try await Task.sleep(for: spacing * request)   // the request's arrival time
                return try await handleRequest(productID: request % distinctKeys, cache: cache)
            }
        }
        var hits = 0, misses = 0
        for try await wasHit in group {
            if wasHit { hits += 1 } else { misses += 1 }
        }
        return (hits, misses)
    }
}

func runExample() async throws {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("AsyncLookup-\(UUID().uuidString)", isDirectory: true)
    defer {
        try? FileManager.default.removeItem(at: directory)
        print("Removed \(directory.lastPathComponent)")
    }
    let cache = try DiskCache(directory: directory, configuration: .init(durability: .none))

    // First wave on a cold cache, one request a millisecond: each of the 20 keys misses at least
    // once, and later requests for it hit. A request that arrives while the value is still being
    // computed misses too and computes it again (the cache does not merge concurrent misses; the
    // last store wins, and a reader sees one whole value or the other, never a mix).
    let clock = ContinuousClock()
    var start = clock.now
    let cold = try await runWave(requests: 200, distinctKeys: 20, spacing: .milliseconds(1), cache: cache)
    print("Cold wave: 200 requests, \(cold.hits) hits, \(cold.misses) misses, in \(clock.now - start)")

    // Second wave, all 200 at once: every key is cached now, so every request is a hit.
    start = clock.now
    let warm = try await runWave(requests: 200, distinctKeys: 20, spacing: .zero, cache: cache)
    print("Warm wave: 200 requests, \(warm.hits) hits, \(warm.misses) misses, in \(clock.now - start)")
    print("Cache holds \(cache.count) entries; statistics: \(cache.statistics.hits) hits, "
        + "\(cache.statistics.misses) misses, \(cache.statistics.writes) writes")

    // A value built piece by piece: a Writer streams appends to a file of its own, and readers keep
    // seeing the earlier value (here: none) until `commit()` replaces it at once.
    let writer = try await cache.makeWriter(for: "reports/daily.csv", metadata: ["content-type": "text/csv"])
    try await writer.append(Data("product,price\n".utf8))
    for id in 0..<1000 {
        try await writer.append(Data("Product \(id),\(id * 100 + 99)\n".utf8))
    }
    let before = try await cache.data(for: "reports/daily.csv")
    print("Writer: \(writer.size) bytes appended; before commit a reader gets \(before.map { "\($0.count) bytes" } ?? "nil")")
    try await writer.commit()
    if let report = try await cache.dataAndEntry(for: "reports/daily.csv") {
        let firstLines = String(decoding: report.data, as: UTF8.self).split(separator: "\n").prefix(2)
        print("After commit: \(report.data.count) bytes, \(report.entry.metadata["content-type"] ?? "?"), "
            + "starting \(firstLines.joined(separator: " | "))")
    }

    try await cache.close()
}

// The example runs in an async function: in main.swift's top-level code Swift would resolve
// these calls to the synchronous overloads (it only warns that nothing is awaited).
try await runExample()

#if AsyncHTTPClient
import AsyncHTTPClient
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCache
import HTTPCacheAsyncHTTPClient
import HTTPTestOrigin
import NIOCore
import Testing
import TestSupport

/// `CachingHTTPClient` over `AsyncHTTPClientTransport`, against origins on loopback.
@Suite struct AsyncHTTPClientTransportTests {
    /// A directory for one test's cache, removed when `body` returns or throws.
    func withCache<T>(diskCapacity: Int = 64 << 20, _ body: (HTTPURLCache, URL) async throws -> T) async throws -> T {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("HTTPCacheAsyncHTTPClientTests-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let cacheDirectory = directory.appendingPathComponent("cache", isDirectory: true)
        let cache = try HTTPURLCache(memoryCapacity: 1 << 20, diskCapacity: diskCapacity, directory: cacheDirectory)
        return try await body(cache, cacheDirectory)
    }

    /// The files in the cache's `tmp/`.
    func temporaryFiles(_ cacheDirectory: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: cacheDirectory.appendingPathComponent("tmp").path)
    }

    /// Waits until `condition` holds, checking it at most `attempts` times 10 ms apart; whether it
    /// did. A count, not a deadline: while the test process's threads are all busy with other
    /// tests (two of them on two cores), this task is not run and spends no attempt, where a
    /// deadline would pass with nothing done.
    func eventually(attempts: Int = 6_000, _ condition: () throws -> Bool) async throws -> Bool {
        for _ in 0..<attempts {
            if try condition() { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return try condition()
    }

    @Test func aResponseIsServedThenAnsweredFromTheCache() async throws {
        let origin = try await OriginServer()
        defer { Task { try? await origin.stop() } }
        origin.respond { _ in ScriptedResponse([("Cache-Control", "max-age=600"), ("Content-Type", "text/plain")], body: "hello") }
        try await withCache { cache, _ in
            let client = CachingHTTPClient(cache: cache, transport: AsyncHTTPClientTransport())
            let request = URLRequest(url: origin.url("/greeting"))
            let first = try await client.response(for: request)
            #expect(first.source == .network)
            #expect(String(decoding: first.data, as: UTF8.self) == "hello")
            #expect(first.response.value(forHTTPHeaderField: "Content-Type") == "text/plain")
            let second = try await client.response(for: request)
            #expect(second.source == .cache)
            #expect(String(decoding: second.data, as: UTF8.self) == "hello")
            #expect(origin.requestCount == 1)
        }
    }

    @Test func aConditionalRequestAnswered304ServesTheStoredBody() async throws {
        let origin = try await OriginServer()
        defer { Task { try? await origin.stop() } }
        // Larger than the client holds in memory: the stored body is held as a file.
        let body = String(repeating: "0123456789abcdef", count: 128 << 10)
        origin.respond { request in
            if request.header("If-None-Match") == "\"v1\"" {
                return ScriptedResponse(status: 304, [("ETag", "\"v1\""), ("Cache-Control", "max-age=0")])
            }
            return ScriptedResponse([("ETag", "\"v1\""), ("Cache-Control", "max-age=0")], body: body)
        }
        try await withCache { cache, _ in
            let client = CachingHTTPClient(cache: cache, transport: AsyncHTTPClientTransport())
            let request = URLRequest(url: origin.url("/validated"))
            #expect(try await client.download(for: request).source == .network)
            let revalidated = try await client.download(for: request)
            #expect(revalidated.source == .revalidated)
            var received = Data()
            for try await chunk in revalidated.body { received.append(chunk) }
            #expect(received == Data(body.utf8))
            #expect(origin.requests.map { $0.header("If-None-Match") } == [nil, "\"v1\""])
        }
    }

    @Test func anErrorFromTheOriginReachesTheCaller() async throws {
        let origin = try await OriginServer()
        origin.respond { _ in ScriptedResponse(status: 503, body: "busy") }
        try await withCache { cache, _ in
            // AsyncHTTPClient keeps trying to connect until the deadline: a short one.
            let client = CachingHTTPClient(cache: cache, transport: AsyncHTTPClientTransport(timeout: .seconds(5)))
            let request = URLRequest(url: origin.url("/busy"))
            // An error response is passed on as it is, and not stored.
            let busy = try await client.response(for: request)
            #expect(busy.response.statusCode == 503)
            #expect(String(decoding: busy.data, as: UTF8.self) == "busy")
            // No origin at all: AsyncHTTPClient's error.
            try await origin.stop()
            await #expect(throws: (any Error).self) {
                _ = try await client.download(for: request)
            }
            #expect(cache.storedResponse(for: request) == nil)
        }
    }

    @Test func cancellingMidBodyStoresNothingAndLeavesNoFile() async throws {
        let origin = try await StreamingOrigin()
        defer { Task { try? await origin.stop() } }
        try await withCache(diskCapacity: 2 << 30) { cache, cacheDirectory in
            let client = CachingHTTPClient(cache: cache, transport: AsyncHTTPClientTransport())
            let request = URLRequest(url: URL(string: "http://127.0.0.1:\(origin.port)/bytes/\(1 << 30)")!)
            let download = Task { try await client.download(for: request) }
            // Mid-body: the file the body goes to has appeared in tmp/.
            let started = try await eventually { try !temporaryFiles(cacheDirectory).isEmpty }
            #expect(started)
            download.cancel()
            await #expect(throws: CancellationError.self) {
                _ = try await download.value
            }
            // The fetch ends on its own task once cancelled; then its file is gone.
            let removed = try await eventually { try temporaryFiles(cacheDirectory).isEmpty }
            #expect(removed)
            #expect(cache.storedResponse(for: request) == nil)
        }
    }

    /// 1 GiB fetched through the caching client, then served from its cache, each reading every
    /// byte: the peak resident memory of the process doing it grows by under 64 MiB each time.
    /// Measured in a child process (`DiskCacheTestWorker download`): this process runs other
    /// tests meanwhile, whose memory its own peak would count.
    @Test func aGibibyteIsFetchedAndServedFromTheCacheInBoundedMemory() async throws {
        let origin = try await StreamingOrigin()
        defer { Task { try? await origin.stop() } }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("HTTPCacheAsyncHTTPClientTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let lines = try await runWorker(["download", directory.path, "http://127.0.0.1:\(origin.port)", "\(1 << 30)"])
        #expect(lines.filter { $0.hasPrefix("SOURCE ") } == ["SOURCE fetch network SAME", "SOURCE cached cache SAME"], "\(lines)")
        let phases = lines.filter { $0.hasPrefix("PHASE ") }.map { $0.split(separator: " ") }
        #expect(phases.map { String($0[1]) } == ["fetch", "cached"], "\(lines)")
        for phase in phases {
            let growth = Int(phase[3]) ?? .max
            #expect(growth < 64 << 20, "\(phase[1]): resident memory grew by \(growth >> 20) MiB")
            print("1 GiB through the caching client, \(phase[1]): the peak resident memory grew by \(growth >> 10) KiB")
        }
        let tmp = directory.appendingPathComponent("cache/tmp").path
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp).isEmpty)
    }
}
#endif

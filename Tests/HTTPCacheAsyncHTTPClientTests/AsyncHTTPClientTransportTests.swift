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

/// `CachingHTTPClient` over `AsyncHTTPClientTransport`, against origins on loopback. Serialized:
/// one test measures the process's memory, which the others must not grow meanwhile.
@Suite(.serialized) struct AsyncHTTPClientTransportTests {
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

    /// Waits until `condition` holds, checking every 10 ms for at most `seconds`; whether it did.
    func eventually(within seconds: Double = 60, _ condition: () throws -> Bool) async throws -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if try condition() { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return try condition()
    }

    /// Whether `body` holds exactly `size` bytes of `StreamingOrigin`'s pattern, compared one
    /// chunk at a time (no more than a chunk in memory).
    func isOriginPattern(_ body: HTTPBodyStream, size: Int) async throws -> Bool {
        var offset = 0
        for try await chunk in body {
            var start = 0
            while start < chunk.count {
                let count = min(1 << 20, chunk.count - start)
                let expected = StreamingOrigin.bytes(at: offset + start, count: count)
                let same = chunk.withUnsafeBytes { actual in
                    expected.withUnsafeBytes { memcmp(actual.baseAddress! + start, $0.baseAddress!, count) == 0 }
                }
                guard same else { return false }
                start += count
            }
            offset += chunk.count
        }
        return offset == size
    }

    /// A field of /proc/self/status in bytes (`VmRSS`, `VmHWM`).
    func memoryStatus(_ field: String) throws -> Int {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix(field + ":") })
        let kibibytes = try #require(Int(line.split(separator: " ").dropFirst().first ?? ""))
        return kibibytes << 10
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

    @Test func aGibibyteIsFetchedAndServedFromTheCacheInBoundedMemory() async throws {
        let origin = try await StreamingOrigin()
        defer { Task { try? await origin.stop() } }
        let size = 1 << 30
        try await withCache(diskCapacity: 2 << 30) { cache, cacheDirectory in
            let client = CachingHTTPClient(cache: cache, transport: AsyncHTTPClientTransport())
            let request = URLRequest(url: URL(string: "http://127.0.0.1:\(origin.port)/bytes/\(size)")!)
            // Warm up (AsyncHTTPClient's event loops and connection pool), then take the
            // resident size as the peak from here on (writing 5 to clear_refs resets VmHWM).
            let small = URLRequest(url: URL(string: "http://127.0.0.1:\(origin.port)/bytes/1000")!)
            #expect(try await isOriginPattern(client.download(for: small).body, size: 1000))
            try "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
            let baseline = try memoryStatus("VmRSS")

            let fetched = try await client.download(for: request)
            #expect(fetched.source == .network)
            #expect(try await isOriginPattern(fetched.body, size: size))
            let served = try await client.download(for: request)
            #expect(served.source == .cache)
            #expect(try await isOriginPattern(served.body, size: size))

            let growth = try memoryStatus("VmHWM") - baseline
            #expect(growth < 64 << 20, "resident memory grew by \(growth >> 20) MiB")
            print("1 GiB through the caching client: peak resident memory grew by \(growth >> 20) MiB")
            #expect(client.statistics.networkCount == 2)
            #expect(try temporaryFiles(cacheDirectory).isEmpty)
        }
    }
}
#endif

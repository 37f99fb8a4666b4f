import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import DiskCache
import DiskCacheLocking
import HTTPTestOrigin
import Testing
@testable import HTTPCache

/// `HTTPURLCache`'s async calls do what the synchronous ones do, and one cancelled before its
/// I/O starts stores nothing.
struct AsyncURLCacheTests {
    private let url = URL(string: "https://example.com/async")!

    private func response(_ body: String) -> CachedURLResponse {
        let http = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                                   headerFields: ["Cache-Control": "max-age=3600"])!
        return CachedURLResponse(response: http, data: Data(body.utf8))
    }

    @Test func theAsyncCallsDoWhatTheSynchronousOnesDo() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = try HTTPURLCache(directory: directory.cacheDirectory)
        let request = URLRequest(url: url)
        try await cache.async.storeCachedResponse(response("one"), for: request)
        #expect(try await cache.async.cachedResponse(for: request)?.data == Data("one".utf8))
        #expect(try await cache.async.storedResponse(for: request)?.body == Data("one".utf8))
        try await cache.async.removeCachedResponse(for: request)
        #expect(try await cache.async.cachedResponse(for: request) == nil)

        try await cache.async.storeCachedResponse(response("two"), for: request)
        try await cache.async.removeCachedResponses(since: Date().addingTimeInterval(-60))
        #expect(try await cache.async.cachedResponse(for: request) == nil)
        try await cache.async.storeCachedResponse(response("three"), for: request)
        try await cache.async.removeAllCachedResponses()
        #expect(try await cache.async.storedResponse(for: request) == nil)
    }

    /// The client reads the cache on the I/O threads too: with every one of them held, even an
    /// answer from a fresh stored response waits, and comes once they are released.
    @Test func theClientReadsTheCacheOnTheIOThreads() async throws {
        let fixture = try await ClientFixture()
        fixture.server.respond { _ in ScriptedResponse([("Cache-Control", "max-age=3600")], body: "stored") }
        _ = try await fixture.get("/fresh")
        let answered = PthreadMutex(false)
        var call: Task<CachingHTTPClient.Response, any Error>?
        let answeredWhileHeld = try await BlockingIOPool.shared.holdingEveryThread {
            call = Task {
                let response = try await fixture.get("/fresh")
                answered.withLock { $0 = true }
                return response
            }
            try await Task.sleep(for: .milliseconds(100))
            return answered.withLock { $0 }
        }
        #expect(!answeredWhileHeld)
        let response = try await #require(call).value
        #expect(response.source == .cache)
        #expect(response.text == "stored")
        await fixture.finish()
    }

    @Test func aStoreCancelledBeforeItStartsStoresNothing() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = try HTTPURLCache(directory: directory.cacheDirectory)
        let request = URLRequest(url: url)
        let stored = response("never")
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await cache.async.storeCachedResponse(stored, for: request)
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(try await cache.async.storedResponse(for: request) == nil)
    }
}

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
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
        try await cache.storeCachedResponse(response("one"), for: request)
        #expect(try await cache.cachedResponse(for: request)?.data == Data("one".utf8))
        #expect(try await cache.storedResponse(for: request)?.body == Data("one".utf8))
        try await cache.removeCachedResponse(for: request)
        #expect(try await cache.cachedResponse(for: request) == nil)

        try await cache.storeCachedResponse(response("two"), for: request)
        try await cache.removeCachedResponses(since: Date().addingTimeInterval(-60))
        #expect(try await cache.cachedResponse(for: request) == nil)
        try await cache.storeCachedResponse(response("three"), for: request)
        try await cache.removeAllCachedResponses()
        #expect(try await cache.storedResponse(for: request) == nil)
    }

    @Test func aStoreCancelledBeforeItStartsStoresNothing() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = try HTTPURLCache(directory: directory.cacheDirectory)
        let request = URLRequest(url: url)
        let stored = response("never")
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await cache.storeCachedResponse(stored, for: request)
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(try await cache.storedResponse(for: request) == nil)
    }
}

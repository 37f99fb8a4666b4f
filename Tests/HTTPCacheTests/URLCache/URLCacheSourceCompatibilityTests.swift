import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCache
import HTTPTestOrigin
import Testing

/// Code written against `URLCache` compiles unchanged with an `HTTPURLCache`, in a synchronous
/// function and in an `async` one (where an `async` overload of the same name would be chosen
/// instead, and ask for `try await`): the two bodies below are the same lines, every member of
/// `URLCache` called once, and must stay the same lines. Run, they do what `URLCache` does.
struct URLCacheSourceCompatibilityTests {
    private static let url = URL(string: "https://example.com/compatible")!

    private static func response(_ body: String) -> CachedURLResponse {
        let http = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                                   headerFields: ["Cache-Control": "max-age=3600"])!
        return CachedURLResponse(response: http, data: Data(body.utf8))
    }

    /// What the calls saw, to check after either body ran.
    struct Seen: Equatable {
        var stored: Data?
        var afterRemove: Data?
        var afterRemoveSince: Data?
        var afterRemoveAll: Data?
        var capacities: [Int]
    }

    private static func synchronousCaller(_ cache: HTTPURLCache, _ task: URLSessionDataTask) -> Seen {
        let request = URLRequest(url: url)
        cache.storeCachedResponse(response("one"), for: request)
        let stored = cache.cachedResponse(for: request)?.data
        cache.removeCachedResponse(for: request)
        let afterRemove = cache.cachedResponse(for: request)?.data
        cache.storeCachedResponse(response("two"), for: request)
        cache.removeCachedResponses(since: Date().addingTimeInterval(-60))
        let afterRemoveSince = cache.cachedResponse(for: request)?.data
        cache.storeCachedResponse(response("three"), for: task)
        cache.getCachedResponse(for: task) { _ in }
        cache.removeCachedResponse(for: task)
        cache.removeAllCachedResponses()
        let afterRemoveAll = cache.cachedResponse(for: request)?.data
        cache.memoryCapacity = 1 << 20
        cache.diskCapacity = 1 << 26
        return Seen(stored: stored, afterRemove: afterRemove, afterRemoveSince: afterRemoveSince, afterRemoveAll: afterRemoveAll,
                    capacities: [cache.memoryCapacity, cache.diskCapacity, cache.currentMemoryUsage >= 0 ? 1 : 0, cache.currentDiskUsage >= 0 ? 1 : 0])
    }

    private static func asynchronousCaller(_ cache: HTTPURLCache, _ task: URLSessionDataTask) async -> Seen {
        let request = URLRequest(url: url)
        cache.storeCachedResponse(response("one"), for: request)
        let stored = cache.cachedResponse(for: request)?.data
        cache.removeCachedResponse(for: request)
        let afterRemove = cache.cachedResponse(for: request)?.data
        cache.storeCachedResponse(response("two"), for: request)
        cache.removeCachedResponses(since: Date().addingTimeInterval(-60))
        let afterRemoveSince = cache.cachedResponse(for: request)?.data
        cache.storeCachedResponse(response("three"), for: task)
        cache.getCachedResponse(for: task) { _ in }
        cache.removeCachedResponse(for: task)
        cache.removeAllCachedResponses()
        let afterRemoveAll = cache.cachedResponse(for: request)?.data
        cache.memoryCapacity = 1 << 20
        cache.diskCapacity = 1 << 26
        return Seen(stored: stored, afterRemove: afterRemove, afterRemoveSince: afterRemoveSince, afterRemoveAll: afterRemoveAll,
                    capacities: [cache.memoryCapacity, cache.diskCapacity, cache.currentMemoryUsage >= 0 ? 1 : 0, cache.currentDiskUsage >= 0 ? 1 : 0])
    }

    @Test func urlCacheCodeCompilesAndBehavesTheSameInSyncAndAsyncFunctions() async throws {
        let expected = Seen(stored: Data("one".utf8), afterRemove: nil, afterRemoveSince: nil, afterRemoveAll: nil,
                            capacities: [1 << 20, 1 << 26, 1, 1])
        for isAsync in [false, true] {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let cache = try HTTPURLCache(directory: directory.cacheDirectory)
            let task = URLSession(configuration: .ephemeral).dataTask(with: Self.url)
            let seen = isAsync ? await Self.asynchronousCaller(cache, task) : Self.synchronousCaller(cache, task)
            #expect(seen == expected, "async: \(isAsync)")
        }
    }
}

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCache
import TestSupport

struct HTTPURLCacheTests {
    private let url = URL(string: "https://example.com/items?page=2#top")!

    private func cachedResponse(body: String = "payload", headers: [String: String] = ["Content-Type": "application/json; charset=utf-8"],
                                storagePolicy: URLCache.StoragePolicy = .allowed) -> CachedURLResponse {
        let response = HTTPURLResponse(url: url, statusCode: 203, httpVersion: "HTTP/1.1", headerFields: headers)!
        return CachedURLResponse(response: response, data: Data(body.utf8), userInfo: ["note": "kept", "count": 3], storagePolicy: storagePolicy)
    }

    @Test func aStoredResponseSurvivesReopeningWithEverythingItHad() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        do {
            let cache = try HTTPURLCache(directory: directory.cacheDirectory)
            cache.storeCachedResponse(cachedResponse(), for: URLRequest(url: url))
        }
        let reopened = try HTTPURLCache(directory: directory.cacheDirectory)
        // The fragment is not part of the key.
        let found = try #require(reopened.cachedResponse(for: URLRequest(url: URL(string: "https://example.com/items?page=2")!)))
        let http = try #require(found.response as? HTTPURLResponse)

        #expect(String(decoding: found.data, as: UTF8.self) == "payload")
        #expect(http.statusCode == 203)
        #expect(http.url == url)
        #expect(http.mimeType == "application/json")
        #expect(http.textEncodingName == "utf-8")
        #expect(found.storagePolicy == .allowed)
        #expect(found.userInfo?["note"] as? String == "kept")
        #expect((found.userInfo?["count"] as? NSNumber)?.intValue == 3)
        #expect(reopened.cachedResponse(for: URLRequest(url: URL(string: "https://example.com/items?page=3")!)) == nil)
    }

    @Test func memoryOnlyResponsesAreGoneAfterReopening() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        do {
            let cache = try HTTPURLCache(directory: directory.cacheDirectory)
            cache.storeCachedResponse(cachedResponse(storagePolicy: .allowedInMemoryOnly), for: URLRequest(url: url))
            #expect(cache.cachedResponse(for: URLRequest(url: url))?.storagePolicy == .allowedInMemoryOnly)
        }
        let reopened = try HTTPURLCache(directory: directory.cacheDirectory)
        #expect(reopened.cachedResponse(for: URLRequest(url: url)) == nil)
    }

    @Test func notAllowedResponsesAreNotStored() throws {
        let cache = try HTTPURLCache(directory: nil)
        cache.storeCachedResponse(cachedResponse(storagePolicy: .notAllowed), for: URLRequest(url: url))
        #expect(cache.cachedResponse(for: URLRequest(url: url)) == nil)
    }

    @Test func removalsCapacitiesAndUsage() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // Stamps go by the millisecond: the clock moves by hand between `other` and the cut.
        let clock = ManualClock.startingNow()
        let cache = HTTPURLCache(store: try HTTPResponseStore(memoryCapacity: 1 << 20, diskCapacity: 4 << 20,
                                                              directory: directory.cacheDirectory, diskConfiguration: clock.configuration))
        let other = URLRequest(url: URL(string: "https://example.com/other")!)
        #expect(cache.memoryCapacity == 1 << 20)
        #expect(cache.diskCapacity == 4 << 20)
        #expect(cache.currentMemoryUsage == 0)

        cache.storeCachedResponse(cachedResponse(), for: URLRequest(url: url))
        cache.storeCachedResponse(cachedResponse(body: "other"), for: other)
        #expect(cache.currentMemoryUsage > 0)
        #expect(cache.currentDiskUsage > 0)

        cache.removeCachedResponse(for: URLRequest(url: url))
        #expect(cache.cachedResponse(for: URLRequest(url: url)) == nil)
        #expect(cache.cachedResponse(for: other) != nil)

        clock.advance(milliseconds: 10)
        let before = clock.date
        clock.advance(milliseconds: 10)
        cache.storeCachedResponse(cachedResponse(body: "late"), for: URLRequest(url: url))
        cache.removeCachedResponses(since: before)
        #expect(cache.cachedResponse(for: URLRequest(url: url)) == nil)
        #expect(cache.cachedResponse(for: other) != nil)

        cache.removeAllCachedResponses()
        #expect(cache.cachedResponse(for: other) == nil)

        cache.memoryCapacity = 0
        #expect(cache.memoryCapacity == 0)
        cache.storeCachedResponse(cachedResponse(), for: URLRequest(url: url))
        #expect(cache.currentMemoryUsage == 0)
        #expect(cache.cachedResponse(for: URLRequest(url: url)) != nil)
    }

    @Test func varyNominatedRequestFieldsSelectTheStoredVariant() throws {
        let cache = try HTTPURLCache(directory: nil)
        func request(_ language: String) -> URLRequest {
            var request = URLRequest(url: url)
            request.setValue(language, forHTTPHeaderField: "Accept-Language")
            return request
        }
        for language in ["en", "fr"] {
            cache.storeCachedResponse(cachedResponse(body: language, headers: ["Vary": "Accept-Language"]), for: request(language))
        }
        #expect(cache.cachedResponse(for: request("en")).map { String(decoding: $0.data, as: UTF8.self) } == "en")
        #expect(cache.cachedResponse(for: request("fr")).map { String(decoding: $0.data, as: UTF8.self) } == "fr")
        #expect(cache.cachedResponse(for: request("de")) == nil)
    }

    @Test func aPlainURLResponseKeepsItsMIMETypeAndEncoding() throws {
        let cache = try HTTPURLCache(directory: nil)
        let fileURL = URL(string: "custom://host/resource")!
        let response = URLResponse(url: fileURL, mimeType: "text/plain", expectedContentLength: 2, textEncodingName: "utf-16")
        cache.storeCachedResponse(CachedURLResponse(response: response, data: Data("hi".utf8)), for: URLRequest(url: fileURL))

        let found = try #require(cache.cachedResponse(for: URLRequest(url: fileURL)))
        #expect(!(found.response is HTTPURLResponse))
        #expect(found.response.mimeType == "text/plain")
        #expect(found.response.textEncodingName == "utf-16")
        #expect(found.data == Data("hi".utf8))
    }
}

import DiskCache
import Foundation
import HTTPTypes
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTestOrigin
import Testing
@testable import HTTPCache
import TestSupport

/// Each stored response (method, `Vary` values) is a record of its own: selection is by method
/// and `Vary`, and removal by date, by URL, by capacity and by reset work one variant at a time.
struct VariantRecordTests {
    private let url = URL(string: "https://example.com/page")!

    private func request(_ method: String = "GET", language: String? = nil) -> URLRequest {
        var request = URLRequest(url: url)
        request.httpMethod = method
        if let language { request.setValue(language, forHTTPHeaderField: "Accept-Language") }
        return request
    }

    private func response(_ body: String, vary: Bool = false) -> CachedURLResponse {
        let headers = vary ? ["Vary": "Accept-Language", "Cache-Control": "max-age=3600"] : ["Cache-Control": "max-age=3600"]
        let http = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: headers)!
        return CachedURLResponse(response: http, data: Data(body.utf8))
    }

    private func body(_ cached: CachedURLResponse?) -> String? {
        cached.map { String(decoding: $0.data, as: UTF8.self) }
    }

    /// Records on disk, and how many of them a lookup reaches.
    private func diskRecords(_ cache: HTTPURLCache) -> Int { cache.responses.records.disk?.count ?? 0 }

    // MARK: - Methods

    @Test func aHEADResponseStoredForAURLNeverAnswersAGET() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = try HTTPURLCache(directory: directory.cacheDirectory)
        cache.storeCachedResponse(response("the body"), for: request("GET"))
        cache.storeCachedResponse(response(""), for: request("HEAD"))

        #expect(body(cache.cachedResponse(for: request("GET"))) == "the body")
        #expect(cache.storedResponse(for: request("GET"))?.response.requestMethod == "GET")
        // A HEAD is answered by the most recent of the two: the HEAD response.
        #expect(cache.storedResponse(for: request("HEAD"))?.response.requestMethod == "HEAD")
        #expect(diskRecords(cache) == 2)

        // Only a HEAD stored: a GET finds nothing.
        cache.removeCachedResponse(for: request("GET"))
        cache.storeCachedResponse(response(""), for: request("HEAD"))
        #expect(cache.cachedResponse(for: request("GET")) == nil)
        #expect(cache.cachedResponse(for: request("HEAD")) != nil)
    }

    @Test func aHEADFetchedThroughTheClientKeepsTheStoredGETAndItsBody() async throws {
        let fixture = try await ClientFixture()
        fixture.server.respond { _ in ScriptedResponse([("Cache-Control", "max-age=3600"), ("ETag", "\"v1\"")], body: "full body") }
        _ = try await fixture.get("/r")
        let head = try await fixture.client.response(for: fixture.request("/r", method: "HEAD", policy: .reloadIgnoringLocalCacheData))
        #expect(head.source == .network)
        #expect(fixture.server.requests.map(\.method) == ["GET", "HEAD"])

        #expect(body(try await fixture.cache.async.cachedResponse(for: fixture.request("/r"))) == "full body")
        var elements: [CachingHTTPClient.Response] = []
        for try await element in fixture.client.responses(for: fixture.request("/r")) { elements.append(element) }
        #expect(elements.map(\.text) == ["full body", "full body"])
        #expect(elements.first?.source == .cache)
        await fixture.finish()
    }

    @Test func aHEADWithMatchingValidatorsFreshensTheStoredGETAndOneWithOthersRemovesIt() async throws {
        let fixture = try await ClientFixture()
        fixture.server.respond { request in
            // Every HEAD names the GET body's length (7) unless said otherwise.
            switch (request.method, request.path) {
            case ("GET", _):
                ScriptedResponse([("Cache-Control", "max-age=3600"), ("ETag", "\"v1\""), ("X-Version", "1")], body: "body v1")
            case (_, "/same"):
                ScriptedResponse([("Cache-Control", "max-age=3600"), ("ETag", "\"v1\""), ("X-Version", "2"), ("Content-Length", "7")])
            case (_, "/no-validator"):
                ScriptedResponse([("Cache-Control", "max-age=3600"), ("X-Version", "2"), ("Content-Length", "7")])
            case (_, "/other-length"):
                ScriptedResponse([("Cache-Control", "max-age=3600"), ("ETag", "\"v1\""), ("X-Version", "2"), ("Content-Length", "8")])
            default:
                ScriptedResponse([("Cache-Control", "max-age=3600"), ("ETag", "\"v2\""), ("X-Version", "2"), ("Content-Length", "7")])
            }
        }
        for path in ["/same", "/changed", "/no-validator", "/other-length"] {
            _ = try await fixture.get(path)
            _ = try await fixture.client.response(for: fixture.request(path, method: "HEAD", policy: .reloadIgnoringLocalCacheData))
        }

        let freshened = try #require(fixture.cache.storedResponse(for: fixture.request("/same")))
        #expect(freshened.response.headers["X-Version"] == "2")
        #expect(String(decoding: freshened.body, as: UTF8.self) == "body v1")
        // No validator to compare and the same length: freshened too (RFC 9111 §4.3.5 compares
        // the validators the HEAD has).
        #expect(try await fixture.cache.async.storedResponse(for: fixture.request("/no-validator"))?.response.headers["X-Version"] == "2")
        // Another ETag, or another length: the stored GET response is removed.
        #expect(try await fixture.cache.async.cachedResponse(for: fixture.request("/changed")) == nil)
        #expect(try await fixture.cache.async.cachedResponse(for: fixture.request("/other-length")) == nil)
        #expect(try await fixture.cache.async.storedResponse(for: fixture.request("/changed", method: "HEAD"))?.response.requestMethod == "HEAD")
        await fixture.finish()
    }

    // MARK: - Refreshing a response that was replaced meanwhile

    /// A 304 answers for the response that was validated. When another fetch stored a new
    /// response for the same variant while the conditional request was out, the 304's header
    /// fields (here the old `ETag`) must not be put on the new body: the new response stays whole.
    @Test func a304ForAResponseReplacedMeanwhileLeavesTheNewResponseWhole() async throws {
        let fixture = try await ClientFixture()
        let cache = fixture.cache
        let resource = fixture.request("/r")
        fixture.server.respond { request in
            guard request.header("If-None-Match") == "\"v1\"" else {
                return ScriptedResponse([("Cache-Control", "max-age=0"), ("ETag", "\"v1\"")], body: "body v1")
            }
            // Another fetch stores version 2 while this revalidation is at the origin.
            let http = HTTPURLResponse(url: resource.url!, statusCode: 200, httpVersion: "HTTP/1.1",
                                       headerFields: ["Cache-Control": "max-age=3600", "ETag": "\"v2\""])!
            cache.storeCachedResponse(CachedURLResponse(response: http, data: Data("body v2".utf8)), for: resource)
            return ScriptedResponse(status: 304, [("ETag", "\"v1\""), ("Cache-Control", "max-age=60")])
        }
        _ = try await fixture.get("/r")                        // version 1, stale at once
        let revalidated = try await fixture.get("/r")          // If-None-Match: "v1", then 304
        #expect(revalidated.text == "body v1")                 // this request's answer: the validated one
        #expect(fixture.server.requests.map { $0.header("If-None-Match") } == [nil, "\"v1\""])

        let stored = try #require(cache.storedResponse(for: resource))
        #expect(String(decoding: stored.body, as: UTF8.self) == "body v2")
        #expect(stored.response.headers["ETag"] == "\"v2\"")
        #expect(stored.response.headers["Cache-Control"] == "max-age=3600")
        await fixture.finish()
    }

    // MARK: - Removal by date

    @Test func removingByDateKeepsTheVariantsStoredBeforeIt() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let clock = ManualClock.startingNow()
        let cache = HTTPURLCache(store: try HTTPResponseStore(directory: directory.cacheDirectory, diskConfiguration: clock.configuration))
        // Two URLs: one with two Vary variants, one with a GET and then a HEAD.
        var other = URLRequest(url: URL(string: "https://example.com/other")!)
        cache.storeCachedResponse(response("en", vary: true), for: request(language: "en"))
        cache.storeCachedResponse(response("get"), for: other)
        clock.advance(milliseconds: 10)
        let between = clock.date
        clock.advance(milliseconds: 10)
        cache.storeCachedResponse(response("fr", vary: true), for: request(language: "fr"))
        other.httpMethod = "HEAD"
        cache.storeCachedResponse(response(""), for: other)

        cache.removeCachedResponses(since: between)

        #expect(body(cache.cachedResponse(for: request(language: "en"))) == "en")
        #expect(cache.cachedResponse(for: request(language: "fr")) == nil)
        #expect(cache.storedResponse(for: other)?.response.requestMethod == "GET")
        // Nothing is left on disk that a lookup does not reach.
        #expect(diskRecords(cache) == 2)
    }

    /// The same through the client and a real origin: the variant fetched before the date is
    /// still served from the cache, the one fetched after it goes back to the origin.
    @Test func removingByDateThroughTheClientKeepsWhatWasFetchedBefore() async throws {
        let fixture = try await ClientFixture()
        fixture.server.respond { request in
            ScriptedResponse([("Cache-Control", "max-age=3600"), ("Vary", "Accept-Language")],
                             body: "in \(request.header("Accept-Language") ?? "-")")
        }
        _ = try await fixture.get("/v", headers: ["Accept-Language": "en"])
        try await Task.sleep(for: .milliseconds(50))
        let between = Date()
        try await Task.sleep(for: .milliseconds(50))
        _ = try await fixture.get("/v", headers: ["Accept-Language": "fr"])
        try await fixture.cache.async.removeCachedResponses(since: between)

        let english = try await fixture.get("/v", headers: ["Accept-Language": "en"])
        let french = try await fixture.get("/v", headers: ["Accept-Language": "fr"])
        #expect(english.source == .cache)
        #expect(english.text == "in en")
        #expect(french.source == .network)
        #expect(fixture.server.requestCount == 3)
        await fixture.finish()
    }

    // MARK: - Removal of a URL, replacement, the limit of variants

    @Test func replacingRemovingAndTheLimitWorkPerVariant() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = try HTTPURLCache(directory: directory.cacheDirectory)
        let limit = VariantRecords.maximumVariantCount
        for index in 0..<limit {
            cache.storeCachedResponse(response("v\(index)", vary: true), for: request(language: "l\(index)"))
        }
        cache.storeCachedResponse(response("v3 again", vary: true), for: request(language: "l3"))
        #expect(body(cache.cachedResponse(for: request(language: "l3"))) == "v3 again")
        #expect(diskRecords(cache) == limit)

        // One more than the limit replaces the least recently stored (l0), nothing else.
        cache.storeCachedResponse(response("extra", vary: true), for: request(language: "extra"))
        #expect(cache.cachedResponse(for: request(language: "l0")) == nil)
        #expect(body(cache.cachedResponse(for: request(language: "l1"))) == "v1")
        #expect(body(cache.cachedResponse(for: request(language: "extra"))) == "extra")
        #expect(diskRecords(cache) == limit)

        cache.removeCachedResponse(for: request(language: "l5"))
        #expect(diskRecords(cache) == 0)
        #expect(cache.responses.variants(forKey: CachePolicyEngine.primaryKey(method: "GET", url: url)).isEmpty)
    }

    /// Which slots a URL's variants use is remembered between lookups; a variant stored since,
    /// by this cache or by another instance on the same directory, is still found on the next
    /// lookup, and one removed since is not.
    @Test func aVariantStoredSinceTheLastLookupIsFoundWhoeverStoredIt() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = try HTTPURLCache(directory: directory.cacheDirectory)
        let other = try HTTPURLCache(directory: directory.cacheDirectory)
        cache.storeCachedResponse(response("en", vary: true), for: request(language: "en"))
        #expect(body(cache.cachedResponse(for: request(language: "en"))) == "en")
        #expect(cache.cachedResponse(for: request(language: "fr")) == nil)
        // Stored here, after the lookups above remembered one slot.
        cache.storeCachedResponse(response("fr", vary: true), for: request(language: "fr"))
        #expect(body(cache.cachedResponse(for: request(language: "fr"))) == "fr")
        // Stored by another instance.
        #expect(body(other.cachedResponse(for: request(language: "en"))) == "en")
        other.storeCachedResponse(response("de", vary: true), for: request(language: "de"))
        #expect(body(cache.cachedResponse(for: request(language: "de"))) == "de")
        #expect(body(cache.cachedResponse(for: request(language: "en"))) == "en")
        // Removed by the other, and everything removed here.
        other.removeCachedResponse(for: request(language: "de"))
        #expect(cache.cachedResponse(for: request(language: "de")) == nil)
        cache.storeCachedResponse(response("it", vary: true), for: request(language: "it"))
        #expect(body(cache.cachedResponse(for: request(language: "it"))) == "it")
        cache.removeAllCachedResponses()
        #expect(cache.cachedResponse(for: request(language: "it")) == nil)
        other.storeCachedResponse(response("es", vary: true), for: request(language: "es"))
        #expect(body(cache.cachedResponse(for: request(language: "es"))) == "es")
    }

    // MARK: - Capacity eviction

    @Test func capacityEvictionTakesVariantsOneByOne() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = try HTTPURLCache(memoryCapacity: 0, diskCapacity: 64 << 20, directory: directory.cacheDirectory)
        let disk = try #require(cache.responses.records.disk)
        let big = String(repeating: "x", count: 64 << 10)
        for language in ["a", "b", "c", "d"] {
            cache.storeCachedResponse(response(language + big, vary: true), for: request(language: language))
        }
        // a is now the most recently used, and read twice (which the default eviction order,
        // S3-FIFO, keeps over entries read once or never; the order is the index's, not the
        // access times', so all of this may happen within one second).
        _ = cache.cachedResponse(for: request(language: "a"))
        _ = cache.cachedResponse(for: request(language: "a"))
        _ = disk.trim(toSize: disk.totalSize - 1)

        // The least recently used variant went, alone; the others are still found.
        #expect(cache.cachedResponse(for: request(language: "b")) == nil)
        for language in ["a", "c", "d"] {
            #expect(body(cache.cachedResponse(for: request(language: language)))?.hasPrefix(language) == true)
        }
        #expect(diskRecords(cache) == 3)
    }

    // MARK: - Caches written with the earlier record shape

    /// A cache of this kind (`HTTPURLCache`) written with another record shape starts empty;
    /// one whose mark names no kind (every cache made before kinds were recorded, the earlier
    /// layout's among them) and no record version may be another component's data: it is
    /// refused, untouched.
    @Test func aCacheWithTheEarlierVariantListsStartsEmpty() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let primary = CachePolicyEngine.primaryKey(method: "GET", url: url)
        func writeEarlierLayout(kind: String?, version: Int?) throws {
            // What the earlier layout wrote: a list record at the primary key, a record per variant.
            var configuration = DiskCache.Configuration()
            configuration.kind = kind
            configuration.applicationVersion = version
            let store = try DiskCache(directory: directory.cacheDirectory, configuration: configuration)
            let entry = HTTPURLCache.entry(from: response("old"), for: CacheRequest(request())!, requestTime: Date(), responseTime: Date())
            try store.store(Data("old".utf8), for: primary + "\n#variant\nGET", metadata: try entry.encodedMetadata())
            try store.store(Data(), for: primary, metadata: ["variants": #"[{"id":"GET","policy":"allowed"}]"#])
            try store.close()
        }
        func mark() throws -> String {
            try String(contentsOf: directory.cacheDirectory.appendingPathComponent("VERSION"), encoding: .utf8)
        }
        try writeEarlierLayout(kind: nil, version: nil)
        #expect { try HTTPURLCache(directory: directory.cacheDirectory) } throws: { ($0 as? DiskCacheError)?.code == .otherKind }
        #expect(try mark() == "swift-disk-cache\n2\n")
        try FileManager.default.removeItem(at: directory.cacheDirectory)

        try writeEarlierLayout(kind: "HTTPURLCache", version: 1)
        let cache = try HTTPURLCache(directory: directory.cacheDirectory)
        #expect(diskRecords(cache) == 0)
        cache.storeCachedResponse(response("new"), for: request())
        #expect(body(cache.cachedResponse(for: request())) == "new")
        #expect(try mark() == "swift-disk-cache\n2\nkind HTTPURLCache\napplication 2\n")
    }
}

import Foundation
import HTTPTypes
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import HTTPTestOrigin
import Testing
@testable import HTTPCache

struct KeysHooksAndInvalidationTests {
    @Test func anUnsafeMethodInvalidatesTheTargetAndSameOriginLocations() async throws {
        let fixture = try await ClientFixture()
        let port = fixture.server.baseURL.port!
        fixture.server.respond { request in
            if request.method == "POST" {
                return ScriptedResponse(status: 201, [("Location", "/b"), ("Content-Location", "http://localhost:\(port)/c")])
            }
            return ScriptedResponse([("Cache-Control", "max-age=3600")], body: "page \(request.path)")
        }
        for path in ["/a", "/b", "/c", "/d"] { _ = try await fixture.get(path) }

        let post = try await fixture.client.response(for: fixture.request("/a", method: "POST", body: "x"))
        #expect(post.status == 201)

        // /a (the target) and /b (same-origin Location) are gone; /c is on another origin
        // (localhost is not 127.0.0.1) and /d was not named.
        var sources: [CachingHTTPClient.Source] = []
        for path in ["/a", "/b", "/c", "/d"] { sources.append(try await fixture.get(path).source) }
        #expect(sources == [.network, .network, .cache, .cache])
        await fixture.finish()
    }

    /// `HTTPResponseStore.key(method:url:request:)` gives the key the provider gives the request,
    /// and makes the request only when the provider needs it (the default provider keys a
    /// POST by its body; every other method by the method and URL alone).
    @Test func aKeyMadeWithoutTheRequestIsTheProvidersKey() throws {
        let url = URL(string: "https://example.com/a/b?q=1#fragment")!
        let plain = try HTTPURLCache(directory: nil)
        for method in ["GET", "HEAD", "POST", "DELETE"] {
            var request = URLRequest(url: url)
            request.httpMethod = method
            request.httpBody = Data("body".utf8)
            var made = 0
            let key = plain.responseStore.key(method: method, url: url) {
                made += 1
                return request
            }
            #expect(key != nil && key == DefaultCacheKeyProvider().key(for: request), "\(method)")
            #expect(made == (method == "POST" ? 1 : 0), "\(method)")
        }
        let custom = try HTTPURLCache(directory: nil, keyProvider: ClosureCacheKeyProvider { request in
            request.value(forHTTPHeaderField: "sign").map { "signed " + $0 }
        })
        var signed = URLRequest(url: url)
        signed.addValue("s1", forHTTPHeaderField: "sign")
        #expect(custom.responseStore.key(method: "GET", url: url) { signed } == "signed s1")
        #expect(custom.responseStore.key(method: "GET", url: url) { URLRequest(url: url) } == nil)
    }

    @Test func aCustomKeyProviderMakesSignedPOSTCallsCacheable() async throws {
        let provider = ClosureCacheKeyProvider { request in
            guard let url = request.url else { return nil }
            let body = request.httpBody.map { String(decoding: $0, as: UTF8.self) } ?? ""
            return "\(url.absoluteString)_\(request.value(forHTTPHeaderField: "sign") ?? "")_\(body)"
        }
        let fixture = try await ClientFixture(engine: CachePolicyEngine(cachesPOSTResponses: true), keyProvider: provider)
        fixture.server.respond { request in
            ScriptedResponse([("Cache-Control", "max-age=3600")],
                             body: "\(request.header("sign") ?? "-") asked \(String(decoding: request.body, as: UTF8.self))")
        }
        func call(sign: String, body: String) async throws -> CachingHTTPClient.Response {
            try await fixture.client.response(for: fixture.request("/api", method: "POST", headers: ["sign": sign], body: body))
        }

        let first = try await call(sign: "alice", body: "{\"page\":1}")
        let repeated = try await call(sign: "alice", body: "{\"page\":1}")
        let otherBody = try await call(sign: "alice", body: "{\"page\":2}")
        let otherUser = try await call(sign: "bob", body: "{\"page\":1}")

        #expect(first.source == .network)
        #expect(repeated.source == .cache)
        #expect(repeated.text == "alice asked {\"page\":1}")
        #expect(otherBody.source == .network)
        #expect(otherUser.source == .network)
        #expect(otherUser.text == "bob asked {\"page\":1}")
        #expect(fixture.server.requestCount == 3)
        await fixture.finish()
    }

    @Test func postResponsesAreNotReusedUnlessEnabled() async throws {
        let fixture = try await ClientFixture()
        fixture.server.respond { _ in ScriptedResponse([("Cache-Control", "max-age=3600")], body: "posted") }
        _ = try await fixture.client.response(for: fixture.request("/api", method: "POST", body: "same"))
        let second = try await fixture.client.response(for: fixture.request("/api", method: "POST", body: "same"))
        #expect(second.source == .network)
        #expect(fixture.server.requestCount == 2)
        await fixture.finish()
    }

    @Test func theWillStoreHookVetoesBusinessFailuresAndEditsWhatItKeeps() async throws {
        struct Envelope: Decodable { var returnCode: Int }
        let fixture = try await ClientFixture(willStore: { entry, _ in
            guard let envelope = try? JSONDecoder().decode(Envelope.self, from: entry.body), envelope.returnCode == 0 else {
                return nil
            }
            var edited = entry
            edited.storagePolicy = .allowedInMemoryOnly
            edited.response.headers.append(name: "X-Stored-By", value: "hook")
            return edited
        })
        fixture.server.respond { request in
            ScriptedResponse([("Cache-Control", "max-age=3600")],
                             body: request.path == "/fails" ? "{\"returnCode\":7}" : "{\"returnCode\":0}")
        }

        _ = try await fixture.get("/fails")
        _ = try await fixture.get("/works")
        let fails = try await fixture.get("/fails")
        let works = try await fixture.get("/works")

        #expect(fails.source == .network)
        #expect(works.source == .cache)
        #expect(works.header("X-Stored-By") == "hook")
        let stored = try #require(fixture.cache.storedResponse(for: fixture.request("/works")))
        #expect(stored.storagePolicy == .allowedInMemoryOnly)
        await fixture.finish()
    }

    /// The `Age` the client adds to a response served from the cache is a delta-seconds
    /// (RFC 9111 §1.2.2: 0 to 2^31) whatever times the stored response carries: a hook may edit
    /// them, and they come back from disk. An age beyond `Int` trapped.
    @Test(arguments: [1e300, -1e300, 1e12] as [TimeInterval])
    func theAgeOfAServedResponseIsADeltaSecondsWhateverItsStoredTimes(storedTime: TimeInterval) async throws {
        let fixture = try await ClientFixture(willStore: { entry, _ in
            var edited = entry
            edited.response.requestTime = Date(timeIntervalSince1970: storedTime)
            edited.response.responseTime = Date(timeIntervalSince1970: storedTime)
            return edited
        })
        fixture.server.respond { _ in ScriptedResponse([("Cache-Control", "max-age=3600")], body: "stored") }
        _ = try await fixture.get("/r")
        let served = try await fixture.get("/r", policy: .returnCacheDataDontLoad)

        #expect(served.text == "stored")
        let age = try #require(served.header("Age").flatMap { Int($0) })
        #expect((0...2_147_483_648).contains(age))
        await fixture.finish()
    }

    @Test func responsesYieldsTheCachedResponseThenTheRevalidatedOne() async throws {
        let fixture = try await ClientFixture()
        fixture.server.respond { request in
            if request.header("If-None-Match") == "\"v1\"" {
                return ScriptedResponse(status: 304, [("ETag", "\"v1\""), ("X-Round", "2")])
            }
            return ScriptedResponse([("ETag", "\"v1\""), ("Cache-Control", "max-age=3600"), ("X-Round", "1")], body: "list")
        }
        var first: [CachingHTTPClient.Source] = []
        for try await response in fixture.client.responses(for: fixture.request("/list")) {
            first.append(response.source)
        }
        var second: [(CachingHTTPClient.Source, String, String?)] = []
        for try await response in fixture.client.responses(for: fixture.request("/list")) {
            second.append((response.source, response.text, response.header("X-Round")))
        }

        #expect(first == [.network])
        #expect(second.map(\.0) == [.cache, .revalidated])
        #expect(second.map(\.1) == ["list", "list"])
        #expect(second.map(\.2) == ["1", "2"])
        #expect(fixture.server.requests.map { $0.header("If-None-Match") } == [nil, "\"v1\""])
        await fixture.finish()
    }
}

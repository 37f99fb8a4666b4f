import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTestOrigin
import Testing
@testable import HTTPCache

/// What Linux's URLSession does with an `HTTPURLCache` set as its configuration's `urlCache`,
/// measured against a real origin. docs/http-semantics.md summarises the findings.
struct URLSessionIntegrationTests {
    private struct Fixture {
        let server: OriginServer
        let cache: HTTPURLCache
        let session: URLSession

        init() async throws {
            server = try await OriginServer()
            cache = try HTTPURLCache(directory: nil)
            let configuration = URLSessionConfiguration.ephemeral
            configuration.urlCache = cache
            session = URLSession(configuration: configuration)
        }

        func get(_ path: String, policy: URLRequest.CachePolicy = .useProtocolCachePolicy,
                 headers: [String: String] = [:]) async throws -> (String, HTTPURLResponse) {
            var request = URLRequest(url: server.url(path), cachePolicy: policy)
            for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
            let (data, response) = try await session.data(for: request)
            return (String(decoding: data, as: UTF8.self), response as! HTTPURLResponse)
        }

        func finish() async {
            session.finishTasksAndInvalidate()
            try? await server.stop()
        }
    }

    @Test func theSessionNeverStoresHTTPResponsesInTheCache() async throws {
        // Linux's HTTP protocol reports every response with storage policy .notAllowed, so the
        // session never calls storeCachedResponse(_:for:).
        let fixture = try await Fixture()
        fixture.server.respond { _ in ScriptedResponse([("Cache-Control", "max-age=3600")], body: "fresh") }

        let (first, _) = try await fixture.get("/fresh")
        let (second, _) = try await fixture.get("/fresh")

        #expect([first, second] == ["fresh", "fresh"])
        #expect(try await fixture.cache.async.cachedResponse(for: URLRequest(url: fixture.server.url("/fresh"))) == nil)
        #expect(fixture.server.requestCount == 2)
        await fixture.finish()
    }

    @Test func theSessionServesAFreshResponseTheCacheHoldsWithoutTheNetwork() async throws {
        let fixture = try await Fixture()
        fixture.server.respond { _ in ScriptedResponse([("Cache-Control", "max-age=3600")], body: "stored by the client") }
        let client = CachingHTTPClient(cache: fixture.cache)
        _ = try await client.data(for: URLRequest(url: fixture.server.url("/fresh")))

        let (body, response) = try await fixture.get("/fresh")

        #expect(body == "stored by the client")
        #expect(response.statusCode == 200)
        #expect(fixture.server.requestCount == 1)
        await fixture.finish()
    }

    @Test func aStaleResponseIsWithheldAndTheSessionFetchesWithoutRevalidating() async throws {
        let fixture = try await Fixture()
        fixture.server.respond { _ in ScriptedResponse([("Cache-Control", "max-age=0"), ("ETag", "\"v1\"")], body: "stale") }
        let client = CachingHTTPClient(cache: fixture.cache)
        _ = try await client.data(for: URLRequest(url: fixture.server.url("/stale")))

        _ = try await fixture.get("/stale")

        // The session never sends the stored validators; the stored response stays.
        #expect(fixture.server.requestCount == 2)
        #expect(fixture.server.requests.map { $0.header("If-None-Match") } == [nil, nil])
        #expect(try await fixture.cache.async.cachedResponse(for: URLRequest(url: fixture.server.url("/stale"))) != nil)
        await fixture.finish()
    }

    @Test func theRequestCachePolicyIsAppliedByTheCache() async throws {
        let fixture = try await Fixture()
        fixture.server.respond { _ in ScriptedResponse([("Cache-Control", "max-age=3600")], body: "x") }
        let client = CachingHTTPClient(cache: fixture.cache)
        _ = try await client.data(for: URLRequest(url: fixture.server.url("/policy")))

        _ = try await fixture.get("/policy", policy: .reloadIgnoringLocalCacheData)
        _ = try await fixture.get("/policy", policy: .returnCacheDataElseLoad)

        #expect(fixture.server.requestCount == 2)
        await fixture.finish()
    }

    @Test func aStoredResponseWithVaryIsNotHandedToTheSessionAndSurvives() async throws {
        let fixture = try await Fixture()
        fixture.server.respond { _ in ScriptedResponse([("Cache-Control", "max-age=3600"), ("Vary", "Accept-Language")], body: "v") }
        var request = URLRequest(url: fixture.server.url("/vary"))
        request.setValue("en", forHTTPHeaderField: "Accept-Language")
        let client = CachingHTTPClient(cache: fixture.cache)
        _ = try await client.data(for: request)

        _ = try await fixture.get("/vary", headers: ["Accept-Language": "en"])

        #expect(fixture.server.requestCount == 2)
        #expect(try await fixture.cache.async.cachedResponse(for: request) != nil)
        await fixture.finish()
    }
}

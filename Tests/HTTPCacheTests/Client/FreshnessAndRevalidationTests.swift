import DiskCache
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import HTTPTestOrigin
import Testing
@testable import HTTPCache

struct FreshnessAndRevalidationTests {
    @Test func aFreshResponseIsServedFromTheCacheWithoutTheNetwork() async throws {
        // The clock stands still, so a loaded machine cannot age the response by a second.
        let now = Date()
        let fixture = try await ClientFixture(clock: { now })
        fixture.server.respond { _ in ScriptedResponse([("Cache-Control", "max-age=3600")], body: "hello") }

        let first = try await fixture.get("/fresh")
        let second = try await fixture.get("/fresh")

        #expect(first.source == .network)
        #expect(second.source == .cache)
        #expect(second.text == "hello")
        #expect(second.status == 200)
        #expect(second.header("Age") == "0")
        #expect(fixture.server.requestCount == 1)
        #expect(fixture.client.statistics == .init(requests: 2, network: 1, hits: 1, conditionalHits: 0))
        await fixture.finish()
    }

    @Test func aStaleResponseIsRevalidatedAndA304ServesTheStoredBodyWithMergedHeaders() async throws {
        let fixture = try await ClientFixture()
        fixture.server.respond { request in
            if request.header("If-None-Match") == "\"v1\"" {
                return ScriptedResponse(status: 304, [("ETag", "\"v1\""), ("Cache-Control", "max-age=3600"), ("X-Checked", "yes")])
            }
            return ScriptedResponse([("ETag", "\"v1\""), ("Cache-Control", "max-age=0"), ("X-Checked", "no")], body: "body-v1")
        }

        _ = try await fixture.get("/etag")
        let revalidated = try await fixture.get("/etag")
        let third = try await fixture.get("/etag")

        #expect(revalidated.source == .revalidated)
        #expect(revalidated.status == 200)
        #expect(revalidated.text == "body-v1")
        #expect(revalidated.header("X-Checked") == "yes")
        #expect(fixture.server.requests.map { $0.header("If-None-Match") } == [nil, "\"v1\""])
        // The 304's max-age=3600 made the merged response fresh: no third request.
        #expect(third.source == .cache)
        #expect(third.header("X-Checked") == "yes")
        #expect(fixture.client.statistics == .init(requests: 3, network: 2, hits: 1, conditionalHits: 1))
        // The 304 rewrote the stored headers only: one record written by the first response,
        // then one metadata update, and the body never again.
        let disk = try #require(fixture.cache.responses.records.disk)
        #expect(disk.statistics.writes == 1)
        #expect(disk.statistics.metadataUpdates == 1)
        await fixture.finish()
    }

    @Test func lastModifiedBecomesIfModifiedSince() async throws {
        let fixture = try await ClientFixture()
        let lastModified = "Sun, 06 Nov 1994 08:49:37 GMT"
        fixture.server.respond { request in
            if request.header("If-Modified-Since") == lastModified {
                return ScriptedResponse(status: 304, [("Cache-Control", "no-cache")])
            }
            return ScriptedResponse([("Last-Modified", lastModified), ("Cache-Control", "no-cache")], body: "dated")
        }

        _ = try await fixture.get("/dated")
        let second = try await fixture.get("/dated")

        #expect(second.source == .revalidated)
        #expect(second.text == "dated")
        #expect(fixture.server.requests.map { $0.header("If-Modified-Since") } == [nil, lastModified])
        await fixture.finish()
    }

    @Test func aResponseWithoutFreshnessInformationIsNotReusedWithoutTheNetwork() async throws {
        // Foundation's URLCache on Linux serves such a response forever.
        let fixture = try await ClientFixture()
        let served = Atomic(0)
        fixture.server.respond { _ in
            let n = served.add(1, ordering: .relaxed).newValue
            return ScriptedResponse(body: "version \(n)")
        }

        let first = try await fixture.get("/plain")
        let second = try await fixture.get("/plain")

        #expect(first.text == "version 1")
        #expect(second.text == "version 2")
        #expect(second.source == .network)
        #expect(fixture.server.requestCount == 2)
        await fixture.finish()
    }

    @Test func anExpiresInThePastIsStaleAndAnExpiresInTheFutureIsFresh() async throws {
        let fixture = try await ClientFixture()
        fixture.server.respond { request in
            let offset: TimeInterval = request.path == "/future" ? 3600 : -3600
            return ScriptedResponse([("Date", httpDateNow()), ("Expires", httpDateNow(offset: offset))], body: request.path)
        }

        _ = try await fixture.get("/future")
        _ = try await fixture.get("/past")
        let future = try await fixture.get("/future")
        let past = try await fixture.get("/past")

        #expect(future.source == .cache)
        #expect(past.source == .network)
        #expect(fixture.server.requestCount == 3)
        await fixture.finish()
    }

    @Test func noStoreResponsesAreNeverStored() async throws {
        let fixture = try await ClientFixture()
        fixture.server.respond { _ in ScriptedResponse([("Cache-Control", "no-store, max-age=3600")], body: "secret") }

        _ = try await fixture.get("/secret")
        let second = try await fixture.get("/secret")

        #expect(second.source == .network)
        #expect(try await fixture.cache.async.cachedResponse(for: fixture.request("/secret")) == nil)
        await fixture.finish()
    }

    @Test func aHEADRequestIsAnsweredFromAStoredGETResponseWithoutItsBody() async throws {
        let fixture = try await ClientFixture()
        fixture.server.respond { _ in ScriptedResponse([("Cache-Control", "max-age=3600"), ("X-Kind", "get")], body: "full body") }
        _ = try await fixture.get("/doc")

        let head = try await fixture.client.response(for: fixture.request("/doc", method: "HEAD"))

        #expect(head.source == .cache)
        #expect(head.data.isEmpty)
        #expect(head.header("X-Kind") == "get")
        #expect(fixture.server.requestCount == 1)
        await fixture.finish()
    }

    @Test func onlyIfCachedWithNothingStoredAnswers504WithoutTheNetwork() async throws {
        let fixture = try await ClientFixture()
        let response = try await fixture.get("/none", headers: ["Cache-Control": "only-if-cached"])

        #expect(response.status == 504)
        #expect(response.source == .gatewayTimeout)
        #expect(fixture.server.requestCount == 0)
        await fixture.finish()
    }

    @Test func varyKeepsSeveralVariantsOfOneURL() async throws {
        let fixture = try await ClientFixture()
        fixture.server.respond { request in
            ScriptedResponse([("Cache-Control", "max-age=3600"), ("Vary", "Accept-Language")],
                             body: "hello in \(request.header("Accept-Language") ?? "none")")
        }

        let english = try await fixture.get("/greeting", headers: ["Accept-Language": "en"])
        let french = try await fixture.get("/greeting", headers: ["Accept-Language": "fr"])
        let englishAgain = try await fixture.get("/greeting", headers: ["Accept-Language": "en"])
        let frenchAgain = try await fixture.get("/greeting", headers: ["Accept-Language": "fr"])
        let german = try await fixture.get("/greeting", headers: ["Accept-Language": "de"])

        #expect([english.text, french.text, german.text] == ["hello in en", "hello in fr", "hello in de"])
        #expect(englishAgain.source == .cache)
        #expect(englishAgain.text == "hello in en")
        #expect(frenchAgain.source == .cache)
        #expect(frenchAgain.text == "hello in fr")
        #expect(german.source == .network)
        #expect(fixture.server.requestCount == 3)
        #expect(fixture.cache.responses.variants(forKey: "GET " + fixture.server.url("/greeting").absoluteString).count == 3)
        await fixture.finish()
    }
}

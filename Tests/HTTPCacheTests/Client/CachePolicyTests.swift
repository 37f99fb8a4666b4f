import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import HTTPTestOrigin
import Testing
@testable import HTTPCache

/// Every `URLRequest.CachePolicy`, against a stored response and against an empty cache.
struct CachePolicyTests {
    /// A server whose answers are numbered, fresh for an hour, with an ETag per version.
    private func numberedFixture(maxAge: Int = 3600) async throws -> ClientFixture {
        let fixture = try await ClientFixture()
        let served = Atomic(0)
        fixture.server.respond { request in
            if request.header("If-None-Match") != nil {
                return ScriptedResponse(status: 304, [("ETag", request.header("If-None-Match")!)])
            }
            let n = served.add(1, ordering: .relaxed).newValue
            return ScriptedResponse([("Cache-Control", "max-age=\(maxAge)"), ("ETag", "\"v\(n)\"")], body: "version \(n)")
        }
        return fixture
    }

    @Test func useProtocolCachePolicyServesAFreshResponse() async throws {
        let fixture = try await numberedFixture()
        _ = try await fixture.get("/r")
        let second = try await fixture.get("/r", policy: .useProtocolCachePolicy)
        #expect(second.source == .cache)
        #expect(second.text == "version 1")
        #expect(fixture.server.requestCount == 1)
        await fixture.finish()
    }

    @Test func reloadIgnoringLocalCacheDataFetchesUnconditionallyAndStoresTheResult() async throws {
        let fixture = try await numberedFixture()
        _ = try await fixture.get("/r")
        let reloaded = try await fixture.get("/r", policy: .reloadIgnoringLocalCacheData)
        let after = try await fixture.get("/r")

        #expect(reloaded.source == .network)
        #expect(reloaded.text == "version 2")
        #expect(fixture.server.requests.map { $0.header("If-None-Match") } == [nil, nil])
        #expect(after.source == .cache)
        #expect(after.text == "version 2")
        await fixture.finish()
    }

    @Test func reloadIgnoringLocalAndRemoteCacheDataAsksIntermediariesNotToAnswer() async throws {
        let fixture = try await numberedFixture()
        _ = try await fixture.get("/r")
        let reloaded = try await fixture.get("/r", policy: .reloadIgnoringLocalAndRemoteCacheData)

        #expect(reloaded.source == .network)
        #expect(reloaded.text == "version 2")
        let sent = try #require(fixture.server.requests.last)
        #expect(sent.header("Cache-Control") == "no-cache")
        #expect(sent.header("Pragma") == "no-cache")
        #expect(sent.header("If-None-Match") == nil)
        await fixture.finish()
    }

    /// A request the key provider bypasses is still sent as its policy says, and under
    /// `returnCacheDataDontLoad` not sent at all: nothing is stored for it.
    @Test func aRequestTheKeyProviderBypassesKeepsItsPolicy() async throws {
        let fixture = try await ClientFixture(keyProvider: ClosureCacheKeyProvider { _ in nil })
        fixture.server.respond { _ in ScriptedResponse([("Cache-Control", "max-age=3600")], body: "uncached") }

        let reloaded = try await fixture.get("/b", policy: .reloadIgnoringLocalAndRemoteCacheData)
        #expect(reloaded.text == "uncached")
        let sent = try #require(fixture.server.requests.last)
        #expect(sent.header("Cache-Control") == "no-cache")
        #expect(sent.header("Pragma") == "no-cache")

        _ = try await fixture.get("/b")
        #expect(fixture.server.requests.last?.header("Cache-Control") == nil)
        await #expect(throws: HTTPCacheError.self) { try await fixture.get("/b", policy: .returnCacheDataDontLoad) }
        #expect(fixture.server.requestCount == 2)
        await fixture.finish()
    }

    @Test func reloadRevalidatingCacheDataRevalidatesEvenAFreshResponse() async throws {
        let fixture = try await numberedFixture()
        _ = try await fixture.get("/r")
        let revalidated = try await fixture.get("/r", policy: .reloadRevalidatingCacheData)

        #expect(revalidated.source == .revalidated)
        #expect(revalidated.text == "version 1")
        #expect(fixture.server.requests.map { $0.header("If-None-Match") } == [nil, "\"v1\""])
        #expect(fixture.client.statistics == .init(requests: 2, network: 2, hits: 0, conditionalHits: 1))
        await fixture.finish()
    }

    @Test func reloadRevalidatingCacheDataServesTheNewBodyWhenTheResourceChanged() async throws {
        let fixture = try await ClientFixture()
        let served = Atomic(0)
        fixture.server.respond { _ in
            let n = served.add(1, ordering: .relaxed).newValue
            return ScriptedResponse([("Cache-Control", "max-age=3600"), ("ETag", "\"v\(n)\"")], body: "version \(n)")
        }
        _ = try await fixture.get("/r")
        let changed = try await fixture.get("/r", policy: .reloadRevalidatingCacheData)
        let after = try await fixture.get("/r")

        #expect(changed.source == .network)
        #expect(changed.text == "version 2")
        #expect(after.text == "version 2")
        await fixture.finish()
    }

    @Test func returnCacheDataElseLoadServesAStaleResponseWithoutTheNetwork() async throws {
        let fixture = try await numberedFixture(maxAge: 0)
        _ = try await fixture.get("/r")
        let stale = try await fixture.get("/r", policy: .returnCacheDataElseLoad)
        let missing = try await fixture.get("/other", policy: .returnCacheDataElseLoad)

        #expect(stale.source == .cache)
        #expect(stale.text == "version 1")
        #expect(missing.source == .network)
        #expect(fixture.server.requestCount == 2)
        await fixture.finish()
    }

    @Test func returnCacheDataDontLoadServesAStaleResponseAndFailsOnAMissWithoutTheNetwork() async throws {
        let fixture = try await numberedFixture(maxAge: 0)
        _ = try await fixture.get("/r")
        let stale = try await fixture.get("/r", policy: .returnCacheDataDontLoad)

        #expect(stale.source == .cache)
        #expect(stale.text == "version 1")
        await #expect(throws: HTTPCacheError(.notCached, "nothing is stored for \(fixture.server.url("/missing").absoluteString) and the policy forbids the network")) {
            _ = try await fixture.get("/missing", policy: .returnCacheDataDontLoad)
        }
        #expect(fixture.server.requestCount == 1)
        await fixture.finish()
    }
}

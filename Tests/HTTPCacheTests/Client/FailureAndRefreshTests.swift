import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import HTTPTestOrigin
import Testing
@testable import HTTPCache

struct FailureAndRefreshTests {
    @Test func staleIfErrorServesTheStoredResponseWhenTheServerIsStopped() async throws {
        let fixture = try await ClientFixture(engine: CachePolicyEngine(servesStaleWhenDisconnected: false))
        fixture.server.respond { request in
            ScriptedResponse([("Cache-Control", request.path == "/allowed" ? "max-age=0, stale-if-error=3600" : "max-age=0")],
                             body: "stored \(request.path)")
        }
        _ = try await fixture.get("/allowed")
        _ = try await fixture.get("/forbidden")
        try await fixture.server.stop()

        let served = try await fixture.get("/allowed")
        #expect(served.source == .staleAfterError)
        #expect(served.text == "stored /allowed")
        await #expect(throws: (any Error).self) {
            _ = try await fixture.get("/forbidden")
        }
        #expect(fixture.client.statistics == .init(requests: 4, network: 4, hits: 1, conditionalHits: 0))
        await fixture.finish()
    }

    @Test func aDisconnectedCacheServesStaleUnlessMustRevalidateForbidsIt() async throws {
        let fixture = try await ClientFixture()
        fixture.server.respond { request in
            ScriptedResponse([("Cache-Control", request.path == "/strict" ? "max-age=0, must-revalidate" : "max-age=0")], body: "old")
        }
        _ = try await fixture.get("/lenient")
        _ = try await fixture.get("/strict")
        try await fixture.server.stop()

        #expect(try await fixture.get("/lenient").source == .staleAfterError)
        await #expect(throws: (any Error).self) {
            _ = try await fixture.get("/strict")
        }
        await fixture.finish()
    }

    @Test func staleIfErrorCoversA503ButNotA404() async throws {
        let fixture = try await ClientFixture()
        let failing = Atomic(false)
        fixture.server.respond { request in
            if failing.load(ordering: .relaxed) {
                return ScriptedResponse(status: request.path == "/a" ? 503 : 404, body: "error")
            }
            return ScriptedResponse([("Cache-Control", "max-age=0, stale-if-error=3600")], body: "good \(request.path)")
        }
        _ = try await fixture.get("/a")
        _ = try await fixture.get("/b")
        failing.store(true, ordering: .relaxed)

        let a = try await fixture.get("/a")
        let b = try await fixture.get("/b")
        #expect(a.source == .staleAfterError)
        #expect(a.text == "good /a")
        #expect(b.source == .network)
        #expect(b.status == 404)
        await fixture.finish()
    }

    @Test func staleWhileRevalidateServesAtOnceAndRefreshesOncePerKey() async throws {
        let fixture = try await ClientFixture()
        let served = Atomic(0)
        fixture.server.respond { request in
            if request.header("If-None-Match") == "\"v1\"" {
                return ScriptedResponse(status: 304, [("ETag", "\"v1\""), ("Cache-Control", "max-age=3600"), ("X-Refreshed", "yes")])
            }
            let n = served.add(1, ordering: .relaxed).newValue
            return ScriptedResponse([("ETag", "\"v\(n)\""), ("Cache-Control", "max-age=0, stale-while-revalidate=3600")], body: "v\(n)")
        }
        _ = try await fixture.get("/swr")

        fixture.server.hold()
        var answers: [CachingHTTPClient.Response] = []
        for _ in 0..<5 {
            answers.append(try await fixture.get("/swr"))
        }
        await fixture.server.waitForRequests(2)
        fixture.server.release()
        await fixture.client.waitForBackgroundRefreshes()
        let after = try await fixture.get("/swr")

        #expect(answers.map(\.source) == Array(repeating: .cache, count: 5))
        #expect(answers.map(\.text) == Array(repeating: "v1", count: 5))
        #expect(fixture.server.requestCount == 2)
        #expect(fixture.server.requests.last?.header("If-None-Match") == "\"v1\"")
        #expect(after.source == .cache)
        #expect(after.header("X-Refreshed") == "yes")
        #expect(fixture.client.statistics == .init(requests: 7, network: 2, hits: 6, conditionalHits: 0))
        await fixture.finish()
    }

    @Test func concurrentIdenticalRequestsShareOneFetch() async throws {
        let fixture = try await ClientFixture()
        fixture.server.respond { _ in ScriptedResponse([("Cache-Control", "no-cache")], body: "shared") }
        fixture.server.hold()

        let client = fixture.client
        let request = fixture.request("/shared")
        try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<5 {
                group.addTask { String(decoding: try await client.data(for: request).0, as: UTF8.self) }
            }
            await fixture.server.waitForRequests(1)
            while client.coalescedCallerCount(for: request) < 5 {
                await Task.yield()
            }
            fixture.server.release()
            var bodies: [String] = []
            for try await body in group { bodies.append(body) }
            #expect(bodies == Array(repeating: "shared", count: 5))
        }
        #expect(fixture.server.requestCount == 1)
        #expect(fixture.client.statistics == .init(requests: 5, network: 1, hits: 0, conditionalHits: 0))
        await fixture.finish()
    }

    @Test func cancellingTheCallerStopsWaitingAtOnce() async throws {
        let fixture = try await ClientFixture()
        fixture.server.respond { _ in ScriptedResponse(body: "late") }
        fixture.server.hold()

        let client = fixture.client
        let request = fixture.request("/slow")
        let task = Task { try await client.data(for: request) }
        await fixture.server.waitForRequests(1)
        task.cancel()
        let result = await task.result

        #expect(throws: CancellationError.self) { try result.get() }
        fixture.server.release()
        await fixture.finish()
    }

    @Test func aCancelledTaskMakesNoRequest() async throws {
        let fixture = try await ClientFixture()
        let client = fixture.client
        let request = fixture.request("/never")
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await client.data(for: request)
        }
        let result = await task.result
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(fixture.server.requestCount == 0)
        await fixture.finish()
    }
}

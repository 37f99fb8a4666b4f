#if Server
import DiskCacheLocking
import Foundation
import HTTPTestOrigin
import HTTPTypes
import NIOCore
import NIOHTTP1
import Testing
@testable import CacheServer

/// Hits answered with an answer prepared by an earlier hit (`PreparedHits`): the same answer
/// the full path gives, and never once the response it was made from is no longer the one to send.
@Suite(.serialized)
struct PreparedHitsTests {
    /// The fields of `headers` but `Age`, in order.
    func withoutAge(_ headers: HTTPHeaders) -> [String] {
        headers.filter { $0.name.lowercased() != "age" }.map { "\($0.name): \($0.value)" }
    }

    @Test func aPreparedAnswerIsWhatTheFullPathSends() async throws {
        let fixture = try await ServerFixture()
        fixture.origin.respond { _ in
            ScriptedResponse(status: 200, [("Cache-Control", "max-age=60"), ("Content-Type", "text/plain"), ("ETag", "\"e\""),
                                           ("Age", "5"), ("X-Cache", "upstream")], body: "prepared body")
        }
        #expect(try await fixture.get("/p").header("X-Cache") == "MISS")
        let full = try await fixture.get("/p")
        #expect(fixture.server.statistics.hitsPrepared == 0)
        let prepared = try await fixture.get("/p")
        #expect(fixture.server.statistics.hitsPrepared == 1)
        #expect(prepared.status == full.status && prepared.text == "prepared body" && prepared.body == full.body)
        #expect(prepared.headers.map(\.name) == full.headers.map(\.name))
        #expect(withoutAge(prepared.headers) == withoutAge(full.headers))
        #expect(prepared.header("X-Cache") == "HIT" && prepared.header("Content-Length") == "13")
        #expect(prepared.header("Age").flatMap(Int.init).map { $0 >= 5 } == true)
        // A HEAD has its own: the same fields, no body.
        _ = try await fixture.send(.HEAD, "/p")
        let head = try await fixture.send(.HEAD, "/p")
        #expect(fixture.server.statistics.hitsPrepared == 2)
        #expect(head.status == 200 && head.body.isEmpty && withoutAge(head.headers) == withoutAge(full.headers))
        #expect(fixture.origin.requestCount == 1)
        #expect(fixture.server.handler.prepared.usage.entries == 2)
        try await fixture.finish()
    }

    /// A fresh hit that the connection's task answers (a request the event loop leaves to it:
    /// here one that closes its connection) prepares the answer as the event loop would.
    @Test func aHitOnTheTaskPreparesTheAnswerToo() async throws {
        let fixture = try await ServerFixture()
        fixture.origin.respond { _ in ScriptedResponse(status: 200, [("Cache-Control", "max-age=60")], body: "from the task") }
        #expect(try await fixture.get("/t").header("X-Cache") == "MISS")
        let onTask = try await fixture.get("/t", headers: [("Connection", "close")])
        #expect(onTask.header("X-Cache") == "HIT" && fixture.server.statistics.hitsOnEventLoop == 0)
        #expect(fixture.server.handler.prepared.usage.entries == 1)
        let prepared = try await fixture.get("/t")
        #expect(fixture.server.statistics.hitsPrepared == 1 && prepared.text == "from the task")
        var withoutClose = onTask.headers
        withoutClose.remove(name: "Connection")
        #expect(withoutAge(prepared.headers) == withoutAge(withoutClose))
        #expect(fixture.origin.requestCount == 1)
        try await fixture.finish()
    }

    /// The `Age` of a prepared answer is the response's age when it is sent, not when it was prepared.
    @Test func aPreparedAnswersAgeGrows() async throws {
        let fixture = try await ServerFixture()
        fixture.origin.respond { _ in ScriptedResponse(status: 200, [("Cache-Control", "max-age=60")], body: "aging") }
        for _ in 0..<2 { _ = try await fixture.get("/age") }
        try await Task.sleep(for: .milliseconds(2_100))
        let later = try await fixture.get("/age")
        #expect(fixture.server.statistics.hitsPrepared == 1)
        #expect(later.header("Age").flatMap(Int.init).map { $0 >= 2 } == true, "\(later.headers)")
        try await fixture.finish()
    }

    /// A request with a directive, a condition or a range is answered by the full path, as it
    /// would be without prepared answers.
    @Test func requestsWithDirectivesConditionsOrARangeTakeTheFullPath() async throws {
        let fixture = try await ServerFixture()
        fixture.origin.respond { request in
            if request.header("If-None-Match") == "\"v\"" { return ScriptedResponse(status: 304, [("ETag", "\"v\""), ("Cache-Control", "max-age=60")]) }
            return ScriptedResponse(status: 200, [("Cache-Control", "max-age=60"), ("ETag", "\"v\"")], body: "0123456789")
        }
        for _ in 0..<3 { _ = try await fixture.get("/q") }
        #expect(fixture.server.statistics.hitsPrepared == 1)
        for directive in [("Cache-Control", "no-cache"), ("Pragma", "no-cache"), ("Cache-Control", "max-age=0")] {
            let reply = try await fixture.get("/q", headers: [directive])
            #expect(reply.status == 200 && reply.header("X-Cache") == "REVALIDATED", "\(directive)")
        }
        #expect(fixture.origin.requestCount == 4)
        #expect(try await fixture.get("/q", headers: [("If-None-Match", "\"v\"")]).status == 304)
        let range = try await fixture.get("/q", headers: [("Range", "bytes=0-1")])
        #expect(range.status == 206 && range.text == "01")
        #expect(fixture.server.statistics.hitsPrepared == 1)
        // The revalidations stored new response times: the answer prepared before is not the
        // stored response's any more, and is made again.
        _ = try await fixture.get("/q")
        #expect(fixture.server.statistics.hitsPrepared == 1)
        let again = try await fixture.get("/q")
        #expect(fixture.server.statistics.hitsPrepared == 2 && again.text == "0123456789")
        try await fixture.finish()
    }

    /// A purge, an unsafe method, a new response and the end of freshness each end a prepared answer.
    @Test func aPreparedAnswerEndsWithItsResponse() async throws {
        let fixture = try await ServerFixture()
        let version = Counter()
        fixture.origin.respond { request in
            if request.method == "POST" { return ScriptedResponse(status: 204) }
            // Fresh for 4 s: three requests on a loaded machine must fit in it (at 1 s they did not).
            let maxAge = request.path.hasPrefix("/short") ? 4 : 60
            return ScriptedResponse(status: 200, [("Cache-Control", "max-age=\(maxAge)")], body: "v\(version.next())")
        }
        func twice(_ path: String) async throws -> String {
            _ = try await fixture.get(path)
            return try await fixture.get(path).text
        }
        #expect(try await fixture.get("/r").text == "v1")
        #expect(try await twice("/r") == "v1")
        let prepared = fixture.server.statistics.hitsPrepared
        #expect(prepared == 1)
        #expect(try await fixture.send(.RAW(value: "PURGE"), "/r", headers: [("Authorization", "Bearer token")]).status == 200)
        #expect(try await fixture.get("/r").text == "v2")
        #expect(try await twice("/r") == "v2")
        #expect(try await fixture.send(.POST, "/r", body: Data("x".utf8)).status == 204)
        let afterPost = try await fixture.get("/r")
        #expect(afterPost.text == "v3" && afterPost.header("X-Cache") == "MISS")
        #expect(try await twice("/r") == "v3")
        // Past its freshness: fetched again (no validator).
        #expect(try await fixture.get("/short").text == "v4")
        #expect(try await twice("/short") == "v4")
        try await Task.sleep(for: .milliseconds(4_200))
        let expired = try await fixture.get("/short")
        #expect(expired.text == "v5" && expired.header("X-Cache") == "MISS")
        #expect(fixture.server.statistics.hitsPrepared == 4)
        try await fixture.finish()
    }

    /// A response with `Vary` makes the decision read the request's fields: it is never prepared.
    @Test func aResponseWithVaryIsNotPrepared() async throws {
        let fixture = try await ServerFixture()
        fixture.origin.respond { request in
            ScriptedResponse(status: 200, [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")],
                             body: request.header("Accept-Language") ?? "none")
        }
        for _ in 0..<3 { #expect(try await fixture.get("/v", headers: [("Accept-Language", "fr")]).text == "fr") }
        #expect(try await fixture.get("/v", headers: [("Accept-Language", "de")]).text == "de")
        #expect(fixture.server.statistics.hits == 2 && fixture.server.statistics.hitsPrepared == 0)
        #expect(fixture.server.handler.prepared.usage.entries == 0)
        try await fixture.finish()
    }

    /// Without a memory tier (capacity 0) nothing is prepared.
    @Test func noMemoryCapacityPreparesNothing() async throws {
        let fixture = try await ServerFixture { $0.memoryCapacity = 0 }
        fixture.origin.respond { _ in ScriptedResponse(status: 200, [("Cache-Control", "max-age=60")], body: "disk only") }
        for _ in 0..<3 { #expect(try await fixture.get("/d").text == "disk only") }
        #expect(fixture.server.statistics.hits == 2 && fixture.server.statistics.hitsPrepared == 0)
        try await fixture.finish()
    }

    /// The answers kept stay within their bytes, the first prepared leaving first.
    @Test func preparedAnswersStayWithinTheirCapacity() {
        let overhead = PreparedHits.entryOverhead
        let hits = PreparedHits(capacity: 3 * (1_000 + overhead))
        func hit(_ size: Int, record: String) -> PreparedHits.Hit {
            PreparedHits.Hit(primaryKey: "k", recordKey: record, text: "t", status: .ok, beforeAge: [:], afterAge: [:],
                             body: ByteBuffer(repeating: 1, count: size), preparedAt: Date(), ageThen: 0, freshUntil: .distantFuture)
        }
        func target(_ n: Int) -> PreparedHits.Target { PreparedHits.Target(isHEAD: false, uri: "/\(n)") }
        for n in 0..<3 { hits.keep(hit(1_000, record: "\(n)"), for: target(n)) }
        #expect(hits.usage.entries == 3 && hits.usage.bytes == 3 * (1_000 + overhead))
        hits.keep(hit(1_000, record: "3"), for: target(3))
        #expect(hits.usage.entries == 3 && hits.hit(for: target(0)) == nil && hits.hit(for: target(3)) != nil)
        // Replacing an entry counts it once.
        hits.keep(hit(500, record: "3b"), for: target(3))
        #expect(hits.usage.entries == 3 && hits.usage.bytes == 2 * (1_000 + overhead) + 500 + overhead)
        // One larger than the whole capacity is not kept, and takes nothing out.
        hits.keep(hit(3 * 1_000 + 2 * overhead + 1, record: "big"), for: target(9))
        #expect(hits.usage.entries == 3 && hits.hit(for: target(9)) == nil)
        // Forgetting drops only the entry still holding that answer.
        let current = hits.hit(for: target(3))!
        hits.forget(target(3), ifStill: hit(1_000, record: "3"))
        #expect(hits.hit(for: target(3))?.recordKey == "3b")
        hits.forget(target(3), ifStill: current)
        #expect(hits.hit(for: target(3)) == nil && hits.usage.entries == 2)
        // Many replacements later the order is compacted and the bound still holds.
        for n in 0..<1_000 { hits.keep(hit(100 + n % 7, record: "r\(n)"), for: target(n % 5)) }
        #expect(hits.usage.bytes <= hits.capacity && hits.usage.entries <= 5)
    }
}

/// A thread-safe counter for an origin's script.
final class Counter: Sendable {
    private let value = PthreadMutex(0)
    func next() -> Int { value.withLock { $0 += 1; return $0 } }
}
#endif

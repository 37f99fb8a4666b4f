#if Server
import DiskCacheLocking
import Foundation
import HTTPTestOrigin
import HTTPTypes
import NIOCore
import NIOHTTP1
import Testing
@testable import CacheServer

/// Prepared answers read and written straight from a connection's bytes (`RawHitResponder`):
/// only requests NIO's parser would read the same way, the very bytes the full path sends, and
/// in the order of the requests whichever way each is answered.
@Suite(.serialized)
struct AnswersFromBytesTests {
    /// `RequestScan` on whole heads: what it answers, what it hands on and where a request ends.
    @Test func theScanTakesOnlyPlainGETAndHEADOfHTTP11() {
        let plain = "GET /a?b=c HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n"
        func target(_ uri: String, head: Bool = false) -> PreparedHits.Target { PreparedHits.Target(isHEAD: head, uri: uri) }
        // A whole head, as long as it is.
        func whole(_ text: String, _ target: PreparedHits.Target?) -> (String, RequestScan) { (text, .headOnly(length: text.utf8.count, target: target)) }
        let heads: [((String, RequestScan), String)] = [
            (whole("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n", target("/", head: true)), "a HEAD with only its Host"),
            (whole("GET / HTTP/1.1\r\nHost: x\r\nConnection:  Keep-Alive \r\n\r\n", target("/")), "keep-alive"),
            (whole("GET / HTTP/1.1\r\n\r\n", nil), "no Host: refused by the full path"),
            (whole("GET / HTTP/1.1\r\nHost: x\r\nhost: y\r\n\r\n", nil), "two Host fields: refused by the full path"),
            (whole("GET /a#x HTTP/1.1\r\nHost: x\r\n\r\n", nil), "a fragment: refused by the full path"),
            (whole("GET / HTTP/1.1\r\nif-none-match: \"e\"\r\n\r\n", nil), "a condition: the full path's"),
            (whole("GET / HTTP/1.1\r\nRANGE: bytes=0-1\r\n\r\n", nil), "a range"),
            (whole("GET / HTTP/1.1\r\nCache-Control: no-cache\r\n\r\n", nil), "a directive"),
            (whole("GET /_cache/health HTTP/1.1\r\n\r\n", nil), "the server's own endpoint"),
        ]
        let cases: [(String, RequestScan, String)] = heads.map { ($0.0.0, $0.0.1, $0.1) } + [
            (plain, .headOnly(length: plain.utf8.count, target: target("/a?b=c")), "a plain GET"),
            (plain + "GET /next HTTP/1.1\r\n\r\n", .headOnly(length: plain.utf8.count, target: target("/a?b=c")), "the first of two"),
            ("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", .other, "closing"),
            ("GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", .other, "a length"),
            ("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", .other, "a chunked body"),
            ("GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n", .other, "Expect"),
            ("GET / HTTP/1.1\r\nUpgrade: h2c\r\n\r\n", .other, "Upgrade"),
            ("POST / HTTP/1.1\r\n\r\n", .other, "another method"),
            ("get / HTTP/1.1\r\n\r\n", .other, "a method in lower case"),
            ("GET / HTTP/1.0\r\n\r\n", .other, "HTTP/1.0"),
            ("GET http://x/ HTTP/1.1\r\n\r\n", .other, "an absolute target"),
            ("GET /a b HTTP/1.1\r\n\r\n", .other, "a space in the target"),
            ("GET / HTTP/1.1\nHost: x\r\n\r\n", .other, "a bare LF after the request line"),
            ("GET / HTTP/1.1\r\nHost: x\n\r\n", .other, "a bare LF after a field"),
            ("GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", .other, "a folded line"),
            ("GET / HTTP/1.1\r\nHost: x\ry\r\n\r\n", .other, "a CR inside a value"),
            ("GET / HTTP/1.1\r\nHost: x\u{0}\r\n\r\n", .other, "a NUL inside a value"),
            ("GET / HTTP/1.1\r\nHo st: x\r\n\r\n", .other, "a space in a name"),
            ("GET / HTTP/1.1\r\n: x\r\n\r\n", .other, "an empty name"),
            ("\r\nGET / HTTP/1.1\r\n\r\n", .other, "an empty line first"),
        ]
        for (text, expected, what) in cases {
            let scan = Array(text.utf8).withUnsafeBytes { RequestScan.scan($0) }
            #expect(scan == expected, "\(what)")
        }
        // A head longer than the limit is handed on, whole or not.
        let long = "GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: RequestScan.maximumHead)
        #expect(Array(long.utf8).withUnsafeBytes { RequestScan.scan($0) } == .other)
        #expect(Array((long + "\r\n\r\n").utf8).withUnsafeBytes { RequestScan.scan($0) } == .other)
        let longest = "GET / HTTP/1.1\r\nHost: x\r\nX: " + String(repeating: "a", count: RequestScan.maximumHead - 32) + "\r\n\r\n"
        #expect(Array(longest.utf8).withUnsafeBytes { RequestScan.scan($0) } == .headOnly(length: RequestScan.maximumHead, target: target("/")))
    }

    /// Every proper prefix of a head is incomplete, so a head that comes in pieces is held until
    /// it is whole; a prefix that can be no plain GET or HEAD is handed on at once.
    @Test func aHeadIsIncompleteUntilItsEmptyLine() {
        let head = Array("HEAD /p HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n\r\n".utf8)
        for length in 0..<head.count {
            let scan = Array(head[..<length]).withUnsafeBytes { RequestScan.scan($0) }
            #expect(scan == .incomplete, "\(length) bytes")
        }
        #expect(Array("PU".utf8).withUnsafeBytes { RequestScan.scan($0) } == .other)
    }

    /// No field can split a response written from its wire form: a name that is not a token is
    /// no field, and a CR, LF or other control character in a value is a space by the time the
    /// value is a field's. Where NIO's encoder would change the framing, there is no wire form.
    @Test func aFieldThatWouldSplitTheResponseHasNoWireForm() {
        let good: HTTPFields = [.eTag: "\"e\"\tx"]
        let length: HTTPFields = [.contentLength: "0"]
        let wire = PreparedHits.WireHead(status: .ok, beforeAge: good, afterAge: length)
        #expect(wire.map { String(buffer: $0.head(age: "7")) } == "HTTP/1.1 200 OK\r\nETag: \"e\"\tx\r\nAge: 7\r\nContent-Length: 0\r\n\r\n")
        for name in ["X Y", "", "X:", "X\r\n"] { #expect(HTTPField.Name(name) == nil, "\(name)") }
        for value in ["a\r\nSet-Cookie: b", "a\nb", "a\u{0}", "a\u{7F}"] {
            let bad: HTTPFields = [HTTPField.Name("X")!: value]
            for (before, after) in [(bad, length), (length, bad)] {
                let head = PreparedHits.WireHead(status: .ok, beforeAge: before, afterAge: after).map { String(buffer: $0.head(age: "7")) }
                // Five lines: the status, the two fields, `Age` and the empty one.
                #expect(head?.components(separatedBy: "\r\n").count == 6, "\(value.debugDescription): \(head.debugDescription)")
                #expect(head?.contains("\u{0}") == false && head?.contains("\u{7F}") == false)
            }
        }
        // Where NIO's encoder would change the framing fields, there is no wire form either.
        #expect(PreparedHits.WireHead(status: .noContent, beforeAge: length, afterAge: [:]) == nil)
        #expect(PreparedHits.WireHead(status: .ok, beforeAge: good, afterAge: [:]) == nil)
        #expect(PreparedHits.WireHead(status: .ok, beforeAge: length, afterAge: [.transferEncoding: "chunked"]) == nil)
    }

    /// With the event loop's path off too (`diskcache-server --fast-paths task-only`, for
    /// benchmarks), the connection's task answers every hit, from memory and from disk alike.
    @Test func withTheFastPathsOffTheTaskAnswersEveryHit() async throws {
        let fixture = try await ServerFixture {
            $0.answersFromBytes = false
            $0.answersOnEventLoop = false
        }
        let body = pattern(count: 1000, seed: 3)
        fixture.origin.respond { _ in
            var response = ScriptedResponse(status: 200, [("Cache-Control", "max-age=600")])
            response.body = body
            return response
        }
        #expect(try await fixture.get("/a").header("X-Cache") == "MISS")
        for _ in 0..<5 {
            let reply = try await fixture.get("/a")
            #expect(reply.header("X-Cache") == "HIT" && reply.body == body)
        }
        let statistics = fixture.server.statistics
        #expect(statistics.hits == 5 && statistics.hitsOnEventLoop == 0 && statistics.hitsFromBytes == 0)
        #expect(fixture.origin.requestCount == 1)
        try await fixture.finish()
    }

    /// The same requests to a server answering from bytes and to one that does not get the same
    /// bytes back (but for `Age`): small bodies (written with their head), larger ones (written
    /// after it; below 64 KiB, so that no answer finds the connection unwritable and goes to
    /// the task), HEAD.
    @Test func anAnswerFromBytesIsTheFullPathsAnswerByteForByte() async throws {
        let bodies = ["/small": pattern(count: 1000, seed: 1), "/large": pattern(count: 20_000, seed: 2), "/empty": Data()]
        // One `Date` for both servers' origins, so that both store the same fields.
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let date = formatter.string(from: Date())
        func start(fromBytes: Bool) async throws -> ServerFixture {
            let fixture = try await ServerFixture {
                $0.memoryCapacity = 8 << 20
                $0.answersFromBytes = fromBytes
            }
            fixture.origin.respond { request in
                var response = ScriptedResponse(status: 200, [("Cache-Control", "max-age=600"), ("ETag", "\"\(request.path)\""),
                                                              ("Date", date), ("Content-Type", "application/octet-stream")])
                response.body = bodies[request.path] ?? Data()
                return response
            }
            return fixture
        }
        let requests = ["/small", "/large", "/empty"].flatMap { ["GET \($0)", "HEAD \($0)"] }
        var answers: [[Data]] = []
        for fromBytes in [true, false] {
            let fixture = try await start(fromBytes: fromBytes)
            // A miss stores each (the memory tier takes it once its store ends); a hit then
            // prepares each GET's and HEAD's answer.
            for path in bodies.keys { _ = try await fixture.get(path) }
            for _ in 0..<50 where fixture.server.handler.prepared.usage.entries < requests.count {
                for path in bodies.keys {
                    _ = try await fixture.get(path)
                    _ = try await fixture.send(.HEAD, path)
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(fixture.server.handler.prepared.usage.entries == requests.count)
            let before = fixture.server.statistics
            answers.append(try await exchange(fixture.server.port, requests.map { "\($0) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" }, heads: requests.map { $0.hasPrefix("HEAD") })
                .map(withoutAge))
            let after = fixture.server.statistics
            #expect(after.hitsPrepared - before.hitsPrepared == requests.count)
            #expect(after.hitsFromBytes - before.hitsFromBytes == (fromBytes ? requests.count : 0))
            #expect(after.bytesServed - before.bytesServed == 21_000)
            try await fixture.finish()
        }
        #expect(answers[0].count == requests.count)
        for (request, (fromBytes, fullPath)) in zip(requests, zip(answers[0], answers[1])) {
            #expect(fromBytes == fullPath, "\(request): \(String(decoding: fromBytes.prefix(400), as: UTF8.self)) against \(String(decoding: fullPath.prefix(400), as: UTF8.self))")
        }
        #expect(answers[0][0].suffix(1000) == bodies["/small"]!)
        #expect(answers[0][2].suffix(20_000) == bodies["/large"]!)
    }

    /// Pipelined on one connection, answers from bytes and from NIO's pipeline (misses, a held
    /// origin, conditions, HEAD) come back in the order of the requests; once every request handed
    /// on is answered, the connection is answered from bytes again.
    @Test func pipelinedRequestsComeBackInOrderWhicheverWayEachIsAnswered() async throws {
        let fixture = try await ServerFixture()
        fixture.origin.respond { request in
            let stored = request.path == "/memory"
            return ScriptedResponse(status: 200, [("Cache-Control", stored ? "max-age=600" : "no-store"), ("ETag", "\"m\"")],
                                    body: stored ? "held in memory" : "from the origin \(request.path)")
        }
        for _ in 0..<2 { _ = try await fixture.get("/memory") }
        _ = try await fixture.send(.HEAD, "/memory")
        let requests: [(line: String, fields: String, body: String, status: String)] = [
            ("GET /memory", "", "held in memory", "200"),
            ("GET /slow", "", "from the origin /slow", "200"),
            ("GET /memory", "", "held in memory", "200"),
            ("HEAD /memory", "", "", "200"),
            ("GET /memory", "If-None-Match: \"m\"\r\n", "", "304"),
            ("GET /other", "", "from the origin /other", "200"),
            ("GET /memory", "", "held in memory", "200"),
        ]
        let socket = try await rawConnection(to: fixture.server.port)
        let watchdog = closing(socket, after: .seconds(30))
        defer { watchdog.cancel() }
        let before = fixture.server.statistics.hitsFromBytes
        fixture.origin.hold()
        try await socket.executeThenClose { inbound, outbound in
            var reader = ResponseReader(inbound.makeAsyncIterator())
            try await outbound.write(ByteBuffer(string: requests.map { "\($0.line) HTTP/1.1\r\nHost: 127.0.0.1\r\n\($0.fields)\r\n" }.joined()))
            // The first is answered from bytes at once; the rest wait for the held origin.
            let first = try await reader.next(head: false)
            #expect(first.body == "held in memory")
            try await Task.sleep(for: .milliseconds(200))
            #expect(fixture.server.statistics.hitsFromBytes == before + 1)
            fixture.origin.release()
            for request in requests.dropFirst() {
                let answer = try await reader.next(head: request.line.hasPrefix("HEAD"))
                #expect(answer.status == request.status && answer.body == request.body, "\(request.line) \(request.fields)")
            }
            // Everything handed on is answered: bytes again, even when a request came in pieces.
            #expect(fixture.server.statistics.hitsFromBytes == before + 1)
            for piece in ["GET /mem", "ory HTTP/1.1\r\nHo", "st: 127.0.0.1\r", "\n\r\n"] {
                try await outbound.write(ByteBuffer(string: piece))
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(try await reader.next(head: false).body == "held in memory")
            #expect(fixture.server.statistics.hitsFromBytes == before + 2)
            // A request with a body is handed on with all that follows: answered, in order,
            // by NIO's pipeline from then on.
            try await outbound.write(ByteBuffer(string: "POST /form HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nab"))
            try await Task.sleep(for: .milliseconds(20))
            try await outbound.write(ByteBuffer(string: "cdeGET /memory HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
            #expect(try await reader.next(head: false).body == "from the origin /form")
            #expect(try await reader.next(head: false).body == "held in memory")
            #expect(fixture.server.statistics.hitsFromBytes == before + 2)
        }
        #expect(fixture.origin.requests.last.map { String(decoding: $0.body, as: UTF8.self) } == "abcde")
        try await fixture.finish()
    }

    /// Sends `requests` in one write on a connection of its own and returns each answer whole
    /// (`heads`: which are answers to HEAD, which have no body whatever their `Content-Length`).
    private func exchange(_ port: Int, _ requests: [String], heads: [Bool]) async throws -> [Data] {
        let socket = try await rawConnection(to: port)
        let watchdog = closing(socket, after: .seconds(30))
        defer { watchdog.cancel() }
        return try await socket.executeThenClose { inbound, outbound in
            var reader = ResponseReader(inbound.makeAsyncIterator())
            try await outbound.write(ByteBuffer(string: requests.joined()))
            var answers: [Data] = []
            for head in heads { answers.append(try await reader.next(head: head).bytes) }
            return answers
        }
    }

    /// `answer` without its `Age` field's line.
    private func withoutAge(_ answer: Data) -> Data {
        guard let end = answer.range(of: Data("\r\n\r\n".utf8)) else { return answer }
        let lines = String(decoding: answer[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        return Data(lines.filter { !$0.lowercased().hasPrefix("age:") }.joined(separator: "\r\n").utf8) + answer[end.lowerBound...]
    }
}
#endif

#if Server
import Foundation
import HTTPTestOrigin
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing
import TestSupport
@testable import CacheServer

/// Clients that send what a proxy must not pass on as it came: a body on a GET, a framing the
/// server does not know, a fragment, no `Host`; and origins whose answers must not be stored
/// for everyone (`Set-Cookie`). Each against a real origin on loopback.
struct HostileClientTests {
    /// Writes `request` on a connection of its own and reads until the server closes it (or
    /// `within` passes: then the bytes so far, and `closed` false).
    static func untilClose(_ port: Int, _ request: String, within limit: Duration = .seconds(120)) async throws -> (text: String, closed: Bool) {
        let socket = try await rawConnection(to: port)
        let watchdog = closing(socket, after: limit)
        var received = Data()
        try await socket.executeThenClose { inbound, outbound in
            // A connection refused at once may be closed before the request is written.
            try? await outbound.write(ByteBuffer(string: request))
            do {
                for try await var buffer in inbound { received.append(contentsOf: buffer.readBytes(length: buffer.readableBytes) ?? []) }
            } catch {}
        }
        watchdog.cancel()
        // The watchdog's task ends without an error only when it closed the connection itself.
        let closedByWatchdog = (try? await watchdog.value) != nil
        return (String(decoding: received, as: UTF8.self), !closedByWatchdog)
    }

    /// The status codes of the answers in `text`, in order.
    static func statuses(_ text: String) -> [String] {
        text.components(separatedBy: "\r\n").filter { $0.hasPrefix("HTTP/1.") }.map { String($0.split(separator: " ")[1]) }
    }

    /// A body on a GET is read and dropped, and the origin gets neither it nor its length: with
    /// the length alone, an origin that answers at once reads the next request on the kept-alive
    /// connection as that body, and what it answers for the rest is stored under the next URL.
    @Test func aGETWithABodyReachesTheOriginWithoutItsFraming() async throws {
        let origin = try await RawOrigin()
        let fixture = try await ServerFixture { $0.origin = .init(host: "127.0.0.1", port: origin.port) }
        let body = "GET /evil HTTP/1.1\r\nX: 1"
        let socket = try await rawConnection(to: fixture.server.port)
        let watchdog = closing(socket, after: .seconds(120))
        var answers: [ResponseReader.Answer] = []
        try await socket.executeThenClose { inbound, outbound in
            var reader = ResponseReader(inbound.makeAsyncIterator())
            try await outbound.write(ByteBuffer(string: "GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"))
            answers.append(try await reader.next(head: false))
            try await outbound.write(ByteBuffer(string: "GET /b HTTP/1.1\r\nHost: x\r\n\r\n"))
            answers.append(try await reader.next(head: false))
        }
        watchdog.cancel()
        #expect(answers.map(\.body) == ["GET /a HTTP/1.1", "GET /b HTTP/1.1"])
        let stored = try await fixture.get("/b")
        #expect(stored.text == "GET /b HTTP/1.1")
        #expect(stored.header("X-Cache") == "HIT")
        let heads = origin.heads
        #expect(heads.map(\.target) == ["/a", "/b"])
        #expect(heads.allSatisfy { $0.field("Content-Length") == nil && $0.field("Transfer-Encoding") == nil })
        try await fixture.finish()
        try await origin.stop()
    }

    /// A transfer coding other than `chunked` gets one 501 and a close; the origin never hears
    /// of it (nginx answers 501 too, Varnish 400).
    @Test(arguments: ["xchunked", "identity", "gzip", "gzip, chunked", "chunked, chunked"])
    func anUnknownTransferCodingIsRefusedBeforeTheOrigin(_ coding: String) async throws {
        let origin = try await RawOrigin()
        let fixture = try await ServerFixture { $0.origin = .init(host: "127.0.0.1", port: origin.port) }
        let (text, closed) = try await Self.untilClose(fixture.server.port,
                                                       "POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: \(coding)\r\n\r\n0\r\n\r\nGET /q HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(closed, "\(text)")
        // NIO's parser itself refuses some of these before a head exists: a 400 then.
        #expect(Self.statuses(text) == ["501"] || Self.statuses(text) == ["400"], "\(text)")
        #expect(origin.heads.isEmpty, "\(origin.heads.map(\.target))")
        try await fixture.finish()
        try await origin.stop()
    }

    /// What no request target may carry, and an HTTP/1.1 request without exactly one `Host`,
    /// get one 400 and a close (RFC 9112 §3.2), on the bytes path and NIO's alike; an HTTP/1.0
    /// request may go without `Host`.
    @Test func aFragmentOrAMissingHostGetsA400() async throws {
        let origin = try await RawOrigin()
        let fixture = try await ServerFixture { $0.origin = .init(host: "127.0.0.1", port: origin.port) }
        // Stored first, so that a prepared answer could answer `/a`.
        _ = try await fixture.get("/a")
        _ = try await fixture.get("/a")
        for request in ["GET /a#x HTTP/1.1\r\nHost: x\r\n\r\n", "GET /a HTTP/1.1\r\n\r\n", "GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
                        "POST /a HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "GET /a?b#c HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n"] {
            let (text, closed) = try await Self.untilClose(fixture.server.port, request + "GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(Self.statuses(text) == ["400"], "\(request.debugDescription): \(text)")
            #expect(closed)
        }
        let old = try await Self.untilClose(fixture.server.port, "GET /old HTTP/1.0\r\n\r\n")
        #expect(Self.statuses(old.text) == ["200"])
        #expect(origin.heads.map(\.target) == ["/a", "/old"])
        try await fixture.finish()
        try await origin.stop()
    }

    /// A `Host` line that holds a list (more than one Host, RFC 9112 §3.2) or what is not a
    /// host gets one 400 and a close, as nginx answers, on the bytes path (a prepared answer
    /// for the target exists) and NIO's alike; a host with a port, an IP literal or an empty
    /// value is answered.
    @Test func aHostFieldWithMoreThanOneHostGetsA400() async throws {
        let origin = try await RawOrigin()
        let fixture = try await ServerFixture { $0.origin = .init(host: "127.0.0.1", port: origin.port) }
        _ = try await fixture.get("/a")
        _ = try await fixture.get("/a")
        for host in ["a, b", "a,b", "a b", "a/b", "a@b", ","] {
            for request in ["GET /a HTTP/1.1\r\nHost: \(host)\r\n\r\n", "POST /p HTTP/1.1\r\nHost: \(host)\r\nContent-Length: 1\r\n\r\nx",
                            "GET /a HTTP/1.0\r\nHost: \(host)\r\n\r\n"] {
                let (text, closed) = try await Self.untilClose(fixture.server.port, request + "GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(Self.statuses(text) == ["400"], "\(request.debugDescription): \(text)")
                #expect(closed)
            }
        }
        for host in ["example.com:8080", "[::1]:80", "127.0.0.1", "", "xn--bcher-kva.example"] {
            let (text, _) = try await Self.untilClose(fixture.server.port, "GET /a HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
            #expect(Self.statuses(text) == ["200"], "\(host): \(text)")
        }
        #expect(origin.heads.map(\.target) == ["/a"], "only the first GET reached the origin")
        try await fixture.finish()
        try await origin.stop()
    }

    /// A request that asks to close, or for an `Upgrade` the server does not do, gets its answer
    /// with `Connection: close`, then the close: no stray 400 for what was pipelined behind it,
    /// and no connection left open with its requests dropped.
    @Test(arguments: ["GET /a HTTP/1.0\r\n\r\n", "GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                      "GET /a HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"])
    func aClosingRequestEndsTheConnectionAfterItsAnswer(_ request: String) async throws {
        let origin = try await RawOrigin()
        let fixture = try await ServerFixture { $0.origin = .init(host: "127.0.0.1", port: origin.port) }
        let (text, closed) = try await Self.untilClose(fixture.server.port, request + "GET /b HTTP/1.1\r\nHost: x\r\n\r\nGARBAGE\r\n\r\n")
        #expect(Self.statuses(text) == ["200"], "\(text)")
        #expect(text.lowercased().contains("connection: close"))
        #expect(closed)
        try await fixture.finish()
        try await origin.stop()
    }

    /// `M-SEARCH` reaches the origin spelled as the client spelled it (NIO calls it `MSEARCH`).
    @Test func aMethodWithAHyphenReachesTheOriginAsSent() async throws {
        let origin = try await RawOrigin()
        let fixture = try await ServerFixture { $0.origin = .init(host: "127.0.0.1", port: origin.port) }
        let (text, _) = try await Self.untilClose(fixture.server.port, "M-SEARCH /devices HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(Self.statuses(text) == ["200"], "\(text)")
        #expect(origin.heads.map(\.method) == ["M-SEARCH"])
        try await fixture.finish()
        try await origin.stop()
    }

    /// A response with `Set-Cookie` goes to the client that asked and is not stored (nginx's and
    /// Varnish's default); with ``ServerConfiguration/SetCookiePolicy/storeWithoutField`` it
    /// is stored without the field, and later clients never see the cookie.
    @Test(arguments: ServerConfiguration.SetCookiePolicy.allCases)
    func aCookieIsNeverReplayedToAnotherClient(_ policy: ServerConfiguration.SetCookiePolicy) async throws {
        let origin = try await RawOrigin { _ in [("Cache-Control", "max-age=3600"), ("Set-Cookie", "session=alice")] }
        let fixture = try await ServerFixture {
            $0.origin = .init(host: "127.0.0.1", port: origin.port)
            $0.setCookie = policy
        }
        let first = try await fixture.get("/c")
        #expect(first.header("Set-Cookie") == "session=alice")
        let second = try await fixture.get("/c")
        #expect(second.header("Set-Cookie") == nil || policy == .doNotStore)
        switch policy {
        case .doNotStore:
            #expect(second.header("X-Cache") != "HIT")
            #expect(origin.heads.count == 2)
        case .storeWithoutField:
            #expect(second.header("X-Cache") == "HIT")
            #expect(second.header("Set-Cookie") == nil)
            #expect(origin.heads.count == 1)
        }
        try await fixture.finish()
        try await origin.stop()
    }

    /// The purge token's scheme is read in any case; a wrong token of the right length fails.
    @Test func thePurgeTokenSchemeIsCaseInsensitive() async throws {
        let fixture = try await ServerFixture()
        for (authorization, status) in [("bearer token", 404), ("BEARER token", 404), ("Bearer tokem", 401), ("Bearer toke", 401), ("token", 401)] {
            let reply = try await fixture.send(.RAW(value: "PURGE"), "/nothing", headers: [("Authorization", authorization)])
            #expect(reply.status == status, "\(authorization)")
        }
        #expect(ProxyHandler.sameBytes(Array("abc".utf8), Array("abc".utf8)))
        #expect(!ProxyHandler.sameBytes(Array("abc".utf8), Array("abd".utf8)))
        #expect(!ProxyHandler.sameBytes(Array("abc".utf8), Array("abcd".utf8)))
        try await fixture.finish()
    }

    /// With an admin address, the node's own endpoints answer there only (the client port sends
    /// their paths to the origin); on the client port, metrics can be made to need the token.
    @Test func theNodesOwnEndpointsCanLeaveTheClientPort() async throws {
        let origin = try await RawOrigin { _ in [("Cache-Control", "no-store")] }
        let fixture = try await ServerFixture {
            $0.origin = .init(host: "127.0.0.1", port: origin.port)
            $0.adminHost = "127.0.0.1"
        }
        let health = try await fixture.get("/_cache/health")
        #expect(health.text == "GET /_cache/health HTTP/1.1", "the client port forwards it")
        let adminPort = try #require(fixture.server.adminPort)
        let admin = OriginClient(origin: .init(host: "127.0.0.1", port: adminPort), group: MultiThreadedEventLoopGroup.singleton,
                                 connectTimeout: .seconds(5), readTimeout: .seconds(30))
        func adminGet(_ path: String) async throws -> Int {
            let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: ["Host": "admin"])
            return try await admin.exchange(head, sendBody: { _ in }) { response, body in
                while try await body.next() != nil {}
                return Int(response.status.code)
            }
        }
        #expect(try await adminGet("/_cache/health") == 200)
        #expect(try await adminGet("/_cache/metrics") == 200)
        #expect(try await adminGet("/anything") == 404)
        try await fixture.finish()

        let guarded = try await ServerFixture { $0.metricsNeedToken = true }
        #expect(try await guarded.get("/_cache/metrics").status == 401)
        #expect(try await guarded.get("/_cache/metrics", headers: [("Authorization", "Bearer token")]).status == 200)
        #expect(try await guarded.get("/_cache/health").status == 200)
        try await guarded.finish()
        try await origin.stop()
    }
}

/// Every resource a client can hold is bounded in time and number.
struct ClientLimitsTests {
    static func shortTimeouts(_ configuration: inout ServerConfiguration) {
        configuration.timeouts.header = .seconds(1)
        configuration.timeouts.body = .seconds(1)
        configuration.timeouts.idle = .seconds(1)
        configuration.timeouts.send = .seconds(1)
    }

    /// A head sent a line at a time, each well within the timeout, is still cut off once the
    /// header timeout from its first byte has passed (nginx's `client_header_timeout`).
    @Test func aTrickledHeadIsCutOff() async throws {
        let fixture = try await ServerFixture(configure: Self.shortTimeouts)
        let port = fixture.server.port
        // A line every 250 ms, for up to 15 s.
        let sentLines = try await onOwnThread {
            let socket = try PlainSocket(port: port)
            var lines = 0
            socket.send("GET / HTTP/1.1\r\n")
            while lines < 60, !socket.isClosedByPeer {
                usleep(250_000)
                guard socket.send("X-\(lines): \(lines)\r\n") else { break }
                lines += 1
            }
            return lines
        }
        #expect(sentLines < 60, "the server closed the connection before the client gave up")
        #expect(fixture.server.statistics.connectionsTimedOut >= 1)
        try await fixture.finish()
    }

    /// A kept-alive connection with nothing under way is closed after the idle timeout, and a
    /// body that stops coming after the body timeout.
    @Test(arguments: ["GET /a HTTP/1.1\r\nHost: x\r\n\r\n", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc"])
    func anIdleConnectionOrAStalledBodyIsClosed(_ request: String) async throws {
        let fixture = try await ServerFixture(configure: Self.shortTimeouts)
        fixture.origin.respond { _ in ScriptedResponse(status: 200, [("Cache-Control", "max-age=60")], body: "a") }
        let (_, closed) = try await HostileClientTests.untilClose(fixture.server.port, request, within: .seconds(120))
        #expect(closed)
        #expect(fixture.server.statistics.connectionsTimedOut >= 1)
        try await fixture.finish()
    }

    /// A body that stops is cut off by the body timeout counted from the head's end, however
    /// long the header timeout is (here 1 s against 600 s): the connection closes long before
    /// the header timeout could have closed it.
    @Test func aStalledBodyIsClosedByTheBodyTimeoutNotTheHeaderTimeout() async throws {
        let fixture = try await ServerFixture { $0.timeouts.body = .seconds(1) }
        fixture.origin.respond { _ in ScriptedResponse(status: 200, body: "a") }
        let (text, closed) = try await HostileClientTests.untilClose(fixture.server.port, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabcde",
                                                                     within: .seconds(120))
        #expect(closed, "still open after 120 s: \(text)")
        #expect(fixture.server.statistics.connectionsTimedOut == 1)
        #expect(fixture.origin.requests.isEmpty)
        try await fixture.finish()
    }

    /// Past the connection limit a client gets a 503 and a close; the connections open go on.
    @Test func connectionsPastTheLimitGetA503() async throws {
        let fixture = try await ServerFixture { $0.maximumConnections = 2 }
        fixture.origin.respond { _ in ScriptedResponse(status: 200, [("Cache-Control", "max-age=60")], body: "a") }
        // Both accepted before the third: each answered once, then held open.
        let port = fixture.server.port
        let held = try await onOwnThread { try [PlainSocket(port: port), PlainSocket(port: port)] }
        for socket in held {
            let answer = try await onOwnThread {
                socket.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
                return socket.answer()
            }
            #expect(answer?.hasPrefix("HTTP/1.1 200") == true)
        }
        let (text, closed) = try await HostileClientTests.untilClose(fixture.server.port, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(HostileClientTests.statuses(text) == ["503"])
        #expect(closed)
        #expect(fixture.server.statistics.connectionsRefused == 1)
        // The connections held still answer.
        let again = try await onOwnThread {
            held[0].send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
            return held[0].answer()
        }
        #expect(again?.hasPrefix("HTTP/1.1 200") == true)
        try await fixture.finish()
    }
}
#endif

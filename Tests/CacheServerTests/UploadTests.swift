#if Server
import Foundation
import HTTPTestOrigin
import NIOCore
import Testing
@testable import CacheServer

/// Requests with bodies on their way to the origin: a client that waits for `100 Continue`
/// before it sends one, and an origin that answers before it has read one. Each over loopback,
/// the client writing raw bytes.
struct UploadTests {
    /// A client that asks for `100 Continue` gets it before it has sent a byte of its body (it
    /// sends none until then), then the origin's answer once the body went through; the origin
    /// gets the body whole and no `Expect` (the node answered it, as nginx does).
    @Test func aClientThatExpects100ContinueGetsItBeforeSendingItsBody() async throws {
        let fixture = try await ServerFixture()
        fixture.origin.respond { request in ScriptedResponse(status: 201, body: "got \(request.body.count) bytes") }
        let body = String(repeating: "b", count: 100_000)
        let socket = try await rawConnection(to: fixture.server.port)
        let watchdog = closing(socket, after: .seconds(60))
        var answers: [ResponseReader.Answer] = []
        try await socket.executeThenClose { inbound, outbound in
            var reader = ResponseReader(inbound.makeAsyncIterator())
            try await outbound.write(ByteBuffer(string: "PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\n"
                                                    + "Expect: 100-continue\r\n\r\n"))
            // Nothing of the body is sent before an answer comes (a client waits at most a second
            // or so, then sends it anyway; this one waits until the watchdog closes).
            answers.append(try await reader.next(head: false))
            try await outbound.write(ByteBuffer(string: body))
            answers.append(try await reader.next(head: false))
            // The connection is kept alive: more requests are answered on it, one without
            // `Expect`, one with it and a chunked body.
            try await outbound.write(ByteBuffer(string: "PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"))
            answers.append(try await reader.next(head: false))
            try await outbound.write(ByteBuffer(string: "PUT /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                                                    + "Expect: 100-continue\r\n\r\n"))
            answers.append(try await reader.next(head: false))
            try await outbound.write(ByteBuffer(string: "5\r\nhello\r\n0\r\n\r\n"))
            answers.append(try await reader.next(head: false))
        }
        watchdog.cancel()
        #expect(answers.map(\.status) == ["100", "201", "201", "100", "201"])
        #expect(answers.map(\.body) == ["", "got 100000 bytes", "got 3 bytes", "", "got 5 bytes"])
        let requests = fixture.origin.requests
        #expect(requests.map(\.body.count) == [100_000, 3, 5])
        #expect(requests.allSatisfy { request in !request.headers.contains { $0.name.lowercased() == "expect" } })
        try await fixture.finish()
    }

    /// No `100 Continue` where none may or need go: to a client of HTTP/1.0 (RFC 9110 §15.2),
    /// or for a request without a body.
    @Test(arguments: ["POST /a HTTP/1.0\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\nabc",
                      "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"])
    func noContinueWithoutABodyOrToHTTP10(_ request: String) async throws {
        let fixture = try await ServerFixture()
        fixture.origin.respond { _ in ScriptedResponse(status: 200, body: "ok") }
        let (text, closed) = try await HostileClientTests.untilClose(fixture.server.port, request, within: .seconds(60))
        #expect(HostileClientTests.statuses(text) == ["200"], "\(text)")
        #expect(closed)
        try await fixture.finish()
    }

    /// A request without a body, to an origin that answers as soon as it has the head, is
    /// not taken for one answered before its body: no `Connection: close`, and the connection
    /// answers the next request.
    @Test func aRequestWithoutABodyKeepsItsConnection() async throws {
        let origin = try await RawOrigin { _ in [] }
        let fixture = try await ServerFixture { $0.origin = .init(host: "127.0.0.1", port: origin.port) }
        let socket = try await rawConnection(to: fixture.server.port)
        let watchdog = closing(socket, after: .seconds(60))
        var answers: [ResponseReader.Answer] = []
        try await socket.executeThenClose { inbound, outbound in
            var reader = ResponseReader(inbound.makeAsyncIterator())
            for _ in 0..<20 {
                for request in ["DELETE /a HTTP/1.1\r\nHost: x\r\n\r\n", "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"] {
                    try await outbound.write(ByteBuffer(string: request))
                    answers.append(try await reader.next(head: false))
                }
            }
        }
        watchdog.cancel()
        #expect(answers.count == 40 && answers.allSatisfy { $0.status == "200" && $0.field("Connection") == nil })
        try await fixture.finish()
        try await origin.stop()
    }

    /// An origin that answers before it reads the body (a 413 here) and then reads nothing
    /// more: the client gets that answer, not a 502, whether or not it waited for `100
    /// Continue`; the answer says `Connection: close`, the rest of the body is read and
    /// dropped, and the connection closes. The body is larger than the kernel's buffers hold,
    /// so a node that sent it whole before reading would never read the answer.
    @Test(arguments: [true, false])
    func anOriginsEarlyAnswerReachesTheClient(expectsContinue: Bool) async throws {
        let origin = try await RawOrigin(status: "413 Content Too Large", readsBodies: false) { _ in [] }
        let fixture = try await ServerFixture { $0.origin = .init(host: "127.0.0.1", port: origin.port) }
        let pieces = 256, piece = 64 * 1024
        let socket = try await rawConnection(to: fixture.server.port)
        let watchdog = closing(socket, after: .seconds(60))
        var answers: [ResponseReader.Answer] = []
        var closedAfter = false
        try await socket.executeThenClose { inbound, outbound in
            var reader = ResponseReader(inbound.makeAsyncIterator())
            try await outbound.write(ByteBuffer(string: "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: \(pieces * piece)\r\n"
                                                    + (expectsContinue ? "Expect: 100-continue\r\n" : "") + "\r\n"))
            if expectsContinue { answers.append(try await reader.next(head: false)) }
            // Sent as a client that reads while it sends does, the answer read meanwhile.
            let sender = Task {
                for _ in 0..<pieces { try await outbound.write(ByteBuffer(repeating: UInt8(ascii: "z"), count: piece)) }
            }
            answers.append(try await reader.next(head: false))
            _ = try? await sender.value
            do {
                _ = try await reader.next(head: false)
            } catch is ResponseReader.Ended {
                closedAfter = true
            } catch {}
        }
        watchdog.cancel()
        // The watchdog's task ends without an error only when it closed the connection itself.
        let closedByWatchdog = (try? await watchdog.value) != nil
        #expect(answers.map(\.status) == (expectsContinue ? ["100", "413"] : ["413"]))
        #expect(answers.last?.body == "POST /upload HTTP/1.1")
        #expect(answers.last?.field("Connection") == "close")
        #expect(closedAfter && !closedByWatchdog, "the server closed the connection after the answer")
        #expect(origin.heads.count == 1 && origin.heads.first?.field("Expect") == nil)
        try await fixture.finish()
        try await origin.stop()
    }

    /// After an origin's early answer the rest of the body is read and dropped for at most the
    /// lingering time from the answer's end (30 s, nginx's `lingering_time`; 1 s here), however
    /// steadily it comes: a client that sends a byte every 100 ms, well within the body
    /// timeout, has its connection closed about a second after its answer, not once the body
    /// ends (which would take over a day).
    @Test func theRestOfABodyIsReadForTheLingeringTimeAfterAnEarlyAnswer() async throws {
        let origin = try await RawOrigin(status: "413 Content Too Large", readsBodies: false) { _ in [] }
        let fixture = try await ServerFixture {
            $0.origin = .init(host: "127.0.0.1", port: origin.port)
            $0.timeouts.lingering = .seconds(1)
        }
        let socket = try await rawConnection(to: fixture.server.port)
        // Only a server that never stops reading the body meets the watchdog: the body would
        // take over a day. No bound on the time is asserted but that one, far past the
        // lingering second, so that a loaded machine's delays cannot fail the test.
        let watchdog = closing(socket, after: .seconds(60))
        var answer: ResponseReader.Answer?
        var closedAfter: Duration?
        try await socket.executeThenClose { inbound, outbound in
            var reader = ResponseReader(inbound.makeAsyncIterator())
            // Timed from before the request is sent: the server answers, and so starts its
            // lingering time, after that, however late a loaded machine lets us read the answer.
            let sent = ContinuousClock.now
            try await outbound.write(ByteBuffer(string: "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n"))
            let sender = Task {
                while !Task.isCancelled {
                    try await outbound.write(ByteBuffer(string: "z"))
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            answer = try await reader.next(head: false)
            // The close ends the read, as the connection's end or (the client still sending)
            // as a reset.
            _ = try? await reader.next(head: false)
            closedAfter = .now - sent
            sender.cancel()
            _ = try? await sender.value
        }
        watchdog.cancel()
        let closedByWatchdog = (try? await watchdog.value) != nil
        #expect(answer?.status == "413" && answer?.field("Connection") == "close")
        #expect(!closedByWatchdog, "the server closed the connection while the body still came")
        // Not before the lingering time (1 s, less a margin for the clocks' granularity).
        #expect(closedAfter.map { $0 >= .milliseconds(500) } == true, "closed \(String(describing: closedAfter)) after the request was sent")
        try await fixture.finish()
        try await origin.stop()
    }
}
#endif

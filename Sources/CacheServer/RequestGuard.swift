#if Server
import NIOCore
import NIOHTTP1

/// What the server refuses before any other handler reads a request, and how a connection that
/// must close ends (RFC 9112). It sits after NIO's pipelining handler, so it sees one request
/// at a time, and takes the place of NIO's `HTTPServerProtocolErrorHandler`.
///
/// - A request the server cannot frame or must not forward is answered here and the connection
///   closes after the answer, without reading what follows (nginx does the same):
///   a `Transfer-Encoding` other than `chunked` gets 501 (nginx 501, Varnish 400); an HTTP/1.1
///   request without exactly one `Host`, or an HTTP/1.0 one with several, gets 400
///   (RFC 9112 §3.2), and so does one whose `Host` line holds a list (`Host: a, b`: more than
///   one value) or what is not a host (``isHost(_:)``); a target with a fragment (`#`, which
///   no request target may carry, and which the cache key and the forwarded target would read
///   differently) gets 400.
/// - Bytes NIO's parser cannot read get 400 when no answer is under way (as NIO's own handler
///   does), then the connection closes once the answer under way, if any, has ended.
/// - A request that asks to close (HTTP/1.0 without `keep-alive`, `Connection: close`) or asks
///   for an `Upgrade` (which the server does not do: RFC 9110 §7.8 lets it ignore the field)
///   is answered with `Connection: close`, and nothing after it is read: a pipelined request
///   behind it gets no stray 400, and a client sees the close and sends it again. When that
///   answer ends before the request's body has, the connection's task closes the connection
///   once it has read the rest of the body (a close with unread bytes resets the connection,
///   and the client could lose its answer).
final class RequestGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// A response has begun and not ended.
    private var responding = false
    /// The connection closes once the response under way (or the one being made) has ended.
    private var closing = false
    /// Nothing more is read: a request was refused, or the parser failed.
    private var stopped = false
    /// A request's head went on and its end has not.
    private var readingRequest = false
    /// Told where each request's head and end are.
    private let clock: ClientTimeouts.Clock

    init(clock: ClientTimeouts.Clock) { self.clock = clock }

    /// Why a request head is refused: the status and a line of text for the client; nil when
    /// it may go on.
    static func refusal(of head: HTTPRequestHead) -> (HTTPResponseStatus, String)? {
        let codings = head.headers[canonicalForm: "Transfer-Encoding"]
        if !codings.isEmpty, codings.count != 1 || codings[0].lowercased() != "chunked" {
            return (.notImplemented, "Only the chunked transfer coding is accepted")
        }
        let hosts = head.headers["Host"]
        if hosts.count > 1 || (hosts.isEmpty && head.version != .http1_0 && head.version != .http0_9) {
            return (.badRequest, "An HTTP/1.1 request needs exactly one Host field")
        }
        if let host = hosts.first, !isHost(host.utf8) {
            return (.badRequest, "The Host field must hold one host")
        }
        if head.uri.utf8.contains(UInt8(ascii: "#")) {
            return (.badRequest, "A request target cannot carry a fragment")
        }
        return nil
    }

    /// Whether a `Host` value (without the spaces and tabs around it, which are not part of
    /// it) is one host: `uri-host [":" port]` (RFC 9110 §7.2, RFC 3986 §3.2.2), or empty. A
    /// comma makes it a list, more than one Host (RFC 9112 §3.2 answers 400, as nginx does);
    /// a space, a `/`, an `@`, a control or non-ASCII byte makes it no host at all. Read by
    /// ``RequestScan`` too, so the bytes path refuses what this path does.
    static func isHost<Bytes: BidirectionalCollection>(_ value: Bytes) -> Bool where Bytes.Element == UInt8 {
        var bytes = value[...]
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes = bytes.dropFirst() }
        while let last = bytes.last, last == 0x20 || last == 0x09 { bytes = bytes.dropLast() }
        return bytes.allSatisfy { hostBytes[Int($0)] }
    }

    /// The bytes of `uri-host [":" port]`: letters, digits, the rest of unreserved, `%` of
    /// pct-encoded, sub-delims but the comma, the port's colon, an IP literal's brackets.
    private static let hostBytes: [Bool] = (0..<256).map { byte in
        let allowed = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~%!$&'()*+;=:[]".utf8)
        return allowed.contains(UInt8(byte))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !stopped else { return }
        guard case .head(var head) = unwrapInboundIn(data) else {
            if case .end = unwrapInboundIn(data) {
                readingRequest = false
                clock.requestEnded()
            }
            context.fireChannelRead(data)
            return
        }
        clock.headEnded()
        if let (status, text) = Self.refusal(of: head) {
            stopped = true
            answer(context, status, text)
            return
        }
        if head.headers.contains(name: "Upgrade") { head.headers.add(name: "Connection", value: "close") }
        if !head.isKeepAlive { closing = true }
        readingRequest = true
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard error is HTTPParserError || error is ByteToMessageDecoderError else {
            context.fireErrorCaught(error)
            return
        }
        // Not passed on: the connection's task finishes the answer under way, if any.
        guard !stopped else { return }
        stopped = true
        if closing || responding {
            closing = true
        } else {
            answer(context, .badRequest, "The request cannot be read")
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head) where !(100..<200).contains(head.status.code):
            responding = true
            if closing, !head.headers[canonicalForm: "Connection"].contains(where: { $0.lowercased() == "close" }) {
                head.headers.add(name: "Connection", value: "close")
                context.write(wrapOutboundOut(.head(head)), promise: promise)
                return
            }
        case .end:
            responding = false
            // With the request's body still coming, the connection's task reads it, then closes.
            if closing, stopped || !readingRequest {
                let written = context.eventLoop.makePromise(of: Void.self)
                written.futureResult.whenComplete { [channel = context.channel] result in
                    promise?.completeWith(result)
                    channel.close(promise: nil)
                }
                context.write(data, promise: written)
                return
            }
        default:
            break
        }
        context.write(data, promise: promise)
    }

    /// Answers `status` with `text`, then closes.
    private func answer(_ context: ChannelHandlerContext, _ status: HTTPResponseStatus, _ text: String) {
        closing = true
        var body = context.channel.allocator.buffer(capacity: text.utf8.count + 1)
        body.writeString(text + "\n")
        let headers = HTTPHeaders([("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", String(body.readableBytes)),
                                   ("Cache-Control", "no-store")])
        write(context: context, data: wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        write(context: context, data: wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        write(context: context, data: wrapOutboundOut(.end(nil)), promise: nil)
        context.flush()
    }
}
#endif

import NIOCore
import NIOHTTP1
import NIOPosix

/// Exchanges with the origin: ``exchange(_:sendBody:receive:)`` on a connection of its own,
/// ``exchangeReusing(_:receive:)`` (GET and HEAD) on a kept-alive one when there is one.
struct OriginClient: Sendable {
    let origin: ServerConfiguration.Origin
    let group: any EventLoopGroup
    let connectTimeout: Duration
    let readTimeout: Duration
    /// Connections whose last exchange ended cleanly, waiting for the next.
    let pool = OriginPool()

    typealias Connection = NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>
    typealias Parts = NIOAsyncChannelInboundStream<HTTPClientResponsePart>.AsyncIterator
    typealias Writer = NIOAsyncChannelOutboundWriter<HTTPClientRequestPart>

    /// Connects, sends `head` and the body `sendBody` writes, and hands the response head and
    /// a reader of its body to `receive`; the connection is closed when `receive` returns.
    ///
    /// Interim (1xx) responses before the final one go to `informational`.
    func exchange<Result>(
        _ head: HTTPRequestHead,
        sendBody: (Writer) async throws -> Void,
        informational: (HTTPResponseHead) async throws -> Void = { _ in },
        receive: (HTTPResponseHead, inout ResponseBody) async throws -> Result
    ) async throws -> Result {
        let connection = try await connect()
        return try await connection.executeThenClose { inbound, outbound in
            try await outbound.write(.head(head))
            try await sendBody(outbound)
            try await outbound.write(.end(nil))
            var parts = inbound.makeAsyncIterator()
            while let part = try await parts.next() {
                guard case .head(let responseHead) = part else { continue }
                if responseHead.isInterim {
                    try await informational(responseHead)
                    continue
                }
                var body = ResponseBody(parts: parts)
                return try await receive(responseHead, &body)
            }
            throw OriginError.closedEarly("\(origin) closed the connection before answering")
        }
    }

    /// ``exchange(_:sendBody:receive:)`` of a request without a body, on an idle kept-alive
    /// connection when the pool has one (then, if that connection turns out closed before any
    /// answer came, once more on a new one), else on a new one, which goes back to the pool when
    /// the response was read to its end and the origin keeps the connection open.
    func exchangeReusing<Result: Sendable>(
        _ head: HTTPRequestHead,
        informational: @escaping @Sendable (HTTPResponseHead) async throws -> Void = { _ in },
        receive: @escaping @Sendable (HTTPResponseHead, inout ResponseBody) async throws -> Result
    ) async throws -> Result {
        if let idle = pool.take() {
            switch try await run(head, on: idle, informational: informational, receive: receive) {
            case .answered(let result): return result
            case .notAnswered: break  // the origin closed it while it was idle
            }
        }
        let fresh = PooledConnection(try await connect(), pool: pool)
        switch try await run(head, on: fresh, informational: informational, receive: receive) {
        case .answered(let result): return result
        case .notAnswered: throw OriginError.closedEarly("\(origin) closed the connection before answering")
        }
    }

    private enum Outcome<Result> {
        case answered(Result)
        case notAnswered
    }

    private func run<Result: Sendable>(
        _ head: HTTPRequestHead, on connection: PooledConnection,
        informational: @escaping @Sendable (HTTPResponseHead) async throws -> Void,
        receive: @escaping @Sendable (HTTPResponseHead, inout ResponseBody) async throws -> Result
    ) async throws -> Outcome<Result> {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Outcome<Result>, any Error>) in
            let accepted = connection.submit { parts, writer in
                var responseHead: HTTPResponseHead?
                var interim = false
                do {
                    try await writer.write(contentsOf: [.head(head), .end(nil)])
                    while responseHead == nil, let part = try await parts.next() {
                        guard case .head(let received) = part else { continue }
                        if received.isInterim {
                            interim = true
                            try await informational(received)
                        } else {
                            responseHead = received
                        }
                    }
                } catch {
                    // Nothing was received (or only interim responses, already passed on): the
                    // request may go again on another connection only in the first case, and
                    // only when the connection was found closed. An origin that stayed silent
                    // for the read timeout is not asked again.
                    if interim || error is OriginError {
                        continuation.resume(throwing: error)
                    } else {
                        continuation.resume(returning: .notAnswered)
                    }
                    return false
                }
                guard let responseHead else {
                    // Closed with no final response: again on another connection only if
                    // nothing (not even an interim response) was passed on.
                    if interim {
                        continuation.resume(throwing: OriginError.closedEarly("\(origin) closed the connection after an interim response"))
                    } else {
                        continuation.resume(returning: .notAnswered)
                    }
                    return false
                }
                var body = ResponseBody(parts: parts)
                do {
                    let result = try await receive(responseHead, &body)
                    parts = body.parts
                    // Reusable when the body was read to its end and neither side said close.
                    let reusable = body.isComplete && responseHead.isKeepAlive && head.isKeepAlive
                    continuation.resume(returning: .answered(result))
                    return reusable
                } catch {
                    continuation.resume(throwing: error)
                    return false
                }
            }
            if !accepted { continuation.resume(returning: .notAnswered) }
        }
    }

    private func connect() async throws -> Connection {
        do {
            let bootstrap = ClientBootstrap(group: group)
                .connectTimeout(TimeAmount(connectTimeout))
            let initializer: @Sendable (any Channel) -> EventLoopFuture<Connection> = { [readTimeout] channel in
                channel.eventLoop.makeCompletedFuture {
                    // `addHTTPClientHandlers()`, but with interim (1xx) responses passed up, not dropped.
                    try channel.pipeline.syncOperations.addHandlers([
                        HTTPRequestEncoder(),
                        ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .dropBytes, informationalResponseStrategy: .forward)),
                        NIOHTTPRequestHeadersValidator(),
                    ])
                    try channel.pipeline.syncOperations.addHandler(CloseWhenIdle(origin: origin, timeout: readTimeout))
                    return try Connection(wrappingChannelSynchronously: channel)
                }
            }
            // An address given as an IP literal is connected to directly, without the resolver.
            if let address = try? SocketAddress(ipAddress: origin.host, port: origin.port) {
                return try await bootstrap.connect(to: address, channelInitializer: initializer)
            }
            return try await bootstrap.connect(host: origin.host, port: origin.port, channelInitializer: initializer)
        } catch {
            throw OriginError.unreachable("\(origin): \(error)")
        }
    }

    /// The body of an origin's response, as it arrives.
    struct ResponseBody {
        fileprivate var parts: Parts
        private(set) var isComplete = false

        /// The next piece; nil at the end. Throws when the connection ends before the body does.
        mutating func next() async throws -> ByteBuffer? {
            guard !isComplete else { return nil }
            while let part = try await parts.next() {
                switch part {
                case .body(let buffer): return buffer
                case .end: isComplete = true; return nil
                case .head: continue
                }
            }
            throw OriginError.closedEarly("the origin closed the connection part way through a body")
        }
    }
}

extension HTTPResponseHead {
    /// An interim response (RFC 9110 §15.2): 1xx but 101, which ends HTTP/1.1.
    var isInterim: Bool { (100..<200).contains(status.code) && status.code != 101 }
}

#if Server
import NIOCore
import NIOHTTP1
import NIOPosix

/// Exchanges with the origin: ``exchange(_:sendBody:answer:)`` on a connection of its own,
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

    /// Connects, sends `head`, then writes the request's body and reads the answer at once: the
    /// body `sendBody` writes in the calling task, while `answer`, in a task of its own, reads
    /// the response (``ResponseBody/head(informational:)``, then its body). An origin that answers
    /// before it has read the whole body (a 413, a 401) is heard as it answers, not after the
    /// body. Once `answer` has returned (or thrown) the connection is closed, so that a write of
    /// `sendBody`'s the origin no longer takes fails instead of waiting; the result is
    /// `answer`'s, once `sendBody` has returned too. When `sendBody` throws, the answer's task is
    /// cancelled and that error thrown.
    func exchange<Result: Sendable>(
        _ head: HTTPRequestHead,
        sendBody: (Writer) async throws -> Void,
        answer: @escaping @Sendable (inout ResponseBody) async throws -> Result
    ) async throws -> Result {
        let connection = try await connect()
        return try await connection.executeThenClose { inbound, outbound in
            try await outbound.write(.head(head))
            return try await withThrowingTaskGroup(of: Result.self) { group in
                let channel = connection.channel
                group.addTask {
                    var body = ResponseBody(parts: inbound.makeAsyncIterator())
                    do {
                        let result = try await answer(&body)
                        try? await channel.close()
                        return result
                    } catch {
                        try? await channel.close()
                        throw error
                    }
                }
                do {
                    try await sendBody(outbound)
                    // Not taken when the origin closed the connection before the body's end:
                    // the answer (or its absence) says what happened.
                    try? await outbound.write(.end(nil))
                } catch {
                    group.cancelAll()
                    throw error
                }
                guard let result = try await group.next() else { throw CancellationError() }
                return result
            }
        }
    }

    /// ``exchange(_:sendBody:answer:)`` with the answer read for `receive`: interim (1xx)
    /// responses before the final one go to `informational`, the final head and a reader of its
    /// body to `receive`.
    func exchange<Result: Sendable>(
        _ head: HTTPRequestHead,
        sendBody: (Writer) async throws -> Void,
        informational: @escaping @Sendable (HTTPResponseHead) async throws -> Void = { _ in },
        receive: @escaping @Sendable (HTTPResponseHead, inout ResponseBody) async throws -> Result
    ) async throws -> Result {
        try await exchange(head, sendBody: sendBody) { body in
            let responseHead = try await body.head(informational: informational)
            return try await receive(responseHead, &body)
        }
    }

    /// ``exchange(_:sendBody:informational:receive:)`` of a request without a body, on an idle kept-alive
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

    /// An origin's response as it arrives: its head (once, first, for a response read by
    /// ``exchange(_:sendBody:answer:)``), then its body.
    struct ResponseBody {
        fileprivate var parts: Parts
        private(set) var isComplete = false

        /// The final response's head; interim (1xx) responses before it go to `informational`.
        /// Throws when the connection ends first.
        mutating func head(informational: (HTTPResponseHead) async throws -> Void) async throws -> HTTPResponseHead {
            while let part = try await parts.next() {
                guard case .head(let responseHead) = part else { continue }
                if responseHead.isInterim {
                    try await informational(responseHead)
                    continue
                }
                return responseHead
            }
            throw OriginError.closedEarly("the origin closed the connection before answering")
        }

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
#endif

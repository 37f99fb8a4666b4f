import DiskCacheLocking
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

/// Why the origin gave no usable answer.
enum OriginError: Error, CustomStringConvertible {
    case unreachable(String)
    case closedEarly(String)
    /// The origin sent nothing for the read timeout.
    case timedOut(String)

    var description: String {
        switch self {
        case .unreachable(let detail): "cannot reach the origin \(detail)"
        case .closedEarly(let detail), .timedOut(let detail): detail
        }
    }
}

/// Closes an origin connection on which nothing was sent or received for the read timeout.
/// While a request on it waits for its answer, whoever reads the connection is told so first
/// (``OriginError/timedOut(_:)``): a silent origin is not mistaken for one that closed a
/// kept-alive connection while it was idle, which a request may be sent again for. An idle
/// connection in the pool is closed quietly.
///
/// The clock restarts with every piece read, every piece of a request written and every read
/// asked for, so a request sent on a connection that sat idle in the pool gets the whole
/// timeout (NIO's `IdleStateHandler` counts reads only: such a request could time out at
/// once). While no read is asked for (the client being answered reads slowly, so the body
/// waits), the origin is not the one keeping quiet and the clock does not run out.
private final class CloseWhenIdle: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias InboundOut = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    private let origin: ServerConfiguration.Origin
    private let timeout: Duration
    /// A request was sent and its final response has not ended yet.
    private var awaitingAnswer = false
    private var finalHeadReceived = false
    private var lastActivity = NIODeadline.now()
    /// A read was asked for and has not completed.
    private var readPending = false
    private var check: Scheduled<Void>?

    init(origin: ServerConfiguration.Origin, timeout: Duration) {
        self.origin = origin
        self.timeout = timeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { schedule(context, in: TimeAmount(timeout)) }
    }

    func channelActive(context: ChannelHandlerContext) {
        lastActivity = .now()
        if check == nil { schedule(context, in: TimeAmount(timeout)) }
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        check?.cancel()
        check = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        check?.cancel()
        check = nil
        context.fireChannelInactive()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .head = unwrapOutboundIn(data) { awaitingAnswer = true }
        lastActivity = .now()
        context.write(data, promise: promise)
    }

    func read(context: ChannelHandlerContext) {
        if !readPending {
            readPending = true
            lastActivity = .now()
        }
        context.read()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        readPending = false
        context.fireChannelReadComplete()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head) where !head.isInterim: finalHeadReceived = true
        case .end where finalHeadReceived: (awaitingAnswer, finalHeadReceived) = (false, false)
        default: break
        }
        lastActivity = .now()
        context.fireChannelRead(data)
    }

    /// One check at a time, due when the timeout since the last activity runs out.
    private func schedule(_ context: ChannelHandlerContext, in delay: TimeAmount) {
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        check = context.eventLoop.scheduleTask(in: delay) {
            let (handler, context) = loopBound.value
            handler.checkActivity(context)
        }
    }

    private func checkActivity(_ context: ChannelHandlerContext) {
        check = nil
        guard context.channel.isActive else { return }
        let quiet = NIODeadline.now() - lastActivity
        let limit = TimeAmount(timeout)
        if quiet < limit {
            schedule(context, in: limit - quiet)
            return
        }
        if awaitingAnswer && !readPending {
            // Held back by the reader of the answer, not by the origin.
            schedule(context, in: limit)
            return
        }
        if awaitingAnswer {
            context.fireErrorCaught(OriginError.timedOut("\(origin) sent nothing for \(timeout) (the read timeout)"))
        }
        context.close(promise: nil)
    }
}

/// An origin connection that outlives one exchange: a task of its own runs the exchanges handed
/// to it, one at a time, until one says the connection cannot be used again.
final class PooledConnection: Sendable {
    /// One exchange, run on the connection's task; returns whether the connection can be reused.
    typealias Job = @Sendable (inout OriginClient.Parts, OriginClient.Writer) async -> Bool
    private let jobs: AsyncStream<Job>.Continuation

    init(_ connection: OriginClient.Connection, pool: OriginPool) {
        let (stream, jobs) = AsyncStream<Job>.makeStream()
        self.jobs = jobs
        Task { [weak pool, jobs] in
            try? await connection.executeThenClose { inbound, outbound in
                var parts = inbound.makeAsyncIterator()
                for await job in stream {
                    guard await job(&parts, outbound) else { return }
                    pool?.give(self)
                }
            }
            jobs.finish()
        }
    }

    /// Hands `job` to the connection's task; false when that task has ended (it will never run).
    func submit(_ job: @escaping Job) -> Bool {
        if case .enqueued = jobs.yield(job) { return true }
        return false
    }

    /// Ends the connection's task (and so the connection) once it is idle.
    func close() { jobs.finish() }
}

/// Idle kept-alive origin connections (at most 64; more are closed, and every one given back
/// after ``closeAll()``).
final class OriginPool: Sendable {
    private let state = PthreadMutex((idle: [PooledConnection](), isClosed: false))

    func take() -> PooledConnection? { state.withLock { $0.idle.popLast() } }

    func give(_ connection: PooledConnection) {
        let kept = state.withLock { state -> Bool in
            guard !state.isClosed, state.idle.count < 64 else { return false }
            state.idle.append(connection)
            return true
        }
        if !kept { connection.close() }
    }

    /// Closes every idle connection, and from now on each one given back.
    func closeAll() {
        let idle = state.withLock { state in
            state.isClosed = true
            defer { state.idle = [] }
            return state.idle
        }
        for connection in idle { connection.close() }
    }
}

extension HTTPResponseHead {
    /// An interim response (RFC 9110 §15.2): 1xx but 101, which ends HTTP/1.1.
    var isInterim: Bool { (100..<200).contains(status.code) && status.code != 101 }
}

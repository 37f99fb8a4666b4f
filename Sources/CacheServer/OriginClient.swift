import NIOCore
import NIOHTTP1
import NIOPosix

/// Exchanges with the origin, one connection each.
struct OriginClient: Sendable {
    let origin: ServerConfiguration.Origin
    let group: any EventLoopGroup
    let connectTimeout: Duration
    let readTimeout: Duration

    typealias Connection = NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>

    /// Connects, sends `head` and the body `sendBody` writes, and hands the response head and
    /// a reader of its body to `receive`; the connection is closed when `receive` returns.
    func exchange<Result>(
        _ head: HTTPRequestHead,
        sendBody: (NIOAsyncChannelOutboundWriter<HTTPClientRequestPart>) async throws -> Void,
        receive: (HTTPResponseHead, inout ResponseBody) async throws -> Result
    ) async throws -> Result {
        let connection: Connection
        do {
            let bootstrap = ClientBootstrap(group: group)
                .connectTimeout(connectTimeout.timeAmount)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
            let initializer: @Sendable (any Channel) -> EventLoopFuture<Connection> = { [readTimeout] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: readTimeout.timeAmount))
                    try channel.pipeline.syncOperations.addHandler(CloseWhenIdle())
                    return try Connection(wrappingChannelSynchronously: channel)
                }
            }
            // An address given as an IP literal is connected to directly, without the resolver.
            if let address = try? SocketAddress(ipAddress: origin.host, port: origin.port) {
                connection = try await bootstrap.connect(to: address, channelInitializer: initializer)
            } else {
                connection = try await bootstrap.connect(host: origin.host, port: origin.port, channelInitializer: initializer)
            }
        } catch {
            throw OriginError.unreachable("\(origin): \(error)")
        }
        return try await connection.executeThenClose { inbound, outbound in
            try await outbound.write(.head(head))
            try await sendBody(outbound)
            try await outbound.write(.end(nil))
            var parts = inbound.makeAsyncIterator()
            while let part = try await parts.next() {
                guard case .head(let responseHead) = part else { continue }
                var body = ResponseBody(parts: parts)
                return try await receive(responseHead, &body)
            }
            throw OriginError.closedEarly("\(origin) closed the connection before answering")
        }
    }

    /// The body of an origin's response, as it arrives.
    struct ResponseBody {
        fileprivate var parts: NIOAsyncChannelInboundStream<HTTPClientResponsePart>.AsyncIterator
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

    var description: String {
        switch self {
        case .unreachable(let detail): "cannot reach the origin \(detail)"
        case .closedEarly(let detail): detail
        }
    }
}

/// Closes an origin connection that sent nothing for the read timeout.
private final class CloseWhenIdle: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPClientResponsePart
    typealias InboundOut = HTTPClientResponsePart

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}

extension Duration {
    var timeAmount: TimeAmount {
        .nanoseconds(components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000)
    }
}

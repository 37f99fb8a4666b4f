#if Server
import NIOCore
import NIOHTTP1

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
final class CloseWhenIdle: ChannelDuplexHandler {
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
        handlerRemoved(context: context)
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
        check = context.eventLoop.assumeIsolated().scheduleTask(in: delay) { [self] in checkActivity(context) }
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
#endif

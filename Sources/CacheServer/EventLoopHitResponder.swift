#if Server
import NIOCore
import NIOHTTP1

/// Answers on the event loop, with no task and no hop between threads, the requests the cache
/// can answer at once (``ProxyHandler/answerOnEventLoop(_:sentFiles:)``: fresh GET and HEAD hits
/// held in memory with their bodies, or whose files the page cache holds); every other request
/// goes on to the connection's task.
///
/// It sits after NIO's `HTTPServerPipelineHandler`, which hands on a pipelined request only
/// once the response before it has ended, and passes that `.end` on before the next request:
/// an answer from here never interleaves with one from the task.
final class EventLoopHitResponder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let activity: InFlightCount
    private let declined: DeclinedRequests
    private let answer: (HTTPRequestHead) -> ProxyHandler.EventLoopAnswer
    private let answered: (HTTPRequestHead, Outcome, ContinuousClock.Instant) -> Void
    /// The rest of a request answered here (its `.end`) is not passed on.
    private var swallowing = false
    /// Answers in progress on the stack: writing an answer's `.end` makes NIO's pipelining
    /// handler hand on the next request at once, so pipelined hits would nest one call deeper
    /// each; past a few, the rest go to the task.
    private var depth = 0
    private static let maximumDepth = 8

    /// `answer` answers a request head or declines it, and what it made of one it declined is
    /// held in `declined` for the connection's task; `answered` is told of each answer given
    /// (the access log). `activity` counts the answers not yet written to the socket.
    init(activity: InFlightCount, declined: DeclinedRequests, answer: @escaping (HTTPRequestHead) -> ProxyHandler.EventLoopAnswer,
         answered: @escaping (HTTPRequestHead, Outcome, ContinuousClock.Instant) -> Void) {
        self.activity = activity
        self.declined = declined
        self.answer = answer
        self.answered = answered
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            let started = ContinuousClock.now
            // Counted before `answer` looks, and counted out once the answer's `.end` is written
            // (see `InFlightCount`). A channel that is not writable (a client that does not
            // read its answers) gets none from here: the task's writer waits for it instead of
            // piling answers up in memory.
            activity.begin()
            depth += 1
            defer { depth -= 1 }
            let answer = depth <= Self.maximumDepth && context.channel.isWritable ? answer(head) : .declined(nil)
            guard case .answered(let (parts, outcome)) = answer else {
                // Held before the head goes on: the task takes it when it reads the head.
                if case .declined(let made?) = answer { declined.hold(made) }
                activity.end()
                context.fireChannelRead(data)
                return
            }
            // Set before writing: the `.end` written may hand on this request's `.end` at once.
            swallowing = true
            for part in parts { context.write(wrapOutboundOut(part), promise: nil) }
            context.flush()
            answered(head, outcome, started)
        case .body:
            // A request answered here has no body (see `answerOnEventLoop`).
            if !swallowing { context.fireChannelRead(data) }
        case .end:
            if swallowing {
                swallowing = false
            } else {
                context.fireChannelRead(data)
            }
        }
    }
}

#endif

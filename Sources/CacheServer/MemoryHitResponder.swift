import DiskCacheLocking
import NIOCore
import NIOHTTP1

/// Answers on the event loop, with no task and no hop between threads, the requests the memory
/// tier can answer as they are (``ProxyHandler/answerFromMemory(_:)``: fresh GET and HEAD hits
/// held in memory with their bodies); every other request goes on to the connection's task.
///
/// It sits after NIO's `HTTPServerPipelineHandler`, which hands on a pipelined request only
/// once the response before it has ended, and passes that `.end` on before the next request:
/// an answer from here never interleaves with one from the task.
final class MemoryHitResponder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let activity: ConnectionActivity
    private let answer: (HTTPRequestHead) -> (parts: [HTTPServerResponsePart], outcome: Outcome)?
    private let answered: (HTTPRequestHead, Outcome, ContinuousClock.Instant) -> Void
    /// The rest of a request answered here (its `.end`) is not passed on.
    private var swallowing = false

    /// `answer` answers a request head or declines (nil); `answered` is told of each answer
    /// given (the access log). `activity` counts the answers not yet written to the socket.
    init(activity: ConnectionActivity, answer: @escaping (HTTPRequestHead) -> (parts: [HTTPServerResponsePart], outcome: Outcome)?,
         answered: @escaping (HTTPRequestHead, Outcome, ContinuousClock.Instant) -> Void) {
        self.activity = activity
        self.answer = answer
        self.answered = answered
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            let started = ContinuousClock.now
            // Counted before `answer` looks (see `ConnectionActivity`).
            activity.begin()
            guard let (parts, outcome) = answer(head), let last = parts.last else {
                activity.end()
                context.fireChannelRead(data)
                return
            }
            // Set before writing: the `.end` written may hand on this request's `.end` at once.
            swallowing = true
            for part in parts.dropLast() { context.write(wrapOutboundOut(part), promise: nil) }
            let written = context.eventLoop.makePromise(of: Void.self)
            let activity = self.activity
            written.futureResult.whenComplete { _ in activity.end() }
            context.writeAndFlush(wrapOutboundOut(last), promise: written)
            answered(head, outcome, started)
        case .body:
            // A request answered here has no body (see `answerFromMemory`).
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

/// The answers a ``MemoryHitResponder`` has begun on one connection and not yet written to the
/// socket: a connection with none is idle as far as they go. The responder counts an answer
/// before it checks whether the server is draining, and ``CacheServer/shutdown()`` sets draining
/// before it reads the count: so a connection it finds idle gets no answer from here after.
final class ConnectionActivity: Sendable {
    private let inFlight = PthreadMutex(0)

    func begin() { inFlight.withLock { $0 += 1 } }
    func end() { inFlight.withLock { $0 -= 1 } }
    var isIdle: Bool { inFlight.withLock { $0 == 0 } }
}

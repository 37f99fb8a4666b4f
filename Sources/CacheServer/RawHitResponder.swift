#if Server
import HTTPCache
import NIOCore

/// Answers, straight from a connection's bytes, the requests a prepared answer answers
/// (``PreparedHits``): a GET or HEAD of HTTP/1.1 with no body and none of
/// ``PreparedHits/fieldsRead``, as ``RequestScan`` reads it, answered with the answer's wire
/// form (``PreparedHits/WireHead``) and body. Such a request never reaches NIO's HTTP decoder,
/// its pipelining handler, the response encoder or the header validator, which take most of a
/// small hit's time in user space.
///
/// It sits first in the pipeline, and every other request's bytes go on to NIO's decoder as
/// they came, in order. While a request handed on is not yet answered (its `.end` not yet
/// written into the pipeline: ``HandedOn``), the requests after it are handed on too, so the
/// answers leave in the order of the requests. Bytes it cannot delimit (a body, a form it does
/// not read) go on with everything after them on the connection. A head not yet whole is held
/// until it is, up to ``RequestScan/maximumHead`` bytes.
///
/// Back-pressure: while the connection is not writable (more than its high watermark of
/// answers unsent, NIO's 64 KiB by default), it answers nothing and asks for no more bytes;
/// what was read is held, and read again once the client has taken enough of its answers.
/// Answers are written to the channel at least every ``groupLimit`` bytes, so that its
/// writability follows them.
final class RawHitResponder: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    /// An answer in its wire form: its head (with a small body appended) and the rest of its body.
    struct Answer {
        let head: ByteBuffer
        let body: ByteBuffer?
        let outcome: Outcome
    }

    /// Bodies up to this size go out in the same buffer as their head.
    static let bodyInHeadLimit = 4096

    private let handedOn: HandedOn
    private let activity: InFlightCount
    private let answer: (PreparedHits.Target) -> Answer?
    private let answered: (PreparedHits.Target, Outcome, ContinuousClock.Instant) -> Void
    /// The start of a head still to come whole.
    private var held: ByteBuffer?
    /// Set once bytes went on that ``RequestScan`` cannot delimit: from then on all do.
    private var handingOnEverything = false
    /// The channel was not writable when a request here was next: ``held`` waits for it.
    private var waitingForWritable = false
    /// A read was asked for while waiting: it goes on once the channel is writable.
    private var readDeferred = false
    /// Where each request read here ends, and each answer.
    private let clock: ClientTimeouts.Clock
    /// Answers made in one read go to the channel once they reach this many bytes.
    static let groupLimit = 32 * 1024

    /// `answer` gives the answer for a target or declines (nil), `answered` is told of each
    /// answer written (the access log); `activity` counts the answers not yet on the socket.
    init(handedOn: HandedOn, activity: InFlightCount, clock: ClientTimeouts.Clock,
         answer: @escaping (PreparedHits.Target) -> Answer?,
         answered: @escaping (PreparedHits.Target, Outcome, ContinuousClock.Instant) -> Void) {
        self.handedOn = handedOn
        self.activity = activity
        self.clock = clock
        self.answer = answer
        self.answered = answered
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !handingOnEverything else {
            context.fireChannelRead(data)
            return
        }
        var bytes = unwrapInboundIn(data)
        if var start = held {
            held = nil
            start.writeBuffer(&bytes)
            bytes = start
        }
        guard !waitingForWritable else {
            held = bytes
            return
        }
        process(context, bytes)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if waitingForWritable, context.channel.isWritable {
            waitingForWritable = false
            if let bytes = held {
                held = nil
                process(context, bytes)
            }
            if readDeferred, !waitingForWritable {
                readDeferred = false
                context.read()
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        if waitingForWritable {
            readDeferred = true
        } else {
            context.read()
        }
    }

    /// Answers or hands on the requests at the start of `bytes`, holding what it cannot yet.
    private func process(_ context: ChannelHandlerContext, _ bytes: ByteBuffer) {
        var bytes = bytes
        var answers = AnswerGroup(activity: activity)
        reading: while bytes.readableBytes > 0 {
            switch bytes.withUnsafeReadableBytes({ RequestScan.scan($0) }) {
            case .incomplete:
                held = bytes
                break reading
            case .other:
                answers.write(context)
                handingOnEverything = true
                context.fireChannelRead(wrapInboundOut(bytes))
                break reading
            case .headOnly(let length, let target):
                if let target, handedOn.isIdle {
                    if answers.bytes >= Self.groupLimit, answers.write(context) { context.flush() }
                    guard context.channel.isWritable else {
                        // No more answers until the client takes some: the rest waits, unread.
                        waitingForWritable = true
                        held = bytes
                        break reading
                    }
                    let started = ContinuousClock.now
                    // Counted before `answer` looks (and so before it sees whether the server is
                    // draining), as ``EventLoopHitResponder`` counts its answers.
                    answers.begin()
                    if let found = answer(target) {
                        answers.add(found)
                        bytes.moveReaderIndex(forwardBy: length)
                        clock.requestEnded()
                        clock.answerEnded()
                        answered(target, found.outcome, started)
                        continue reading
                    }
                }
                // The answers before it go first: NIO's pipeline may answer this one at once.
                answers.write(context)
                handedOn.requests += 1
                context.fireChannelRead(wrapInboundOut(bytes.readSlice(length: length)!))
            }
        }
        if answers.write(context) { context.flush() }
    }

    func channelInactive(context: ChannelHandlerContext) {
        // What NIO's decoder makes of a head cut short is its to say.
        if let held {
            self.held = nil
            context.fireChannelRead(wrapInboundOut(held))
        }
        context.fireChannelInactive()
    }

    /// Answers made and not yet written: written together, the last with a promise that counts
    /// them out of the connection's activity once written (or failed).
    private struct AnswerGroup {
        let activity: InFlightCount
        var parts: [IOData] = []
        /// The bytes of ``parts``.
        var bytes = 0
        var begun = false
        var wroteAny = false

        mutating func begin() {
            guard !begun else { return }
            activity.begin()
            begun = true
        }

        mutating func add(_ answer: Answer) {
            parts.append(.byteBuffer(answer.head))
            bytes += answer.head.readableBytes
            if let body = answer.body {
                parts.append(.byteBuffer(body))
                bytes += body.readableBytes
            }
        }

        /// Writes what was added since the last call; true when this group wrote anything at all.
        @discardableResult
        mutating func write(_ context: ChannelHandlerContext) -> Bool {
            defer {
                parts.removeAll(keepingCapacity: true)
                bytes = 0
                begun = false
            }
            guard begun else { return wroteAny }
            guard let last = parts.last else {
                activity.end()
                return wroteAny
            }
            for part in parts.dropLast() { context.write(NIOAny(part), promise: nil) }
            let written = context.eventLoop.makePromise(of: Void.self)
            let activity = self.activity
            written.futureResult.whenComplete { _ in activity.end() }
            context.write(NIOAny(last), promise: written)
            wroteAny = true
            return true
        }
    }
}
#endif

#if Server
import NIOCore

/// How long a client may hold a connection without progress, nginx's way
/// (``ServerConfiguration/Timeouts``): a request's head must arrive whole within the header
/// timeout of its first byte (of the connection's opening, for the first); its body may pause
/// for at most the body timeout between two reads; an answer the client does not read may
/// stay unsent (the connection not writable) for at most the send timeout; a kept-alive
/// connection with nothing under way closes after the idle timeout; the rest of a body whose
/// answer has ended (the origin answered early) is read and dropped for at most the lingering
/// time (30 s, nginx's `lingering_time`) from the answer's end. While the server itself
/// is answering (the origin's time, bounded by its own timeouts) no client deadline runs.
/// One check is scheduled at a time, for the deadline that comes next; when a request's head or
/// the request ends, or an answer ends or stops being read, and the deadline then comes sooner
/// (a body timeout shorter than what is left of the header timeout), the check is moved up:
/// each timeout holds whatever the others are.
///
/// It sits first in the pipeline, so it sees every byte that arrives; ``RequestGuard`` (for
/// requests NIO's parser reads) and ``RawHitResponder`` (for those it answers) say where
/// requests end, ``ResponseWrites`` and ``RawHitResponder`` where answers end. On the
/// connection's event loop only.
final class ClientTimeouts: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// Where a connection stands, as the deadline reads it.
    final class Clock {
        fileprivate enum Reading {
            /// Nothing of a next request has come since the last ended (the idle timeout).
            case between(since: NIODeadline)
            /// A head has begun and not ended (the header timeout from its first byte).
            case head(since: NIODeadline)
            /// A head has ended and the body not (the body timeout from the last read).
            case body(lastRead: NIODeadline)
        }

        fileprivate var reading = Reading.head(since: .now())
        /// Requests read to their end, and answers written to their end.
        fileprivate var requestsRead = 0
        fileprivate var answersEnded = 0
        /// When an answer ended before its request's body did (an origin that answered an
        /// upload early): the rest of the body is read and dropped for at most the lingering
        /// time from then, however steadily it comes (nginx's `lingering_time`).
        fileprivate var lingeringSince: NIODeadline?
        /// When the connection last became unwritable; nil while writable.
        fileprivate var unwritableSince: NIODeadline?
        /// Told when a request's head or the request ends, or an answer ends: the deadline may
        /// now come before the check scheduled (a body timeout shorter than the header timeout).
        fileprivate var changed: (() -> Void)?

        /// Bytes came from the client. A head that begins after an idle stretch is checked at
        /// the idle deadline at the latest, so its own deadline is not rescheduled here (that
        /// would cost a timer for each request of a kept-alive connection).
        fileprivate func received(at now: NIODeadline) {
            switch reading {
            case .between: reading = .head(since: now)
            case .head: break
            case .body: reading = .body(lastRead: now)
            }
        }

        /// A request's head was read whole: its body's time begins.
        func headEnded() {
            reading = .body(lastRead: .now())
            changed?()
        }

        /// A request was read to its end.
        func requestEnded() {
            requestsRead += 1
            reading = .between(since: .now())
            lingeringSince = nil
            changed?()
        }

        /// An answer's last byte was handed to the channel.
        func answerEnded() {
            answersEnded += 1
            if requestsRead <= answersEnded, case .between = reading { reading = .between(since: .now()) }
            // The answer to a request whose body is still coming.
            if answersEnded > requestsRead, case .body = reading, lingeringSince == nil { lingeringSince = .now() }
            changed?()
        }

        /// When the connection must close and why; nil while the server is answering and the client reads.
        fileprivate func deadline(_ timeouts: ServerConfiguration.Timeouts) -> (NIODeadline, String)? {
            if requestsRead > answersEnded {
                guard let unwritableSince else { return nil }
                return (unwritableSince + TimeAmount(timeouts.send), "the client did not read its answer")
            }
            switch reading {
            case .between(let since): return (since + TimeAmount(timeouts.idle), "idle")
            case .head(let since): return (since + TimeAmount(timeouts.header), "the request's head did not arrive in time")
            case .body(let lastRead):
                let paused = lastRead + TimeAmount(timeouts.body)
                if let lingeringSince, lingeringSince + TimeAmount(timeouts.lingering) < paused {
                    return (lingeringSince + TimeAmount(timeouts.lingering), "the request's body went on past the lingering time after its answer")
                }
                return (paused, "the request's body paused too long")
            }
        }
    }

    let clock: Clock
    private let timeouts: ServerConfiguration.Timeouts
    private var check: Scheduled<Void>?
    /// When ``check`` runs.
    private var checkAt: NIODeadline?
    private var context: ChannelHandlerContext?
    /// Told why a connection was closed.
    private let onTimeout: (String) -> Void

    init(clock: Clock, timeouts: ServerConfiguration.Timeouts, onTimeout: @escaping (String) -> Void) {
        self.clock = clock
        self.timeouts = timeouts
        self.onTimeout = onTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        clock.reading = .head(since: .now())
        clock.changed = { [weak self] in self?.checkEarlierIfDue() }
        if context.channel.isActive { schedule(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        if check == nil { schedule(context) }
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        check?.cancel()
        check = nil
        checkAt = nil
        clock.changed = nil
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        handlerRemoved(context: context)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        clock.received(at: .now())
        context.fireChannelRead(data)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        clock.unwritableSince = context.channel.isWritable ? nil : .now()
        checkEarlierIfDue()
        context.fireChannelWritabilityChanged()
    }

    /// Moves the check up when the clock's deadline now comes before it: the body timeout from
    /// a head's end, when it is shorter than what is left of the header timeout the check was
    /// scheduled for; the idle timeout after an answer; the send timeout once the client stops
    /// reading.
    private func checkEarlierIfDue() {
        guard let context, let checkAt, let (deadline, _) = clock.deadline(timeouts),
              max(deadline, .now() + .milliseconds(10)) < checkAt else { return }
        check?.cancel()
        schedule(context)
    }

    /// Checks again at the next deadline (or, while the server answers, after the shortest timeout).
    private func schedule(_ context: ChannelHandlerContext) {
        let now = NIODeadline.now()
        let next = max(clock.deadline(timeouts)?.0 ?? now + TimeAmount(timeouts.shortest), now + .milliseconds(10))
        checkAt = next
        check = context.eventLoop.assumeIsolated().scheduleTask(deadline: next) { [self] in
            check = nil
            checkAt = nil
            guard context.channel.isActive else { return }
            if let (deadline, reason) = clock.deadline(timeouts), deadline <= .now() {
                onTimeout(reason)
                context.close(promise: nil)
            } else {
                schedule(context)
            }
        }
    }
}
#endif

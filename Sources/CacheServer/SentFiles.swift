import DiskCacheLocking
import NIOCore
import NIOHTTP1

/// What a request's task writes its response with: the connection's writer, the files of
/// bodies it sends with `sendfile` (``SentFiles``), and the count of responses not yet written
/// to the socket (``ConnectionActivity``), which a response's `.end` enters here.
struct ClientWriter: Sendable {
    let outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>
    let sentFiles: SentFiles
    let activity: ConnectionActivity

    func write(_ part: HTTPServerResponsePart) async throws {
        try await write(contentsOf: [part])
    }

    func write(contentsOf parts: [HTTPServerResponsePart]) async throws {
        // Counted before the parts go (``ResponseWrites`` counts it out once written); a write
        // that throws handed nothing to the channel.
        let ends = parts.contains { if case .end = $0 { true } else { false } }
        if ends { activity.begin() }
        do {
            try await outbound.write(contentsOf: parts)
        } catch {
            if ends { activity.end() }
            throw error
        }
    }
}

/// The responses of one connection begun and not yet written to the socket: each is counted
/// when its `.end` is handed to the channel (by ``ClientWriter``, or by ``EventLoopHitResponder``
/// before it even looks at a request) and counted out by ``ResponseWrites`` once that `.end` is
/// written or failed. The writer's `write` returns before its parts reach the socket, so a
/// connection must not close until this is idle: a close fails the writes still pending, which
/// would cut a body sent with `sendfile` short. The connection's task waits for it before it
/// closes, and ``CacheServer/shutdown()`` closes only connections that are idle by it too.
///
/// The responder counts an answer before it checks whether the server is draining, and
/// shutdown sets draining before it reads the count: so a connection shutdown finds idle gets
/// no answer from the responder after.
final class ConnectionActivity: Sendable {
    private struct State {
        var inFlight = 0
        var isClosed = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = PthreadMutex(State())

    func begin() { state.withLock { $0.inFlight += 1 } }

    func end() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.inFlight -= 1
            guard state.inFlight == 0 else { return [] }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    var isIdle: Bool { state.withLock { $0.inFlight == 0 } }

    /// The channel closed: nothing more will be written (a part NIO dropped with the channel is
    /// never counted out), so no one waits any longer.
    func closed() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.isClosed = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once every response begun was written to the socket (or failed), or the channel closed.
    func idle() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.inFlight == 0 || state.isClosed { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}

/// The files of one connection's bodies sent with `sendfile` (a `FileRegion` written to the
/// channel). A file must stay open until its write is done, which the request's task cannot
/// see: ``ResponseWrites`` closes it then, and whatever a closing connection never wrote (a
/// write NIO dropped with the channel) is closed with ``closeAll()`` when the connection ends.
/// `NIOFileHandle` refuses a second close and a use after close, so the two may meet.
/// Files a server sends bodies from, over all its connections.
struct SentFileCounts {
    /// Held open now, for writes not yet done.
    var open = 0
    /// Taken for sending since the server started.
    var adopted = 0
}

final class SentFiles: Sendable {
    private let open = PthreadMutex([ObjectIdentifier: NIOFileHandle]())
    /// The server's counts of files sent, over all connections.
    private let serverCount: PthreadMutex<SentFileCounts>

    init(counting serverCount: PthreadMutex<SentFileCounts>) { self.serverCount = serverCount }

    /// Takes `descriptor` (now owned here) as a handle for a `FileRegion`.
    func adopt(_ descriptor: Int32) -> NIOFileHandle {
        let handle = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: descriptor)
        open.withLock { $0[ObjectIdentifier(handle)] = handle }
        serverCount.withLock {
            $0.open += 1
            $0.adopted += 1
        }
        return handle
    }

    func close(_ handle: NIOFileHandle) {
        guard open.withLock({ $0.removeValue(forKey: ObjectIdentifier(handle)) }) != nil else { return }
        serverCount.withLock { $0.open -= 1 }
        try? handle.close()
    }

    func closeAll() {
        for handle in open.withLock({ Array($0.values) }) { close(handle) }
    }
}

/// Sees every response part on its way to the socket: closes the file of a body sent as a
/// `FileRegion` once its write is done or failed, counts a response out of the connection's
/// ``ConnectionActivity`` once its `.end` is, and counts each `.end` into ``HandedOn`` as it
/// passes (on its way, not yet written: an answer ``RawHitResponder`` writes after it follows it).
final class ResponseWrites: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let files: SentFiles
    private let activity: ConnectionActivity
    private let handedOn: HandedOn
    private let clock: ClientTimeouts.Clock

    init(files: SentFiles, activity: ConnectionActivity, handedOn: HandedOn, clock: ClientTimeouts.Clock) {
        self.files = files
        self.activity = activity
        self.handedOn = handedOn
        self.clock = clock
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let done: @Sendable () -> Void
        switch unwrapOutboundIn(data) {
        case .body(.fileRegion(let region)):
            let files = self.files
            done = { files.close(region.fileHandle) }
        case .end:
            handedOn.ends += 1
            clock.answerEnded()
            let activity = self.activity
            done = { activity.end() }
        default:
            context.write(data, promise: promise)
            return
        }
        let written = context.eventLoop.makePromise(of: Void.self)
        written.futureResult.whenComplete { result in
            done()
            promise?.completeWith(result)
        }
        context.write(data, promise: written)
    }
}

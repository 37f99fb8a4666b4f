#if Server
import DiskCacheLocking

/// Work begun and not yet ended, which a task can wait to see all ended. Two uses:
///
/// - A connection's activity: the responses begun and not yet written to the socket. Each is
///   counted when its `.end` is handed to the channel (by ``ClientWriter``, or by
///   ``EventLoopHitResponder`` before it even looks at a request) and counted out by
///   ``ResponseWrites`` once that `.end` is written or failed. The writer's `write` returns
///   before its parts reach the socket, so a connection must not close until this is idle: a
///   close fails the writes still pending, which would cut a body sent with `sendfile` short.
///   The connection's task waits for it before it closes, and ``CacheServer/shutdown()`` closes
///   only connections that are idle by it too. The responder counts an answer before it checks
///   whether the server is draining, and shutdown sets draining before it reads the count: so a
///   connection shutdown finds idle gets no answer from the responder after.
/// - ``OriginPool``'s connections whose task has not ended.
final class InFlightCount: Sendable {
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

    /// What was counted can no longer end (a connection's channel closed: nothing more will be
    /// written, and a part NIO dropped with the channel is never counted out), so no one waits
    /// any longer.
    func closed() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.isClosed = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once everything begun has ended, or after ``closed()``.
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
#endif

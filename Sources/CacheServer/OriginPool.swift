import DiskCacheLocking

/// Idle kept-alive origin connections (at most 64; more are closed, and every one given back
/// after ``closeAll()``), and a count of every pooled connection whose task has not yet ended.
final class OriginPool: Sendable {
    private struct State {
        var idle: [PooledConnection] = []
        var isClosed = false
        /// Connections whose task has not ended (idle, in use or closing).
        var live = 0
        /// ``closeAll()`` waiting for `live` to reach 0.
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = PthreadMutex(State())

    func take() -> PooledConnection? { state.withLock { $0.idle.popLast() } }

    func give(_ connection: PooledConnection) {
        let kept = state.withLock { state -> Bool in
            guard !state.isClosed, state.idle.count < 64 else { return false }
            state.idle.append(connection)
            return true
        }
        if !kept { connection.close() }
    }

    /// Connections whose task has not ended.
    var openConnections: Int { state.withLock { $0.live } }

    /// A connection's task began.
    func started() { state.withLock { $0.live += 1 } }

    /// A connection's task ended: its channel is closed.
    func ended() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.live -= 1
            guard state.live == 0 else { return [] }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Closes every idle connection, and from now on each one given back; returns once every
    /// connection's task has ended, so that none closes its channel after the event loops it
    /// runs on have shut down. Call when no exchange is under way (each ends within the origin
    /// read timeout).
    func closeAll() async {
        let idle = state.withLock { state in
            state.isClosed = true
            defer { state.idle = [] }
            return state.idle
        }
        for connection in idle { connection.close() }
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                guard state.live > 0 else { return true }
                state.waiters.append(waiter)
                return false
            }
            if done { waiter.resume() }
        }
    }
}

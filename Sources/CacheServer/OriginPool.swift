#if Server
import DiskCacheLocking

/// Idle kept-alive origin connections (at most 64; more are closed, and every one given back
/// after ``closeAll()``), and a count of every pooled connection whose task has not yet ended.
final class OriginPool: Sendable {
    private let state = PthreadMutex((idle: [PooledConnection](), isClosed: false))
    /// Connections whose task has not ended (idle, in use or closing).
    let tasks = InFlightCount()

    func take() -> PooledConnection? { state.withLock { $0.idle.popLast() } }

    func give(_ connection: PooledConnection) {
        let kept = state.withLock { state -> Bool in
            guard !state.isClosed, state.idle.count < 64 else { return false }
            state.idle.append(connection)
            return true
        }
        if !kept { connection.close() }
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
        await tasks.idle()
    }
}
#endif

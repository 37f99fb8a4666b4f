import DiskCacheLocking

/// Idle kept-alive origin connections (at most 64; more are closed, and every one given back
/// after ``closeAll()``).
final class OriginPool: Sendable {
    private let state = PthreadMutex((idle: [PooledConnection](), isClosed: false))

    func take() -> PooledConnection? { state.withLock { $0.idle.popLast() } }

    func give(_ connection: PooledConnection) {
        let kept = state.withLock { state -> Bool in
            guard !state.isClosed, state.idle.count < 64 else { return false }
            state.idle.append(connection)
            return true
        }
        if !kept { connection.close() }
    }

    /// Closes every idle connection, and from now on each one given back.
    func closeAll() {
        let idle = state.withLock { state in
            state.isClosed = true
            defer { state.idle = [] }
            return state.idle
        }
        for connection in idle { connection.close() }
    }
}

import DiskCacheLocking

/// The state lock. In shared mode every acquisition first follows the journal (see
/// ``CacheState/follow()``), so that whatever runs under it sees what other instances stored
/// and removed before the call began.
struct StateLock: Sendable {
    let mutex: PthreadMutex<CacheState>

    init(_ state: CacheState) { mutex = PthreadMutex(state) }

    func withLock<Result, E: Error>(_ body: (inout CacheState) throws(E) -> Result) throws(E) -> Result {
        try mutex.withLock { (state: inout CacheState) throws(E) -> Result in
            if state.shared != nil, !state.isClosed { state.follow() }
            return try body(&state)
        }
    }
}

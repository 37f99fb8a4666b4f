import DiskCacheLocking

/// Waits of requests for a fetch of the same key already under way (nginx's `proxy_cache_lock`).
final class FetchGate: Sendable {
    private let waiting = PthreadMutex([String: [CheckedContinuation<Void, Never>]]())

    /// True when this caller now leads the fetch of `key` (and must call ``finish(_:)``);
    /// false after waiting for the leader to finish.
    func enter(_ key: String) async -> Bool {
        let leads = waiting.withLock { waiting in
            guard waiting[key] == nil else { return false }
            waiting[key] = []
            return true
        }
        if leads { return true }
        await withCheckedContinuation { continuation in
            let registered = waiting.withLock { waiting in
                guard waiting[key] != nil else { return false }
                waiting[key]!.append(continuation)
                return true
            }
            if !registered { continuation.resume() }
        }
        return false
    }

    /// Ends the fetch of `key` and wakes those waiting for it.
    func finish(_ key: String) {
        let waiters = waiting.withLock { $0.removeValue(forKey: key) } ?? []
        for waiter in waiters { waiter.resume() }
    }

    /// Callers waiting for `key` (for tests).
    func waiterCount(_ key: String) -> Int { waiting.withLock { $0[key]?.count ?? 0 } }
}

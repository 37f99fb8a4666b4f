import DiskCacheLocking

/// What a ``CacheServer`` has done since it started.
public struct ServerStatistics: Sendable, Hashable {
    /// Requests answered (internal endpoints excepted).
    public var requests = 0
    /// Answered from the cache without asking the origin (fresh, or stale where allowed).
    public var hits = 0
    /// Answered from the cache after the origin confirmed it with a 304.
    public var revalidations = 0
    /// Went to the origin and were answered with what it sent.
    public var misses = 0
    /// Stale responses served because the origin failed and `stale-if-error` allowed it.
    public var staleOnError = 0
    /// Requests that waited for another's fetch of the same resource instead of fetching it.
    public var coalesced = 0
    /// Responses stored.
    public var stores = 0
    /// Body bytes sent to clients.
    public var bytesServed: Int64 = 0
    /// Requests sent to the origin, and the seconds until their response heads arrived.
    public var originRequests = 0
    public var originSeconds: Double = 0
    /// Origin exchanges that failed (no connection, no answer, cut short).
    public var originErrors = 0

    public init() {}

    /// Prometheus text exposition format (version 0.0.4), with the store's size and entry count.
    func prometheus(storeBytes: Int64, storeEntries: Int) -> String {
        let counters: [(String, String, String)] = [
            ("diskcache_server_requests_total", "Requests answered", "\(requests)"),
            ("diskcache_server_hits_total", "Answered from the cache without the origin", "\(hits)"),
            ("diskcache_server_revalidations_total", "Answered from the cache after a 304", "\(revalidations)"),
            ("diskcache_server_misses_total", "Answered with what the origin sent", "\(misses)"),
            ("diskcache_server_stale_on_error_total", "Stale responses served after an origin failure", "\(staleOnError)"),
            ("diskcache_server_coalesced_total", "Requests that waited for another's fetch", "\(coalesced)"),
            ("diskcache_server_stores_total", "Responses stored", "\(stores)"),
            ("diskcache_server_bytes_served_total", "Body bytes sent to clients", "\(bytesServed)"),
            ("diskcache_server_origin_requests_total", "Requests sent to the origin", "\(originRequests)"),
            ("diskcache_server_origin_seconds_total", "Seconds until origin response heads arrived", "\(originSeconds)"),
            ("diskcache_server_origin_errors_total", "Origin exchanges that failed", "\(originErrors)"),
        ]
        var text = ""
        for (name, help, value) in counters {
            text += "# HELP \(name) \(help)\n# TYPE \(name) counter\n\(name) \(value)\n"
        }
        text += "# HELP diskcache_server_store_bytes Bytes the store holds on disk\n# TYPE diskcache_server_store_bytes gauge\n"
        text += "diskcache_server_store_bytes \(storeBytes)\n"
        text += "# HELP diskcache_server_store_entries Entries in the store\n# TYPE diskcache_server_store_entries gauge\n"
        text += "diskcache_server_store_entries \(storeEntries)\n"
        return text
    }
}

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

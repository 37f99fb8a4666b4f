import CoreMetrics
import DiskCacheLocking
import Prometheus

/// What a ``CacheServer`` has done since it started.
public struct ServerStatistics: Sendable, Hashable {
    /// Requests answered (internal endpoints excepted).
    public var requests = 0
    /// Answered from the cache without asking the origin (fresh, or stale where allowed).
    public var hits = 0
    /// Of the hits, those answered on the connection's event loop, without a task: from memory, or
    /// from files the page cache held.
    public var hitsOnEventLoop = 0
    /// Of those, the ones answered with an answer prepared for an earlier hit (the response's
    /// head and body ready to send, kept while it stays fresh and the memory tier holds it).
    public var hitsPrepared = 0
    /// Of those, the ones read and answered straight from the connection's bytes, without NIO's
    /// HTTP pipeline (a plain GET or HEAD of HTTP/1.1, in turn on its connection).
    public var hitsFromBytes = 0
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
    /// Connections answered 503 and closed because ``ServerConfiguration/maximumConnections`` were open.
    public var connectionsRefused = 0
    /// Connections closed by one of ``ServerConfiguration/timeouts``.
    public var connectionsTimedOut = 0

    public init() {}

    mutating func count(_ event: ServerMetrics.Event) {
        switch event {
        case .requests: requests += 1
        case .hits: hits += 1
        case .hitsOnEventLoop: hitsOnEventLoop += 1
        case .hitsPrepared: hitsPrepared += 1
        case .hitsFromBytes: hitsFromBytes += 1
        case .revalidations: revalidations += 1
        case .misses: misses += 1
        case .staleOnError: staleOnError += 1
        case .coalesced: coalesced += 1
        case .stores: stores += 1
        case .originErrors: originErrors += 1
        case .connectionsRefused: connectionsRefused += 1
        case .connectionsTimedOut: connectionsTimedOut += 1
        case .bytesServed(let bytes): bytesServed += bytes
        case .originResponse(let seconds):
            originRequests += 1
            originSeconds += seconds
        }
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

/// The server's metrics through swift-metrics, into a Prometheus registry of the server's own
/// (several servers in one process keep theirs apart), written out by `GET /_cache/metrics`.
final class ServerMetrics: Sendable {
    /// What is counted.
    enum Event {
        case requests, hits, hitsOnEventLoop, hitsPrepared, hitsFromBytes, revalidations, misses, staleOnError, coalesced, stores, originErrors
        case connectionsRefused, connectionsTimedOut
        case bytesServed(Int64)
        /// An origin response head arrived this long after the request went out.
        case originResponse(seconds: Double)
    }

    let registry = PrometheusCollectorRegistry()
    /// The counters, one for each ``Count`` at its raw value.
    private let counters: [CoreMetrics.Counter]

    private enum Count: Int, CaseIterable {
        case requests, hits, hitsOnEventLoop, hitsPrepared, hitsFromBytes, revalidations, misses, staleOnError, coalesced, stores, originErrors,
             bytesServed, connectionsRefused, connectionsTimedOut

        var name: String {
            switch self {
            case .requests: "requests"
            case .hits: "hits"
            case .hitsOnEventLoop: "hits_on_event_loop"
            case .hitsPrepared: "hits_prepared"
            case .hitsFromBytes: "hits_from_bytes"
            case .revalidations: "revalidations"
            case .misses: "misses"
            case .staleOnError: "stale_on_error"
            case .coalesced: "coalesced"
            case .stores: "stores"
            case .originErrors: "origin_errors"
            case .bytesServed: "bytes_served"
            case .connectionsRefused: "connections_refused"
            case .connectionsTimedOut: "connections_timed_out"
            }
        }
    }

    private func counter(_ count: Count) -> CoreMetrics.Counter { counters[count.rawValue] }
    private let originLatency: CoreMetrics.Timer
    private let storeBytes: CoreMetrics.Gauge
    private let storeEntries: CoreMetrics.Gauge

    init() {
        let factory = PrometheusMetricsFactory(registry: registry)
        counters = Count.allCases.map { CoreMetrics.Counter(label: "diskcache_server_\($0.name)_total", dimensions: [], factory: factory) }
        originLatency = CoreMetrics.Timer(label: "diskcache_server_origin_latency_seconds", dimensions: [], factory: factory)
        storeBytes = CoreMetrics.Gauge(label: "diskcache_server_store_bytes", dimensions: [], factory: factory)
        storeEntries = CoreMetrics.Gauge(label: "diskcache_server_store_entries", dimensions: [], factory: factory)
    }

    func record(_ event: Event) {
        switch event {
        case .requests: counter(.requests).increment()
        case .hits: counter(.hits).increment()
        case .hitsOnEventLoop: counter(.hitsOnEventLoop).increment()
        case .hitsPrepared: counter(.hitsPrepared).increment()
        case .hitsFromBytes: counter(.hitsFromBytes).increment()
        case .revalidations: counter(.revalidations).increment()
        case .misses: counter(.misses).increment()
        case .staleOnError: counter(.staleOnError).increment()
        case .coalesced: counter(.coalesced).increment()
        case .stores: counter(.stores).increment()
        case .originErrors: counter(.originErrors).increment()
        case .connectionsRefused: counter(.connectionsRefused).increment()
        case .connectionsTimedOut: counter(.connectionsTimedOut).increment()
        case .bytesServed(let bytes): counter(.bytesServed).increment(by: Int(bytes))
        case .originResponse(let seconds): originLatency.recordNanoseconds(Int64(seconds * 1e9))
        }
    }

    /// The Prometheus text exposition, with the store's size and entry count as of now.
    func exposition(storeBytes bytes: Int64, storeEntries entries: Int) -> String {
        storeBytes.record(bytes)
        storeEntries.record(entries)
        return registry.emitToString()
    }
}

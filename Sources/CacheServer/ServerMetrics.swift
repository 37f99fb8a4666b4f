#if Server
import CoreMetrics
import Prometheus

/// The server's metrics through swift-metrics, into a Prometheus registry of the server's own
/// (several servers in one process keep theirs apart), written out by `GET /_cache/metrics`.
final class ServerMetrics: Sendable {
    /// What is counted.
    enum Event {
        case requests, hits, hitsOnEventLoop, hitsPrepared, hitsFromBytes, revalidations, misses, staleOnError, coalesced, stores, originErrors
        case storesDeclined, connectionsRefused, connectionsTimedOut
        case bytesServed(Int64)
        /// An origin response head arrived this long after the request went out.
        case originResponse(seconds: Double)
    }

    let registry = PrometheusCollectorRegistry()
    /// The counters, one for each ``Count`` at its raw value.
    private let counters: [CoreMetrics.Counter]

    private enum Count: Int, CaseIterable {
        case requests, hits, hitsOnEventLoop, hitsPrepared, hitsFromBytes, revalidations, misses, staleOnError, coalesced, stores, originErrors,
             bytesServed, storesDeclined, connectionsRefused, connectionsTimedOut

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
            case .storesDeclined: "stores_declined"
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
        case .storesDeclined: counter(.storesDeclined).increment()
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
#endif

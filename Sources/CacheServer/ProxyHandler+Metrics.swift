import DiskCacheLocking
import Foundation
import HTTPCache
import NIOCore
import NIOHTTP1

// What the handler counts: into ``ServerStatistics`` and the Prometheus metrics.
extension ProxyHandler {
    /// Counts `event` in ``statistics`` and in the Prometheus metrics.
    func note(_ event: ServerMetrics.Event) {
        statistics.withLock { $0.count(event) }
        metrics.record(event)
    }

    /// Counts a hit answered on the event loop (from a prepared answer when `prepared`, and
    /// straight from the connection's bytes when `fromBytes`).
    func noteHit(bytes: Int64, prepared: Bool = false, fromBytes: Bool = false) {
        // Under one lock, with no array made: this runs for every hit.
        func each(_ body: (ServerMetrics.Event) -> Void) {
            body(.requests)
            body(.hits)
            body(.hitsOnEventLoop)
            if prepared { body(.hitsPrepared) }
            if fromBytes { body(.hitsFromBytes) }
            body(.bytesServed(bytes))
        }
        statistics.withLock { statistics in each { statistics.count($0) } }
        each { metrics.record($0) }
    }
}

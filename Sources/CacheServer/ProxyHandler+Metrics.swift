#if Server
import DiskCacheLocking
import Foundation
import HTTPCache
import NIOCore

// What the handler counts: into ``ServerStatistics`` and the Prometheus metrics.
extension ProxyHandler {
    /// Counts `event` in ``statistics`` and in the Prometheus metrics.
    func note(_ event: ServerMetrics.Event) {
        statistics.withLock { $0.count(event) }
        metrics.record(event)
    }

    /// The door a hit was answered by, for ``noteHit(_:)``.
    enum HitDoor {
        /// The connection's task, which counted the request as it came and counts the bytes
        /// of each stored response it sends.
        case task
        /// ``EventLoopHitResponder``, with `bytes` of body sent; from a prepared answer when `prepared`.
        case eventLoop(bytes: Int64, prepared: Bool)
        /// ``RawHitResponder``, straight from the connection's bytes (always a prepared answer),
        /// with `bytes` of body sent.
        case fromBytes(bytes: Int64)
    }

    /// Counts a hit answered by `door`: on the event loop or from the bytes, its request and
    /// bytes too.
    func noteHit(_ door: HitDoor) {
        // Under one lock, with no array made: this runs for every hit.
        func each(_ body: (ServerMetrics.Event) -> Void) {
            body(.hits)
            let bytes: Int64
            switch door {
            case .task:
                return
            case .eventLoop(let sent, let prepared):
                if prepared { body(.hitsPrepared) }
                bytes = sent
            case .fromBytes(let sent):
                body(.hitsPrepared)
                body(.hitsFromBytes)
                bytes = sent
            }
            body(.requests)
            body(.hitsOnEventLoop)
            body(.bytesServed(bytes))
        }
        statistics.withLock { statistics in each { statistics.count($0) } }
        each { metrics.record($0) }
    }
}
#endif

public import Foundation

extension CachePolicyEngine {
    /// Why a fetch failed, for ``canServeStale(_:for:at:after:)``.
    public enum FetchFailure: Sendable, Hashable {
        /// The origin could not be reached: no connection, DNS failure, timeout.
        case disconnected
        /// The origin (or a gateway) answered with this status code.
        case errorStatus(Int)
    }

    /// Status codes that count as an error for `stale-if-error` (RFC 5861 §4): 500, 502, 503, 504.
    public static let staleIfErrorStatusCodes: Set<Int> = [500, 502, 503, 504]

    /// Whether `stored` may answer `request` after the fetch (or revalidation) failed.
    ///
    /// - A response still fresh for the request may always be served.
    /// - Never when an in-protocol directive forbids serving it stale (RFC 9111 §4.2.4): response
    ///   `no-cache` or `must-revalidate`; in a shared cache `proxy-revalidate` or `s-maxage`.
    /// - Yes when the staleness is within a permission: `stale-if-error=N` in the response or in
    ///   the request (RFC 5861 §4), or the request's `max-stale`. For an error status, only
    ///   500, 502, 503 and 504 count as errors for `stale-if-error`.
    /// - Otherwise, when the cache is disconnected (``FetchFailure/disconnected``) and
    ///   ``servesStaleWhenDisconnected`` is on: yes (RFC 9111 §4.2.4 allows a disconnected cache
    ///   to serve stale responses).
    ///
    /// Request `no-cache` and `max-age` do not stop a stale answer after a failure: the client
    /// asked for a validated response, but the alternative is no response at all.
    public func canServeStale(
        _ stored: StoredResponse,
        for request: CacheRequest,
        at now: Date,
        after failure: FetchFailure
    ) -> Bool {
        let responseDirectives = stored.cacheControl
        let freshness = freshness(of: stored, at: now)
        if responseDirectives.noCache || forbidsServingStale(responseDirectives) {
            // A fresh no-cache response still needs validation, and validation just failed.
            return freshness.isFresh && !responseDirectives.noCache
        }
        if freshness.isFresh { return true }

        let staleness = freshness.staleness
        let requestDirectives = request.cacheControl
        switch requestDirectives.maxStale {
        case .any?: return true
        case .seconds(let limit)? where staleness <= TimeInterval(limit): return true
        default: break
        }
        let isErrorForStaleIfError: Bool = switch failure {
        case .disconnected: true
        case .errorStatus(let status): Self.staleIfErrorStatusCodes.contains(status)
        }
        if isErrorForStaleIfError {
            let windows = [responseDirectives.staleIfError, requestDirectives.staleIfError].compactMap { $0 }
            if windows.contains(where: { staleness <= TimeInterval($0) }) { return true }
        }
        return failure == .disconnected && servesStaleWhenDisconnected
    }
}

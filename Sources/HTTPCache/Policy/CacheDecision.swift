public import HTTPTypes

/// What to do with a request, given what the cache holds: the answer of
/// ``CachePolicyEngine/decision(for:storedResponses:at:policy:)``.
///
/// The cases that carry a stored response name the one selected among the variants (RFC 9111
/// §4.1); the caller serves its body, or keeps it to merge a 304 into.
public enum CacheDecision: Sendable, Hashable {
    /// Serve the stored response; it is fresh enough for the request. No network.
    case fresh(StoredResponse)

    /// Serve the stored response although it is stale, because the request allows it
    /// (`max-stale`, or `only-if-cached` within a `stale-while-revalidate` window) or the
    /// cache policy does (`returnCacheDataElseLoad`, `returnCacheDataDontLoad`). No network.
    case stale(StoredResponse)

    /// Serve the stored response now, and revalidate it in the background with a request that
    /// carries `conditionalHeaders` (RFC 5861 §3). The background response updates the cache as
    /// a normal response would (a 304 via ``CachePolicyEngine/updating(_:with:requestTime:responseTime:)``).
    case staleWhileRevalidate(StoredResponse, conditionalHeaders: HTTPFields)

    /// Forward the request with `conditionalHeaders` added (`If-None-Match`, `If-Modified-Since`,
    /// RFC 9111 §4.3.1). On 304, merge the response into the stored one and serve the stored
    /// body; on any other final response, use that response. The header fields are never empty.
    case revalidate(StoredResponse, conditionalHeaders: HTTPFields)

    /// Forward the request, with `additionalHeaders` added (empty except for
    /// `reloadIgnoringLocalAndRemoteCacheData`, which adds `Cache-Control: no-cache` and
    /// `Pragma: no-cache`).
    ///
    /// `fallback` is a stored response that matches the request but could not be used or
    /// validated (it has no validator); serve it only if the fetch fails and
    /// ``CachePolicyEngine/canServeStale(_:for:at:after:)`` allows it.
    case mustFetch(additionalHeaders: HTTPFields, fallback: StoredResponse?)

    /// The request has `only-if-cached` and no stored response satisfies it: answer
    /// 504 (Gateway Timeout) without a network call (RFC 9111 §5.2.1.7).
    case gatewayTimeout

    /// The policy is ``RequestCachePolicy/returnCacheDataDontLoad`` and nothing is stored for
    /// the request: fail without a network call.
    case unavailableOffline

    /// The stored response the decision is about, if any (including a `mustFetch` fallback).
    public var storedResponse: StoredResponse? {
        switch self {
        case .fresh(let stored), .stale(let stored), .staleWhileRevalidate(let stored, _), .revalidate(let stored, _):
            stored
        case .mustFetch(_, let fallback):
            fallback
        case .gatewayTimeout, .unavailableOffline:
            nil
        }
    }

    /// Whether the caller must wait for the network before answering.
    public var requiresNetwork: Bool {
        switch self {
        case .revalidate, .mustFetch: true
        case .fresh, .stale, .staleWhileRevalidate, .gatewayTimeout, .unavailableOffline: false
        }
    }
}

public import Foundation
import HTTPTypes

extension CachePolicyEngine {
    /// The freshness lifetime of `stored` (RFC 9111 §4.2.1) and its current age (§4.2.3) at `now`.
    public func freshness(of stored: StoredResponse, at now: Date) -> Freshness {
        let (lifetime, source) = freshnessLifetime(of: stored)
        return Freshness(lifetime: lifetime, source: source, age: ResponseAge(of: stored, at: now))
    }

    /// The freshness lifetime of `stored`, in seconds, and where it came from (RFC 9111 §4.2.1).
    ///
    /// The first that applies:
    /// 1. shared cache: `s-maxage`;
    /// 2. `max-age`;
    /// 3. `Expires` minus `Date` (the response time when `Date` is missing), at least 0;
    /// 4. heuristic (§4.2.2), only for a heuristically cacheable status or a `public` response:
    ///    ``heuristicFraction`` of `Date` minus `Last-Modified`, at most
    ///    ``maximumHeuristicLifetime``; 0 without a `Last-Modified` earlier than `Date`.
    ///
    /// When a directive occurs more than once, its first occurrence counts; when the first
    /// `Expires` line is used for the same reason. Explicit information that cannot be read
    /// (`max-age=abc`, `max-age=-1`, `s-maxage` without a value, `Expires: 0`) gives lifetime 0
    /// with source ``Freshness/Source/invalid``: the response is stale (§4.2.1, §5.3), and no
    /// heuristic is used in its place.
    public func freshnessLifetime(of stored: StoredResponse) -> (lifetime: TimeInterval, source: Freshness.Source) {
        let directives = stored.cacheControl
        if mode == .shared, let sharedMaxAge = directives.seconds("s-maxage") {
            return sharedMaxAge.value.map { (TimeInterval($0), .sharedMaxAge) } ?? (0, .invalid)
        }
        if let maxAge = directives.seconds("max-age") {
            return maxAge.value.map { (TimeInterval($0), .maxAge) } ?? (0, .invalid)
        }
        if let expiresLine = stored.headers[values: .expires].first {
            guard let expires = HTTPDate.parse(expiresLine, relativeTo: stored.responseTime) else {
                return (0, .invalid)
            }
            return (max(0, expires.timeIntervalSince(stored.dateValue)), .expires)
        }
        let heuristicAllowed = Self.heuristicallyCacheableStatusCodes.contains(stored.status) || directives.isPublic
        guard heuristicAllowed, let lastModified = stored.lastModified else { return (0, .none) }
        let sinceModification = stored.dateValue.timeIntervalSince(lastModified)
        guard sinceModification > 0 else { return (0, .heuristic) }
        return (min(sinceModification * heuristicFraction, maximumHeuristicLifetime), .heuristic)
    }
}

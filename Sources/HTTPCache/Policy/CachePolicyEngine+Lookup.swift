public import Foundation
package import HTTPTypes

extension CachePolicyEngine {
    // MARK: Decision

    /// Decides how to answer `request` given the responses stored under its primary key.
    ///
    /// - Parameters:
    ///   - request: The incoming request.
    ///   - storedResponses: The responses stored under ``primaryKey(for:)`` of the request, in
    ///     any order. The engine keeps those stored for a compatible method (a GET request uses
    ///     GET responses, a HEAD request GET or HEAD responses, a POST request POST responses
    ///     when ``cachesPOSTResponses`` is on) whose `Vary` matches, and picks the most recent.
    ///   - now: The current local time.
    ///   - policy: The request's cache policy; see ``RequestCachePolicy`` for its table.
    ///
    /// Under ``RequestCachePolicy/useProtocolCachePolicy`` the rules are, for the selected
    /// response (RFC 9111 §4, §5.2; RFC 5861; RFC 8246):
    /// 1. `no-cache` in the response, or in the request (or `Pragma: no-cache` without
    ///    `Cache-Control`): revalidate.
    /// 2. Fresh, and the request's `max-age` (age ≤ N) and `min-fresh` (remaining lifetime ≥ N)
    ///    hold: ``CacheDecision/fresh(_:)``. An `immutable` fresh response also ignores the
    ///    request's `max-age`, which is how browsers ask for a reload; `no-cache` (a forced
    ///    reload) still revalidates it.
    /// 3. Stale, unless `must-revalidate` (or, in a shared cache, `proxy-revalidate` or
    ///    `s-maxage`) forbids serving it stale, and the request's `max-age` still holds and it
    ///    has no `min-fresh`:
    ///    - staleness ≤ the request's `max-stale` (any, without a value): ``CacheDecision/stale(_:)``;
    ///    - staleness ≤ `stale-while-revalidate`: ``CacheDecision/staleWhileRevalidate(_:conditionalHeaders:)``.
    /// 4. Otherwise revalidate: ``CacheDecision/revalidate(_:conditionalHeaders:)`` when the
    ///    response has a validator, else ``CacheDecision/mustFetch(additionalHeaders:fallback:)``
    ///    with the response as the fallback.
    ///
    /// With `only-if-cached` in the request, a decision that needs the network becomes
    /// ``CacheDecision/gatewayTimeout``, and a `stale-while-revalidate` one becomes
    /// ``CacheDecision/stale(_:)``.
    public func decision(
        for request: CacheRequest,
        storedResponses: [StoredResponse],
        at now: Date,
        policy: RequestCachePolicy = .useProtocolCachePolicy
    ) -> CacheDecision {
        switch policy {
        case .reloadIgnoringLocalCacheData:
            return .mustFetch(additionalHeaders: [:], fallback: nil)
        case .reloadIgnoringLocalAndRemoteCacheData:
            return .mustFetch(additionalHeaders: [.cacheControl: "no-cache", .pragma: "no-cache"], fallback: nil)
        case .reloadRevalidatingCacheData:
            guard let stored = selectStoredResponse(for: request, among: storedResponses) else {
                return .mustFetch(additionalHeaders: [:], fallback: nil)
            }
            return validate(stored)
        case .returnCacheDataElseLoad, .returnCacheDataDontLoad:
            guard let stored = selectStoredResponse(for: request, among: storedResponses) else {
                return policy == .returnCacheDataDontLoad
                    ? .unavailableOffline : .mustFetch(additionalHeaders: [:], fallback: nil)
            }
            return freshness(of: stored, at: now).isFresh ? .fresh(stored) : .stale(stored)
        case .useProtocolCachePolicy:
            let requestDirectives = request.cacheControl
            let decision: CacheDecision
            if let stored = selectStoredResponse(for: request, among: storedResponses) {
                decision = protocolDecision(for: stored, requestDirectives: requestDirectives, at: now)
            } else {
                decision = .mustFetch(additionalHeaders: [:], fallback: nil)
            }
            guard requestDirectives.onlyIfCached else { return decision }
            switch decision {
            case .revalidate, .mustFetch: return .gatewayTimeout
            case .staleWhileRevalidate(let stored, _): return .stale(stored)
            default: return decision
            }
        }
    }

    private func protocolDecision(
        for stored: StoredResponse,
        requestDirectives: CacheControl,
        at now: Date
    ) -> CacheDecision {
        let responseDirectives = stored.cacheControl
        if responseDirectives.noCache || requestDirectives.noCache {
            return validate(stored)
        }
        let freshness = freshness(of: stored, at: now)
        let age = freshness.currentAge
        let withinRequestMaxAge = requestDirectives.seconds("max-age").map { maxAge in
            // An invalid request max-age is read as 0: the strictest reading.
            age <= TimeInterval(maxAge.value ?? 0)
        } ?? true

        if freshness.isFresh {
            let meetsMaxAge = withinRequestMaxAge || responseDirectives.isImmutable
            let meetsMinFresh = requestDirectives.minFresh.map { freshness.remainingLifetime >= TimeInterval($0) } ?? true
            return meetsMaxAge && meetsMinFresh ? .fresh(stored) : validate(stored)
        }

        guard !forbidsServingStale(responseDirectives), withinRequestMaxAge, requestDirectives.minFresh == nil else {
            return validate(stored)
        }
        let staleness = freshness.staleness
        switch requestDirectives.maxStale {
        case .any?:
            return .stale(stored)
        case .seconds(let limit)? where staleness <= TimeInterval(limit):
            return .stale(stored)
        default:
            break
        }
        if let window = responseDirectives.staleWhileRevalidate, staleness <= TimeInterval(window) {
            return .staleWhileRevalidate(stored, conditionalHeaders: Self.conditionalHeaders(for: stored))
        }
        return validate(stored)
    }

    /// The request fields a ``RequestCachePolicy/useProtocolCachePolicy`` decision reads,
    /// besides those the stored response's `Vary` names: its cache directives.
    package static let directiveFields: [HTTPField.Name] = [.cacheControl, .pragma]

    /// Until when ``decision(for:storedResponses:at:policy:)`` answers ``CacheDecision/fresh(_:)``
    /// with `stored` (alone) to every request for it that carries none of ``directiveFields``:
    /// `now` plus its remaining freshness lifetime. Nil when it does not now, and when the
    /// response has a `Vary` (the decision then reads the request's fields as well).
    ///
    /// Such a request has no `max-age`, `min-fresh` or `no-cache`, so from `now` on the decision
    /// is fresh exactly while ``Freshness/isFresh`` holds: while the current age, which grows
    /// second for second (RFC 9111 §4.2.3: its resident time is `now` minus the response time),
    /// stays below the freshness lifetime. For a server that keeps what it derived from a fresh
    /// response and serves it again without deciding anew.
    package func freshnessDeadline(of stored: StoredResponse, url: URL, at now: Date) -> Date? {
        guard stored.varyFieldNames.isEmpty else { return nil }
        let request = CacheRequest(method: stored.requestMethod, url: url)
        guard case .fresh = decision(for: request, storedResponses: [stored], at: now) else { return nil }
        return now.addingTimeInterval(freshness(of: stored, at: now).remainingLifetime)
    }

    /// Revalidate when there is a validator; otherwise the request goes out unconditionally.
    private func validate(_ stored: StoredResponse) -> CacheDecision {
        let conditionalHeaders = Self.conditionalHeaders(for: stored)
        return conditionalHeaders.isEmpty
            ? .mustFetch(additionalHeaders: [:], fallback: stored)
            : .revalidate(stored, conditionalHeaders: conditionalHeaders)
    }

    /// Whether an in-protocol directive forbids serving the response stale (RFC 9111 §4.2.4):
    /// `must-revalidate`; in a shared cache also `proxy-revalidate` and `s-maxage` (§5.2.2.10).
    func forbidsServingStale(_ directives: CacheControl) -> Bool {
        directives.mustRevalidate
            || (mode == .shared && (directives.proxyRevalidate || directives.contains("s-maxage")))
    }

    // MARK: Selecting a stored response (RFC 9111 §4.1)

    /// The stored response to use for `request`: among those stored for a compatible method
    /// whose `Vary` matches the request, the most recent by `Date` (by response time when the
    /// dates are equal or missing). `nil` when none qualifies.
    public func selectStoredResponse(for request: CacheRequest, among storedResponses: [StoredResponse]) -> StoredResponse? {
        storedResponses
            .filter { canAnswer(request.method, with: $0.requestMethod) && Self.varyMatches($0, request: request) }
            .max { lhs, rhs in
                (lhs.dateValue, lhs.responseTime) < (rhs.dateValue, rhs.responseTime)
            }
    }

    private func canAnswer(_ requestMethod: String, with storedMethod: String) -> Bool {
        switch requestMethod {
        case "GET": storedMethod == "GET"
        case "HEAD": storedMethod == "GET" || storedMethod == "HEAD"
        case "POST": cachesPOSTResponses && storedMethod == "POST"
        default: false
        }
    }

    /// Whether `request` matches the header fields that `stored` was selected by (RFC 9111 §4.1).
    ///
    /// For each field name in the stored response's `Vary`, the request's value and the value
    /// captured when the response was stored must be equal after normalisation: field names
    /// compared case-insensitively, multiple field lines combined, list elements split at commas
    /// outside quoted strings and trimmed of whitespace. A field absent from both matches; absent
    /// from one does not. `Vary: *` never matches.
    public static func varyMatches(_ stored: StoredResponse, request: CacheRequest) -> Bool {
        for name in stored.varyFieldNames {
            if name == "*" { return false }
            if normalizedValue(of: name, in: request.headers) != normalizedValue(of: name, in: stored.varyingRequestHeaders) {
                return false
            }
        }
        return true
    }

    private static func normalizedValue(of name: String, in headers: HTTPFields) -> [String]? {
        guard let name = HTTPField.Name(name), headers.contains(name) else { return nil }
        return headers.listElements(for: name)
    }
}

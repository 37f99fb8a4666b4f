public import Foundation
public import HTTPTypes

/// The HTTP caching rules of RFC 9111, RFC 5861 (`stale-while-revalidate`, `stale-if-error`) and
/// RFC 8246 (`immutable`) as pure functions: request, stored responses and times in, decision out.
///
/// The engine does no I/O, keeps no state and never reads the clock: every function takes the
/// current time as an argument, so the same inputs always give the same answer. It is a small
/// `Sendable` value and may be used from any thread.
///
/// A cache built on it does, per request:
///
/// 1. ``primaryKey(for:)`` to find the stored responses for the request's URI;
/// 2. ``decision(for:storedResponses:at:policy:)`` to learn whether to serve one, revalidate it
///    or fetch;
/// 3. after a fetch: ``updating(_:with:requestTime:responseTime:)`` for a 304 (chosen with
///    ``storedResponsesToUpdate(by:among:)``), ``storability(ofStatus:headers:for:)`` for any
///    other response, and ``urlsToInvalidate(after:status:headers:)`` for an unsafe method;
/// 4. when the fetch fails: ``canServeStale(_:for:at:after:)`` to decide whether the stale
///    stored response may answer instead.
///
/// `docs/http-semantics.md` maps every rule of the RFCs to the code and its test.
public struct CachePolicyEngine: Sendable, Hashable {
    /// Private (one user) or shared (several users). `.private` by default.
    public var mode: CacheMode

    /// The fraction of the time since `Last-Modified` used as a heuristic freshness lifetime
    /// (RFC 9111 §4.2.2). 0.1 by default, the "typical setting" the RFC names.
    public var heuristicFraction: Double

    /// The longest heuristic freshness lifetime, in seconds. 86 400 (24 hours) by default, so a
    /// resource unchanged for years is still revalidated daily. Explicit lifetimes are never capped.
    public var maximumHeuristicLifetime: TimeInterval

    /// Whether responses to POST are stored and reused for later POSTs to the same key.
    /// `false` by default.
    ///
    /// RFC 9110 §9.3.3 only lets a POST response answer later GETs. Caches of API calls
    /// commonly want more: to answer a repeated POST (same URL and body) from the cache. When this
    /// is `true`, a POST response with explicit freshness (`max-age`, `s-maxage` in a shared
    /// cache, or `Expires`) is storable, and a POST request may be answered by a stored POST
    /// response. The caller must then make the body part of the key, as ``primaryKey(for:)``
    /// cannot see it.
    public var cachesPOSTResponses: Bool

    /// Whether a stale response may be served when the origin cannot be reached, without the
    /// origin or client having allowed it (RFC 9111 §4.2.4 permits this for a disconnected
    /// cache). `true` by default. `no-cache`, `must-revalidate` and, in a shared cache,
    /// `proxy-revalidate` and `s-maxage` still forbid it.
    public var servesStaleWhenDisconnected: Bool

    public init(
        mode: CacheMode = .private,
        heuristicFraction: Double = 0.1,
        maximumHeuristicLifetime: TimeInterval = 86_400,
        cachesPOSTResponses: Bool = false,
        servesStaleWhenDisconnected: Bool = true
    ) {
        self.mode = mode
        self.heuristicFraction = heuristicFraction
        self.maximumHeuristicLifetime = maximumHeuristicLifetime
        self.cachesPOSTResponses = cachesPOSTResponses
        self.servesStaleWhenDisconnected = servesStaleWhenDisconnected
    }

    // MARK: Status codes

    /// Status codes that are heuristically cacheable (RFC 9110 §15.1): a response with one of
    /// them may be stored and given a heuristic lifetime without explicit freshness information.
    /// 206 is on the RFC's list but partial content is never stored by this engine.
    public static let heuristicallyCacheableStatusCodes: Set<Int> = [
        200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501,
    ]

    /// Final status codes whose caching requirements the engine implements, for
    /// `must-understand` (RFC 9111 §5.2.2.3): those defined in RFC 9110 except 206 and 304.
    public static let understoodStatusCodes: Set<Int> = [
        200, 201, 202, 203, 204, 205,
        300, 301, 302, 303, 305, 307, 308,
        400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, 416, 417,
        421, 422, 426,
        500, 501, 502, 503, 504, 505,
    ]

    // MARK: Storability (RFC 9111 §3)

    /// Whether a response to `request` may be stored (RFC 9111 §3), and if not, why.
    ///
    /// The rules, in the order they are checked (the first failing one is reported):
    /// - the method is GET or HEAD, or POST when ``cachesPOSTResponses`` is on;
    /// - the status is final; it is not 206 or 304, and with `must-understand` it is one of
    ///   ``understoodStatusCodes``;
    /// - no `no-store` in the request, nor in the response (a response `no-store` is ignored
    ///   when `must-understand` is present and the status understood, §5.2.2.3);
    /// - shared cache: no `private` (its qualified form is treated as unqualified, so the
    ///   response is not stored rather than stored with the named fields removed);
    /// - shared cache: no `Authorization` in the request, unless the response has `public`,
    ///   `s-maxage` or `must-revalidate` (§3.5);
    /// - no `Vary: *` (such a response could never be reused, §4.1, so it is not stored);
    /// - something allows caching: `public`; `private` in a private cache; `max-age`; `Expires`;
    ///   `s-maxage` in a shared cache; or a heuristically cacheable status. For POST only
    ///   `max-age`, `Expires` or (shared) `s-maxage` count.
    ///
    /// A response with `no-cache` is storable; it is revalidated before every use.
    public func storability(ofStatus status: Int, headers: HTTPFields, for request: CacheRequest) -> Storability {
        let method = request.method
        let isPOST = method == "POST"
        guard method == "GET" || method == "HEAD" || (isPOST && cachesPOSTResponses) else {
            return .notStorable(.methodNotCacheable)
        }
        guard status >= 200 else { return .notStorable(.statusNotFinal) }
        let response = CacheControl(headers)
        let understood = Self.understoodStatusCodes.contains(status)
        guard status != 206, status != 304, understood || !response.mustUnderstand else {
            return .notStorable(.statusNotUnderstood)
        }
        if request.cacheControl.noStore { return .notStorable(.noStoreInRequest) }
        if response.noStore && !(response.mustUnderstand && understood) {
            return .notStorable(.noStoreInResponse)
        }
        if mode == .shared {
            if response.isPrivate { return .notStorable(.privateResponseInSharedCache) }
            if request.headers.contains(.authorization),
               !(response.isPublic || response.contains("s-maxage") || response.mustRevalidate) {
                return .notStorable(.authorizationInSharedCache)
            }
        }
        if headers.listElements(for: .vary).contains("*") { return .notStorable(.varyAsterisk) }

        let hasExplicitFreshness = response.contains("max-age") || headers.contains(.expires)
            || (mode == .shared && response.contains("s-maxage"))
        if isPOST {
            return hasExplicitFreshness ? .storable : .notStorable(.noFreshnessInformation)
        }
        let allowed = hasExplicitFreshness || response.isPublic
            || (mode == .private && response.isPrivate)
            || Self.heuristicallyCacheableStatusCodes.contains(status)
        return allowed ? .storable : .notStorable(.noFreshnessInformation)
    }
}

/// Whether a response may be stored (RFC 9111 §3), and if not, the first rule that forbids it.
public enum Storability: Sendable, Hashable {
    case storable
    case notStorable(Reason)

    /// Why a response may not be stored. The checks run in the order the cases are listed.
    public enum Reason: Sendable, Hashable {
        /// The request method is not one the cache stores: only GET and HEAD, and POST when
        /// enabled (RFC 9111 §3, first condition).
        case methodNotCacheable
        /// The status code is not final (1xx).
        case statusNotFinal
        /// The cache does not implement the status code's caching requirements: 206 (partial
        /// content is never stored), 304 (it updates a stored response instead, see
        /// ``CachePolicyEngine/updating(_:with:requestTime:responseTime:)``), or a code the engine
        /// does not know when the response has `must-understand` (§5.2.2.3).
        case statusNotUnderstood
        /// The request had `Cache-Control: no-store` (§5.2.1.5).
        case noStoreInRequest
        /// The response had `Cache-Control: no-store` (§5.2.2.5), not lifted by `must-understand`.
        case noStoreInResponse
        /// A shared cache received `Cache-Control: private`, qualified or not (§5.2.2.7).
        case privateResponseInSharedCache
        /// A shared cache received a response to a request with `Authorization`, and the response
        /// has none of `public`, `s-maxage`, `must-revalidate` (§3.5).
        case authorizationInSharedCache
        /// The response has `Vary: *`, so no later request could ever match it (§4.1).
        case varyAsterisk
        /// Nothing allows caching: no explicit freshness (`max-age`, `s-maxage` in a shared
        /// cache, `Expires`), no `public` (nor `private` in a private cache), and a status code
        /// that is not heuristically cacheable. For POST, explicit freshness is required.
        case noFreshnessInformation
    }

    /// Whether the response may be stored.
    public var isStorable: Bool { self == .storable }
}

/// The six cache policies of `URLRequest.CachePolicy`, as a value the engine can be tested with
/// anywhere, including the two that Apple's `URLCache` never implemented.
///
/// ``CachePolicyEngine/decision(for:storedResponses:at:policy:)`` applies them as follows:
///
/// | policy | stored response usable | nothing usable stored |
/// | --- | --- | --- |
/// | ``useProtocolCachePolicy`` | RFC 9111 / RFC 5861 decide | fetch (504 with `only-if-cached`) |
/// | ``reloadIgnoringLocalCacheData`` | fetch, cache not read | fetch |
/// | ``reloadIgnoringLocalAndRemoteCacheData`` | fetch with `Cache-Control: no-cache` and `Pragma: no-cache` | same |
/// | ``reloadRevalidatingCacheData`` | revalidate with its validators, always (fetch when it has none) | fetch |
/// | ``returnCacheDataElseLoad`` | serve it, fresh or stale | fetch |
/// | ``returnCacheDataDontLoad`` | serve it, fresh or stale | fail, no network call |
///
/// "Usable" means stored for a compatible method and matching the request's `Vary`-nominated
/// header fields; the policies that serve stale data ignore freshness and every directive
/// except `Vary`. Under every policy the response of a fetch may be stored when
/// ``CachePolicyEngine/storability(ofStatus:headers:for:)`` allows it.
public enum RequestCachePolicy: Sendable, Hashable, CaseIterable {
    /// HTTP caching semantics. The default.
    case useProtocolCachePolicy
    /// Always fetch; do not read the cache.
    case reloadIgnoringLocalCacheData
    /// Always fetch, and ask intermediaries not to answer from their caches either.
    case reloadIgnoringLocalAndRemoteCacheData
    /// Use a stored response only after the origin confirms it with a 304.
    case reloadRevalidatingCacheData
    /// Use any stored response, however old; fetch only when there is none.
    case returnCacheDataElseLoad
    /// Use any stored response, however old; never touch the network ("offline mode").
    case returnCacheDataDontLoad
}

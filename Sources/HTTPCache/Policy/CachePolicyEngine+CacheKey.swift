public import Foundation

extension CachePolicyEngine {
    /// The primary cache key of a request (RFC 9111 §2): the method and the target URI without
    /// its fragment, as `"GET https://example.com/a?b=1"`.
    ///
    /// HEAD shares the GET key, so a HEAD request can be answered from a stored GET response
    /// (RFC 9110 §9.3.2 allows it); a stored response from a HEAD request has no body and only
    /// ever answers HEAD requests (``selectStoredResponse(for:among:)`` checks that). Every other
    /// method keys under its own name; a cache that stores POST responses must add the body (or
    /// a digest of it) to the key.
    public static func primaryKey(for request: CacheRequest) -> String {
        primaryKey(method: request.method, url: request.url)
    }

    /// The primary cache key for `method` and `url`; see ``primaryKey(for:)``.
    public static func primaryKey(method: String, url: URL) -> String {
        let keyMethod = method == "HEAD" ? "GET" : method
        return keyMethod + " " + withoutFragment(url).absoluteString
    }
}

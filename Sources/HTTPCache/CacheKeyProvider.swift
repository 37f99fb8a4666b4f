#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
public import Foundation

/// Decides under which key a request's responses are stored (the "primary key" of RFC 9111 §2).
///
/// The responses stored under one key are the variants of one resource; `Vary` then selects
/// among them (RFC 9111 §4.1). Implementations must be pure and thread-safe: the cache calls
/// them from any thread, for every lookup, store and removal.
public protocol CacheKeyProvider: Sendable {
    /// The key for `request`, or `nil` to bypass the cache for it (nothing is read or stored).
    func key(for request: URLRequest) -> String?

    /// The keys to remove when `url` is invalidated by an unsafe request (RFC 9111 §4.4).
    /// By default, the key a plain GET of `url` gets from ``DefaultCacheKeyProvider``.
    func invalidationKeys(for url: URL) -> [String]
}

extension CacheKeyProvider {
    public func invalidationKeys(for url: URL) -> [String] {
        [CachePolicyEngine.primaryKey(method: "GET", url: url)]
    }
}

/// The default keys: the method and the full URL, query included and fragment dropped
/// (`"GET https://example.com/a?b=1"`), as ``CachePolicyEngine/primaryKey(for:)`` builds them.
/// HEAD shares the GET key.
///
/// A POST request is keyed on its body too (`"POST <url>\n<base64 body>"`), so that POST
/// responses, when ``CachePolicyEngine/cachesPOSTResponses`` is on, are only reused for the same
/// body. A POST whose body is a stream cannot be keyed and bypasses the cache.
public struct DefaultCacheKeyProvider: CacheKeyProvider {
    public init() {}

    public func key(for request: URLRequest) -> String? {
        guard let url = request.url else { return nil }
        let method = request.httpMethod ?? "GET"
        let primary = CachePolicyEngine.primaryKey(method: method, url: url)
        guard method == "POST" else { return primary }
        if request.httpBodyStream != nil { return nil }
        return primary + "\n" + (request.httpBody ?? Data()).base64EncodedString()
    }
}

/// Keys computed by a closure, for caches that key on more than the URL.
///
/// For example, the key of a signed API call made with POST: the URL, the `sign` header (which
/// identifies the user and device) and the body.
///
/// ```swift
/// let provider = ClosureCacheKeyProvider { request in
///     guard let url = request.url else { return nil }
///     let body = request.httpBody.map { String(decoding: $0, as: UTF8.self) } ?? ""
///     return "\(url.absoluteString)_\(request.value(forHTTPHeaderField: "sign") ?? "")_\(body)"
/// }
/// ```
public struct ClosureCacheKeyProvider: CacheKeyProvider {
    private let makeKey: @Sendable (URLRequest) -> String?
    private let makeInvalidationKeys: @Sendable (URL) -> [String]

    /// - Parameters:
    ///   - invalidationKeys: the keys to remove when a URL is invalidated; by default the
    ///     default GET key of the URL.
    ///   - key: the key of a request, or `nil` to bypass the cache.
    public init(
        invalidationKeys: @escaping @Sendable (URL) -> [String] = { [CachePolicyEngine.primaryKey(method: "GET", url: $0)] },
        key: @escaping @Sendable (URLRequest) -> String?
    ) {
        makeKey = key
        makeInvalidationKeys = invalidationKeys
    }

    public func key(for request: URLRequest) -> String? { makeKey(request) }

    public func invalidationKeys(for url: URL) -> [String] { makeInvalidationKeys(url) }
}

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
public import Foundation

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

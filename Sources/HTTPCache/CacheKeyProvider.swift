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

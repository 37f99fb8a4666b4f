#if canImport(FoundationNetworking)
public import FoundationNetworking
import Foundation
#else
public import Foundation
#endif

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

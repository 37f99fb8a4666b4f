#if Hummingbird
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCache
import HTTPTypes
import Hummingbird

// A request as the policy engine takes it. Hummingbird and the engine both speak
// swift-http-types' `HTTPFields`, so the fields pass as they are.

extension HTTPCachingMiddleware {
    /// One request as the app received it, and what the cache makes of it.
    struct Exchange {
        let request: Request
        let cacheRequest: CacheRequest

        /// Nil when the request's target is not a path (`*`, or a URI that does not parse).
        init?(_ request: Request) {
            guard let path = request.head.path, path.hasPrefix("/"),
                  let url = URL(string: "\(request.head.scheme ?? "http")://\(request.head.authority ?? "localhost")\(path)"),
                  url.host != nil
            else { return nil }
            self.request = request
            cacheRequest = CacheRequest(method: request.method.rawValue, url: url, headers: request.headers)
        }

        var isGET: Bool { request.method == .get }
        var isHEAD: Bool { request.method == .head }

        /// The request as a `URLRequest` (its method, URL and fields): what the cache's key
        /// provider and its stores take.
        var urlRequest: URLRequest { cacheRequest.urlRequest }
    }
}

#endif

#if Hummingbird
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCache
import HTTPTypes
import Hummingbird

// Where Hummingbird's swift-http-types meet the policy engine's types: a request and its
// fields as the engine takes them, and stored fields back as a response's. The only place the
// middleware converts between the two.

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
            cacheRequest = CacheRequest(method: request.method.rawValue, url: url, headers: HTTPHeaderFields(request.headers))
        }

        var isGET: Bool { request.method == .get }
        var isHEAD: Bool { request.method == .head }

        /// The request as a `URLRequest` (its method, URL and fields): what the cache's key
        /// provider and its stores take.
        var urlRequest: URLRequest {
            var request = URLRequest(url: cacheRequest.url)
            request.httpMethod = cacheRequest.method
            for field in cacheRequest.headers { request.addValue(field.value, forHTTPHeaderField: field.name) }
            return request
        }

        /// Whether the client's `If-None-Match` / `If-Modified-Since` hold for `stored`.
        func answersNotModified(from stored: StoredResponse) -> Bool {
            CachePolicyEngine.answersNotModified(ifNoneMatch: cacheRequest.headers.listElements(for: "If-None-Match"),
                                                 ifModifiedSince: cacheRequest.headers.values(for: "If-Modified-Since").first,
                                                 stored: stored)
        }
    }
}

extension HTTPHeaderFields {
    /// `fields`, line by line.
    init(_ fields: HTTPFields) {
        self.init(fields.map { ($0.name.rawName, $0.value) })
    }
}

extension HTTPFields {
    /// `fields`, line by line; a line whose name is not a valid field name is left out.
    init(_ fields: HTTPHeaderFields) {
        self.init()
        for field in fields {
            guard let name = HTTPField.Name(field.name) else { continue }
            append(HTTPField(name: name, value: field.value))
        }
    }

    /// Removes every line named one of `names`.
    mutating func removeAll(named names: [String]) {
        for name in names.compactMap({ HTTPField.Name($0) }) { self[name] = nil }
    }

    /// Sets each field of `fields`, replacing the lines of its name.
    mutating func replace(with fields: HTTPHeaderFields) {
        for field in fields {
            guard let name = HTTPField.Name(field.name) else { continue }
            self[name] = field.value
        }
    }
}
#endif

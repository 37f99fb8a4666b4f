#if canImport(FoundationNetworking)
public import FoundationNetworking
#else
public import Foundation
#endif
import HTTPTypes

extension CacheRequest {
    /// The method, URL and header fields of a `URLRequest`; `nil` when it has no URL.
    /// A request without an explicit method is a GET.
    public init?(_ request: URLRequest) {
        guard let url = request.url else { return nil }
        var headers = HTTPFields()
        for (name, value) in (request.allHTTPHeaderFields ?? [:]).sorted(by: { $0.key < $1.key }) {
            headers.append(name: name, value: value)
        }
        self.init(method: request.httpMethod ?? "GET", url: url, headers: headers)
    }

    /// The request as a `URLRequest`: its method, URL and fields (what the cache's key provider
    /// and its stores take).
    package var urlRequest: URLRequest {
        var request = URLRequest(url: url)
        request.httpMethod = method
        for field in headers { request.addValue(field.value, forHTTPHeaderField: field.name.rawName) }
        return request
    }
}

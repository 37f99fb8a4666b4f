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
}

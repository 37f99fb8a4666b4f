public import Foundation
public import HTTPTypes

/// The parts of an HTTP request that caching decisions depend on: method, target URI and
/// header fields.
///
/// It is a plain value, independent of `URLRequest`, so the policy engine can be used and tested
/// without Foundation's URL loading. ``init(_:)`` builds one from a `URLRequest` where
/// `FoundationNetworking` is available.
public struct CacheRequest: Sendable, Hashable {
    /// The request method, as sent (methods are case-sensitive, RFC 9110 §9.1).
    public var method: String
    /// The target URI.
    public var url: URL
    /// The request header fields.
    public var headers: HTTPFields

    public init(method: String = "GET", url: URL, headers: HTTPFields = [:]) {
        self.method = method
        self.url = url
        self.headers = headers
    }

    /// The request's cache directives: its `Cache-Control` field lines, or `Pragma: no-cache`
    /// read as `Cache-Control: no-cache` when the request has no `Cache-Control` field at all.
    ///
    /// RFC 9111 §5.4 deprecates `Pragma`; honouring `Pragma: no-cache` in requests without
    /// `Cache-Control` keeps the behaviour HTTP/1.0 clients expect and that RFC 7234 §5.4 required.
    public var cacheControl: CacheControl {
        if headers.contains(.cacheControl) {
            return CacheControl(headers)
        }
        let pragmaNoCache = headers.listElements(for: .pragma).contains { $0._asciiCaseInsensitiveEquals("no-cache") }
        return pragmaNoCache ? CacheControl(directives: [.init(name: "no-cache")]) : CacheControl()
    }
}

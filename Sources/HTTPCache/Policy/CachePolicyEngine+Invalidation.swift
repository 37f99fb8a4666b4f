public import Foundation
public import HTTPTypes

extension CachePolicyEngine {
    /// Methods defined as safe (RFC 9110 §9.2.1). Every other method, including unknown ones,
    /// is treated as unsafe for invalidation.
    public static let safeMethods: Set<String> = ["GET", "HEAD", "OPTIONS", "TRACE"]

    /// The URIs whose stored responses must be removed after a response to `request`
    /// (RFC 9111 §4.4).
    ///
    /// Empty for a safe method or an error or informational status (anything outside 200...399).
    /// Otherwise: the target URI, then the `Location` and `Content-Location` URIs when they have
    /// the same origin (scheme, host and port, default ports filled in) as the target. Relative
    /// references are resolved against the target URI, fragments are removed, and duplicates are
    /// listed once. The cache removes every stored response under ``primaryKey(method:url:)``
    /// of each URI with `GET` (and any POST entries it keeps for them).
    public static func urlsToInvalidate(after request: CacheRequest, status: Int, headers: HTTPFields) -> [URL] {
        guard !safeMethods.contains(request.method), (200...399).contains(status) else { return [] }
        let target = withoutFragment(request.url)
        var urls = [target]
        for name in [HTTPField.Name.location, .contentLocation] {
            guard let reference = headers[values: name].first,
                  let resolved = URL(string: reference, relativeTo: target)?.absoluteURL
            else { continue }
            let url = withoutFragment(resolved)
            if sameOrigin(url, target), !urls.contains(url) {
                urls.append(url)
            }
        }
        return urls
    }

    static func withoutFragment(_ url: URL) -> URL {
        let text = url.absoluteString
        guard let hash = text.firstIndex(of: "#") else { return url }
        return URL(string: String(text[..<hash])) ?? url
    }

    /// Same scheme, host and port (RFC 6454 origin), with default ports for http and https.
    static func sameOrigin(_ lhs: URL, _ rhs: URL) -> Bool {
        func origin(_ url: URL) -> (String, String, Int?)? {
            guard let scheme = url.scheme?._asciiLowercased, let host = url.host?._asciiLowercased else { return nil }
            let port = url.port ?? (scheme == "https" ? 443 : scheme == "http" ? 80 : nil)
            return (scheme, host, port)
        }
        guard let a = origin(lhs), let b = origin(rhs) else { return false }
        return a.0 == b.0 && a.1 == b.1 && a.2 == b.2
    }
}

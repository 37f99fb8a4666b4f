#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
public import Foundation

/// The default transport: a `URLSession` whose own cache is switched off.
///
/// The session's configuration is ephemeral, with `urlCache = nil` and
/// `requestCachePolicy = .reloadIgnoringLocalCacheData`, so that it neither answers from nor
/// writes to any `URLCache` (including `URLCache.shared`). Cancelling the calling task cancels
/// the session's data task.
public struct URLSessionTransport: HTTPTransport {
    /// The session requests go through.
    public let session: URLSession

    /// A transport over `session`; by default one from ``makeSession()``.
    public init(session: URLSession = URLSessionTransport.makeSession()) {
        self.session = session
    }

    /// An ephemeral session with no cache.
    public static func makeSession() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        return URLSession(configuration: configuration)
    }

    public func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else {
            throw HTTPCacheError(.notHTTPResponse, "\(request.url?.absoluteString ?? "request") did not get an HTTP response")
        }
        return (data, http)
    }
}

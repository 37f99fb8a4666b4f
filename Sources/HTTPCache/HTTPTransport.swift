#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
public import Foundation

/// Sends one HTTP request and returns the final response: what ``CachingHTTPClient`` uses to
/// reach the network.
///
/// A transport must not answer from a cache of its own (the client sends conditional requests
/// and expects to see the 304s), must return a 304 as is, and should throw when the task is
/// cancelled.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the body and the response.
    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse)
}

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

/// An ``HTTPTransport`` that hands the body over as it arrives, so that ``CachingHTTPClient``
/// can fetch a body larger than memory: the client writes it to a file as it comes (see
/// ``CachingHTTPClient/download(for:chunkSize:)``), where a plain transport's body arrives whole, as `Data`.
///
/// A conformer implements ``stream(_:)``; the ``HTTPTransport/send(_:)`` it gets collects the body in memory.
/// The rules of ``HTTPTransport`` hold: no cache of its own, a 304 returned as is, and a
/// cancelled task ends the request (before the head, ``stream(_:)`` throws; after it, the body's
/// iteration does).
public protocol StreamingHTTPTransport: HTTPTransport {
    /// Sends `request` and returns the response as soon as its head is here, with the body as
    /// chunks that arrive as it is iterated. An error before the head is thrown here; one while
    /// the body arrives (the connection lost, a deadline passed), from the body's iteration.
    func stream(_ request: URLRequest) async throws -> (HTTPURLResponse, HTTPBodyStream)
}

extension StreamingHTTPTransport {
    /// ``stream(_:)`` with the body collected in memory.
    public func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let (response, body) = try await stream(request)
        var data = Data()
        for try await chunk in body { data.append(chunk) }
        return (data, response)
    }
}

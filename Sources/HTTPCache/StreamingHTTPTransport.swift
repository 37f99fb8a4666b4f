#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
public import Foundation

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

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

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
public import Foundation

extension CachingHTTPClient {
    /// Counters since the client was created, read as one consistent value.
    public struct Statistics: Sendable, Hashable {
        /// Calls of ``CachingHTTPClient/data(for:)``, ``CachingHTTPClient/response(for:)`` and
        /// ``CachingHTTPClient/download(for:chunkSize:)``, and elements yielded by
        /// ``CachingHTTPClient/responses(for:)``.
        public var requestCount = 0
        /// Requests that went to the transport, background refreshes included. Coalesced
        /// callers share one.
        public var networkCount = 0
        /// Requests answered from the cache without waiting for the network: fresh, stale where
        /// allowed, stale-while-revalidate, and stale after a failed fetch.
        public var hitCount = 0
        /// Requests answered with the stored body after the origin confirmed it with a 304.
        public var conditionalHitCount = 0

        public init() {}
    }

    /// Where a response came from.
    public enum Source: Sendable, Hashable {
        /// From the origin (a 200, a 404, any full response).
        case network
        /// From the cache, without the network (or while a background refresh runs).
        case cache
        /// From the cache after the origin answered a conditional request with 304; the header
        /// fields are the stored ones updated by the 304.
        case revalidated
        /// From the cache because the fetch failed and the response allowed serving it stale
        /// (`stale-if-error`, `max-stale`, or a disconnected cache).
        case staleAfterError
        /// Synthesised 504: the request had `only-if-cached` and nothing stored satisfied it.
        case gatewayTimeout
    }

    /// A response with the body and where it came from.
    public struct Response: Sendable {
        /// The body.
        public var data: Data
        /// The response. A response served from the cache carries an `Age` field (RFC 9111 §5.1).
        public var response: HTTPURLResponse
        /// Where it came from.
        public var source: Source

        public init(data: Data, response: HTTPURLResponse, source: Source) {
            self.data = data
            self.response = response
            self.source = source
        }
    }

    /// A response with its body as chunks read as they are asked for (see
    /// ``CachingHTTPClient/download(for:chunkSize:)``).
    public struct Download: Sendable {
        /// The body. Iterate it once.
        public var body: HTTPBodyStream
        /// The response. A response served from the cache carries an `Age` field (RFC 9111 §5.1).
        public var response: HTTPURLResponse
        /// Where it came from.
        public var source: Source

        public init(body: HTTPBodyStream, response: HTTPURLResponse, source: Source) {
            self.body = body
            self.response = response
            self.source = source
        }
    }
}

#if AsyncHTTPClient
public import AsyncHTTPClient
#if canImport(FoundationNetworking)
public import FoundationNetworking
import Foundation
#else
public import Foundation
#endif
public import HTTPCache
public import NIOCore
import NIOHTTP1

/// A ``HTTPCache/StreamingHTTPTransport`` over AsyncHTTPClient: ``HTTPCache/CachingHTTPClient``
/// on SwiftNIO, with bodies that stream (a body larger than memory is written to a file in the
/// cache's directory as it arrives; see ``HTTPCache/CachingHTTPClient/download(for:chunkSize:)``).
///
/// ```swift
/// let client = CachingHTTPClient(cache: try HTTPURLCache(directory: cacheDirectory),
///                                transport: AsyncHTTPClientTransport())
/// let download = try await client.download(for: URLRequest(url: url))
/// for try await chunk in download.body { try file.write(contentsOf: chunk) }
/// ```
///
/// **Requests.** The request's method (GET when it has none), URL, header fields and
/// `httpBody` are sent; a request with an `httpBodyStream` is refused
/// (``HTTPCache/HTTPCacheError/Code/invalidRequest``). The `URLRequest`'s `timeoutInterval`
/// and `cachePolicy` are not used: the cache policy is the caching client's, and time limits
/// are below. The transport has no cache of its own, as ``HTTPCache/HTTPTransport`` requires.
///
/// **Redirects** are followed as the `HTTPClient`'s configuration says: by default up to 5,
/// refusing cycles, as `URLSession` follows them. The response is the last one (its `url` the
/// final URL) and the caching client stores it for the request it sent. A client configured
/// with `redirectConfiguration: .disallow` returns 3xx responses as they are.
///
/// **Time limits.** Each request (head and whole body) must finish within ``timeout``
/// (AsyncHTTPClient's deadline; 10 minutes by default), or the body's iteration throws
/// `HTTPClientError.deadlineExceeded`; the `HTTPClient`'s own connect and read timeouts apply
/// too. A body cut short by the deadline is a failed fetch: nothing is stored.
///
/// **Memory.** One `ByteBuffer` of the body at a time, as AsyncHTTPClient hands them over,
/// copied into `Data`.
///
/// **Threads.** Any task; cancelling the calling task cancels the request, and cancelling
/// the task that iterates the body ends it with `CancellationError`.
public struct AsyncHTTPClientTransport: StreamingHTTPTransport {
    /// The client requests go through. The transport never shuts it down.
    public let client: HTTPClient
    /// The time a request may take, head and body: 10 minutes by default.
    public let timeout: TimeAmount

    /// A transport over `client`, `HTTPClient.shared` by default (whose configuration follows
    /// redirects and decompresses nothing).
    public init(client: HTTPClient = .shared, timeout: TimeAmount = .minutes(10)) {
        self.client = client
        self.timeout = timeout
    }

    public func stream(_ request: URLRequest) async throws -> (HTTPURLResponse, HTTPBodyStream) {
        let outgoing = try Self.clientRequest(request)
        let response = try await client.execute(outgoing, timeout: timeout)
        let url = response.url ?? request.url!
        guard let head = HTTPURLResponse(url: url, statusCode: Int(response.status.code),
                                         httpVersion: "HTTP/\(response.version.major).\(response.version.minor)",
                                         headerFields: Self.headerFields(response.headers)) else {
            throw HTTPCacheError(.notHTTPResponse, "\(url.absoluteString) got a response that cannot be an HTTPURLResponse")
        }
        return (head, HTTPBodyStream(Chunks(body: response.body)))
    }

    /// `request` as AsyncHTTPClient's request.
    static func clientRequest(_ request: URLRequest) throws -> HTTPClientRequest {
        guard let url = request.url else {
            throw HTTPCacheError(.invalidRequest, "the request has no URL")
        }
        guard request.httpBodyStream == nil else {
            throw HTTPCacheError(.invalidRequest, "\(url.absoluteString): a body stream cannot be sent; set httpBody")
        }
        var outgoing = HTTPClientRequest(url: url.absoluteString)
        outgoing.method = HTTPMethod(rawValue: request.httpMethod ?? "GET")
        for (name, value) in request.allHTTPHeaderFields ?? [:] {
            outgoing.headers.add(name: name, value: value)
        }
        if let body = request.httpBody {
            outgoing.body = .bytes(body)
        }
        return outgoing
    }

    /// The header fields as `HTTPURLResponse` takes them: a field that occurs more than once,
    /// its values joined with ", " (RFC 9110 §5.3), as `URLSession` does.
    static func headerFields(_ headers: HTTPHeaders) -> [String: String] {
        var fields: [String: String] = [:]
        var spelling: [String: String] = [:]
        for (name, value) in headers {
            let lowercased = name.lowercased()
            if let first = spelling[lowercased] {
                fields[first]! += ", " + value
            } else {
                spelling[lowercased] = name
                fields[name] = value
            }
        }
        return fields
    }

    /// The body's buffers as `Data`, ending with `CancellationError` when the iterating task is
    /// cancelled (so that a body cut short is never taken for a whole one).
    struct Chunks: AsyncSequence, Sendable {
        typealias Element = Data
        let body: HTTPClientResponse.Body

        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: body.makeAsyncIterator()) }

        struct AsyncIterator: AsyncIteratorProtocol {
            var base: HTTPClientResponse.Body.AsyncIterator

            mutating func next() async throws -> Data? {
                let buffer = try await base.next()
                try Task.checkCancellation()
                return buffer.map { Data($0.readableBytesView) }
            }
        }
    }
}
#endif

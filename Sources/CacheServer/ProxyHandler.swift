#if Server
import DiskCache
import DiskCacheLocking
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCache
import Logging
import NIOCore
import NIOHTTP1
import HTTPTypes

/// Answers requests: from the cache as RFC 9111 allows, else from the origin, storing what may
/// be stored as it streams through.
final class ProxyHandler: Sendable {
    let cache: HTTPResponseStore
    let configuration: ServerConfiguration
    let origin: OriginClient
    let logger: Logger
    /// One origin fetch per resource at a time when nothing stored can answer: the others wait
    /// for it, then look in the cache again (nginx's `proxy_cache_lock`). A waiter whose task is
    /// cancelled stops at once with `CancellationError` (its connection closes).
    let gate = Coalescer<Void>()
    let statistics = PthreadMutex(ServerStatistics())
    let metrics = ServerMetrics()
    /// Answers prepared for hits held in memory (``ServerConfiguration/preparedCapacity`` bytes).
    let prepared: PreparedHits
    /// The background refreshes under way, one per key (``refreshInBackground(_:key:validating:adding:)``).
    let refreshTasks = PthreadMutex([String: Task<Void, Never>]())
    /// Requests counted for ``ServerConfiguration/minimumUses``, by the hash of their key.
    let uses = PthreadMutex(UseCounts<Int>())
    /// The origin's URL as text, which every request's target is appended to.
    private let originPrefix: String

    init(cache: HTTPResponseStore, configuration: ServerConfiguration, origin: OriginClient, logger: Logger) {
        self.cache = cache
        self.configuration = configuration
        self.originPrefix = configuration.origin.description
        self.origin = origin
        self.logger = logger
        self.prepared = PreparedHits(capacity: configuration.preparedCapacity)
    }

    var engine: CachePolicyEngine { cache.engine }
    /// This node in `Via`, for messages it sends as HTTP/1.1.
    var via: String { "1.1 \(configuration.viaName)" }

    /// One request as the client sent it, and what the cache makes of it.
    struct Exchange {
        let request: HTTPRequest
        /// Path and query, as sent to the origin.
        let target: String
        let cacheRequest: CacheRequest
        var method: HTTPRequest.Method { request.method }
        var fields: HTTPFields { request.headerFields }
        var isHEAD: Bool { request.method == .head }
        /// Interim (1xx) responses may be sent to the client: it speaks HTTP/1.1 or later
        /// (RFC 9110 §15.2: none to a client of HTTP/1.0).
        var acceptsInterim = true
        /// Which prepared answer (``PreparedHits``) answers this request: the method, and the
        /// target as the client sent it.
        var preparedTarget: PreparedHits.Target { PreparedHits.Target(isHEAD: isHEAD, uri: request.path ?? "") }

        init(request: HTTPRequest, target: String, url: URL) {
            self.request = request
            self.target = target
            self.cacheRequest = CacheRequest(method: request.method.rawValue, url: url, headers: CachePolicyEngine.endToEndFields(request.headerFields))
        }

        /// The request as a `URLRequest` (its method, URL and end-to-end fields), made anew
        /// each time: a hit answered on the event loop needs none (see
        /// `HTTPResponseStore.key(method:url:request:)`).
        var urlRequest: URLRequest { cacheRequest.urlRequest }

        /// The same request as a GET (what a refresh after a HEAD fetches and stores).
        var asGET: Exchange {
            var get = request
            get.method = .get
            var exchange = Exchange(request: get, target: target, url: cacheRequest.url)
            exchange.acceptsInterim = acceptsInterim
            return exchange
        }
    }

    /// Answers the request whose head is `head`, reading the rest of it from `parts`. Throws when
    /// the response could not be finished (the client went, or the origin's body was cut short):
    /// the connection must then close.
    ///
    /// On the admin address (`admin`) only the node's own endpoints answer; when there is one,
    /// the client port forwards their paths and `PURGE` to the origin like any other request.
    ///
    /// A client that asked for `100 Continue` gets it as its body is about to be read (to be
    /// forwarded, or read and dropped), as nginx sends it (`ngx_http_read_client_request_body`,
    /// `ngx_http_discard_request_body`).
    ///
    /// `declined`: what the event loop made of this request before it left it to the task.
    func handle(_ head: HTTPRequestHead, parts: inout ClientParts, writer: ClientWriter, admin: Bool = false,
                declined: DeclinedRequest? = nil) async throws -> Outcome {
        let sendsContinue = Self.continueExpected(head)
        func drain(_ parts: inout ClientParts) async throws {
            if sendsContinue { try await writer.write(.head(HTTPResponseHead(version: .http1_1, status: .continue))) }
            try await Self.drain(&parts)
        }
        if let declined {
            // A GET or HEAD on the client port whose target is the origin's (see `answerOnEventLoop`).
            note(.requests)
            try await drain(&parts)
            return try await answerFromCache(declined.exchange, known: declined.stored, writer: writer)
        }
        guard let request = Fields.request(head) else {
            try await drain(&parts)
            return try await respond(.badRequest, "The method is not a token", writer: writer, isHEAD: false)
        }
        let servesOwn = admin || configuration.adminHost == nil
        let path = request.path ?? ""
        if servesOwn, path.hasPrefix("/_cache/") {
            try await drain(&parts)
            return try await answerInternal(request, writer: writer, admin: admin)
        }
        if servesOwn, request.method.rawValue == "PURGE" {
            try await drain(&parts)
            return try await purge(request, writer: writer)
        }
        if admin {
            try await drain(&parts)
            return try await respond(.notFound, "The admin address answers /_cache/health, /_cache/metrics and PURGE only",
                                     writer: writer, isHEAD: request.method == .head, cacheStatus: "INTERNAL")
        }
        guard let (target, url) = originURL(of: path) else {
            try await drain(&parts)
            return try await respond(.badRequest, "The request target \(path) is not a path", writer: writer, isHEAD: request.method == .head)
        }
        var exchange = Exchange(request: request, target: target, url: url)
        exchange.acceptsInterim = head.version.major > 1 || (head.version.major == 1 && head.version.minor >= 1)
        note(.requests)
        if request.method == .get || request.method == .head {
            try await drain(&parts)
            return try await answerFromCache(exchange, writer: writer)
        }
        return try await forwardUnsafe(exchange, sendsContinue: sendsContinue, parts: &parts, writer: writer)
    }

    /// The origin-form target of a request target and the origin's URL for it; nil when the
    /// target is not a path (or an absolute URI).
    func originURL(of uri: String) -> (target: String, url: URL)? {
        guard let target = Self.target(of: uri), let url = URL(string: originPrefix + target) else { return nil }
        return (target, url)
    }

    /// The origin-form target of a request target: a path (and query) as is, an absolute URI's path and query.
    static func target(of uri: String) -> String? {
        if uri.hasPrefix("/") { return uri }
        guard let components = URLComponents(string: uri), components.scheme != nil else { return nil }
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        return path + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
    }

    private static func drain(_ parts: inout ClientParts) async throws {
        while let part = try await parts.next() {
            if case .end = part { return }
        }
    }
}
#endif

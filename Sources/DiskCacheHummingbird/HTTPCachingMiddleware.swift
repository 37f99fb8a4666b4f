#if Hummingbird
import DiskCache
public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
public import HTTPCache
import HTTPTypes
public import Hummingbird
public import Logging
import NIOCore
public import ServiceLifecycle

/// A Hummingbird middleware that answers GET and HEAD requests from an RFC 9111 shared cache
/// (an ``HTTPCache/HTTPURLCache`` whose engine is in `.shared` mode), as the package's caching
/// reverse proxy does in front of an origin: here the origin is the rest of the app.
///
/// ```swift
/// let logger = Logger(label: "myapp")
/// let responseCache = try HTTPCachingMiddleware<BasicRequestContext>(
///     directory: URL(fileURLWithPath: "/var/cache/myapp/http"), logger: logger)
/// let router = Router()
/// router.add(middleware: responseCache)
/// router.get("/report") { _, _ in
///     Response(status: .ok, headers: [.cacheControl: "max-age=60"], body: .init(byteBuffer: ByteBuffer(string: "...")))
/// }
/// let app = Application(router: router, services: [responseCache], logger: logger)
/// ```
///
/// **Lifecycle.** The middleware is a `Service`: add it to the application's services, as
/// Hummingbird's persist drivers are, and when the application shuts down (after its server
/// has stopped taking requests) it closes the cache it opened (``init(directory:memoryCapacity:diskCapacity:bodySizeLimit:logger:)``),
/// so the next start opens a cleanly closed cache. A cache it was given
/// (``init(cache:bodySizeLimit:)``) is left to its owner.
///
/// **Directory.** Its cache's kind is `HTTPURLCache.shared`: a directory holding another kind
/// of cache (a `DiskCachePersistDriver`'s, a private `HTTPURLCache`'s) is refused at open
/// with `DiskCacheError.Code.otherKind` and left as it is. Give each its own directory.
///
/// **What it stores.** The app's responses to GET that the app marked as cacheable (a
/// `max-age`, `s-maxage` or `public` directive, or an `Expires` field) and that a shared cache
/// may store (RFC 9111 §3), whose bodies are at most ``bodySizeLimit`` bytes. A response that
/// says nothing is not kept, though the RFC would allow a heuristic lifetime for some: a route
/// that says nothing may depend on who asks. It
/// answers a GET from a stored GET response, a HEAD from a stored GET response too (RFC 9110
/// §9.3.2), keeping apart the variants the response's `Vary` names; `s-maxage` counts before
/// `max-age`.
///
/// **What it never stores:** responses with `no-store` or `private`; responses to requests with
/// `Authorization`, unless the response has `public`, `s-maxage` or `must-revalidate`;
/// responses that set a cookie (`Set-Cookie`: a stored cookie would reach every client after,
/// one user's session becoming the next one's); `Vary: *`; 206 and 304; responses to HEAD and to
/// other methods; bodies over ``bodySizeLimit``; bodies that failed while being written.
///
/// **Per request**, as the policy engine decides (`CachePolicyEngine.decision`):
/// - a fresh stored response answers without calling the app, with its `Age`; when the
///   client's `If-None-Match` or `If-Modified-Since` holds for it, the answer is a 304 without a
///   body;
/// - a stale one (or any, when the request has `Cache-Control: no-cache` or a `max-age` it is
///   older than) is revalidated: the app is called with the stored response's validators
///   (`If-None-Match`, `If-Modified-Since`) in place of the client's; a 304 from the app
///   freshens the stored response, which then answers; any other answer replaces it. A
///   `stale-while-revalidate` window is revalidated the same way, before answering;
/// - when the app answers a revalidation or a fetch with 500, 502, 503 or 504 and the stored
///   response's `stale-if-error` allows it, the stored response answers instead;
/// - `Cache-Control: only-if-cached` with nothing usable stored is answered 504;
/// - a request the engine would otherwise answer from the app goes to it; its response is
///   stored on the way back if it may be.
///
/// A request with another method goes to the app; when the app answers it with a 2xx or 3xx and
/// the method is unsafe (anything but GET, HEAD, OPTIONS and TRACE), what is stored for the
/// target URI, and for the `Location` and `Content-Location` it names on the same host, is
/// removed before the response is returned (RFC 9111 §4.4).
///
/// **Ranges.** A `Range` request the cache cannot answer goes to the app as it came (a 206 is
/// never stored); one it can answer gets the whole stored response, a 200, as HTTP allows.
///
/// **Keys.** A request's URI is its `Host` (HTTP/2's `:authority`; `localhost` without one),
/// path and query: with the cache's key provider (by default the method and that URI), two
/// hosts served by one app keep their responses apart. A request whose target is not a path
/// goes to the app unchanged.
///
/// **Memory.** A response being stored is passed on to the client as the app writes it, and
/// collected on the way up to ``bodySizeLimit`` bytes; once it passes the limit what was
/// collected is dropped and the rest only passes through. A response whose `Content-Length`
/// is over the limit is not collected at all. A hit is read whole (at most ``bodySizeLimit``
/// bytes, the largest body this middleware stores) before it is answered, so that a body that
/// fails its checksum is found before anything is sent; a larger body (one stored in the same
/// directory by something else) is streamed in chunks of 1 MiB. No response is ever held whole
/// beyond those limits.
///
/// **Failures.** A cache that fails (an I/O error, a lock another process holds too long) does
/// not fail the request: a lookup that cannot read finds nothing and the app answers; a
/// response that cannot be stored is passed on and the failure logged.
///
/// **Threads.** Every lookup, store and invalidation runs on the cache's own I/O threads (the
/// async API of `DiskCache`): never on an event loop, and never on Swift's cooperative pool.
///
/// **Durability.** A response that is stored is committed to the cache before the last part
/// of its body goes to the client (with a `Content-Length`, the write that completes the body
/// waits for the store; without one, the end of the chunked body does): a client that has the
/// whole response finds it stored, in this process and in any other that opens the directory,
/// even if this process is killed at once. Power loss is another matter: the cache's
/// durability mode says what survives it (`.batched` by default: the last second may be lost).
///
/// **Logging.** What happens to a request (a store that failed) is logged to the request
/// context's logger; what happens to the cache (what its open repaired, its sweeps) to the
/// logger given at ``init(directory:memoryCapacity:diskCapacity:bodySizeLimit:logger:)`` (pass
/// the application's).
public struct HTTPCachingMiddleware<Context: RequestContext>: RouterMiddleware, Service {
    /// The cache the responses are kept in; its engine is in `.shared` mode.
    public let cache: HTTPURLCache
    /// The largest body stored, in bytes (``defaultBodySizeLimit`` unless given).
    public let bodySizeLimit: Int

    /// 1 MiB: the largest body stored when no limit is given.
    public static var defaultBodySizeLimit: Int { 1 << 20 }

    /// Whether the middleware opened ``cache`` (and closes it at shutdown).
    private let ownsCache: Bool
    /// The responses ``cache`` holds, which the middleware looks up and stores into.
    private var store: HTTPResponseStore { cache.responseStore }

    /// A middleware over `cache`.
    ///
    /// - Parameters:
    ///   - cache: the cache; its engine must be in `.shared` mode
    ///     (`HTTPURLCache(directory: ..., engine: CachePolicyEngine(mode: .shared))`): a private
    ///     cache would store `private` responses and answer every client with them.
    ///   - bodySizeLimit: the largest body stored, in bytes; 1 MiB by default. Responses with
    ///     larger bodies pass through unstored.
    /// - Throws: ``HTTPCachingMiddlewareError`` when the cache is private or the limit negative.
    public init(cache: HTTPURLCache, bodySizeLimit: Int = defaultBodySizeLimit) throws {
        try self.init(cache: cache, bodySizeLimit: bodySizeLimit, ownsCache: false)
    }

    private init(cache: HTTPURLCache, bodySizeLimit: Int, ownsCache: Bool) throws {
        guard cache.engine.mode == .shared else { throw HTTPCachingMiddlewareError.privateCache }
        guard bodySizeLimit >= 0 else { throw HTTPCachingMiddlewareError.negativeBodySizeLimit(bodySizeLimit) }
        self.cache = cache
        self.bodySizeLimit = bodySizeLimit
        self.ownsCache = ownsCache
    }

    /// A middleware over a shared cache it opens (or creates) in `directory`.
    ///
    /// - Parameters:
    ///   - directory: the cache's directory; other processes may have it open at the same time
    ///     (see ``HTTPCache/HTTPURLCache/init(memoryCapacity:diskCapacity:directory:engine:keyProvider:willStore:)``).
    ///   - memoryCapacity: bytes of responses kept in memory; 16 MiB by default.
    ///   - diskCapacity: bytes kept on disk; 256 MiB by default.
    ///   - bodySizeLimit: the largest body stored, in bytes; 1 MiB by default.
    ///   - logger: where the cache logs what it does by itself (what its open repaired, its
    ///     sweeps): the application's logger, typically. The cache's own (label `DiskCache`)
    ///     by default.
    /// - Throws: the cache's errors when `directory` cannot be opened as one (among them
    ///   `DiskCacheError.Code.otherKind` for a directory that holds another kind of cache,
    ///   which is left as it is), and ``HTTPCachingMiddlewareError`` for a negative limit.
    public init(directory: URL, memoryCapacity: Int = 16 << 20, diskCapacity: Int = 256 << 20,
                bodySizeLimit: Int = defaultBodySizeLimit, logger: Logger? = nil) throws {
        var configuration = DiskCache.Configuration()
        if let logger { configuration.logger = logger }
        let cache = HTTPURLCache(store: try HTTPResponseStore(memoryCapacity: memoryCapacity, diskCapacity: diskCapacity, directory: directory,
                                                             engine: CachePolicyEngine(mode: .shared), diskConfiguration: configuration))
        try self.init(cache: cache, bodySizeLimit: bodySizeLimit, ownsCache: true)
    }

    /// Runs until the application shuts down, then closes the cache the middleware opened (a
    /// clean close: the journal records it), or leaves one it was given to its owner. The
    /// application's `ServiceGroup` shuts its services down after its server, so no request is
    /// answered from a closed cache.
    public func run() async throws {
        // Cancellation ends the wait too; the cache is closed either way.
        try? await gracefulShutdown()
        guard ownsCache else { return }
        let store = self.store
        try await BlockingIOPool.shared.run { try store.closeStore() }
    }

    public func handle(_ request: Request, context: Context,
                       next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let exchange = Exchange(request) else { return try await next(request, context) }
        if exchange.isGET || exchange.isHEAD {
            return try await answer(exchange, context: context, next: next)
        }
        let response = try await next(request, context)
        // Removed before the response goes on: a client that has it and asks for the target
        // again must not get what was stored before.
        let urls = CachePolicyEngine.urlsToInvalidate(after: exchange.cacheRequest, status: response.status.code,
                                                      headers: response.headers)
        if !urls.isEmpty {
            let store = self.store
            _ = try? await BlockingIOPool.shared.run { store.invalidate(urls) }
        }
        return response
    }

    // MARK: - GET and HEAD

    /// Answers a GET or HEAD as the policy engine decides, from what is stored under its key.
    private func answer(_ exchange: Exchange, context: Context,
                        next: (Request, Context) async throws -> Response) async throws -> Response {
        let request = exchange.cacheRequest
        guard let key = store.key(method: request.method, url: request.url, request: { exchange.urlRequest }) else {
            return try await next(exchange.request, context)
        }
        var variants = try await lookup(key)
        // Each pass leaves out a variant whose body could not be read, so this ends.
        while true {
            let decision = cache.engine.decision(for: request, storedResponses: variants.map(\.entry.response), at: Date())
            let chosen = HTTPResponseStore.StoredVariant.holding(decision.storedResponse, among: variants)
            switch decision {
            case .fresh, .stale:
                if let response = try await serve(chosen!, exchange) { return response }
                variants.removeAll { $0.recordKey == chosen!.recordKey }
            case .staleWhileRevalidate(_, let conditional), .revalidate(_, let conditional):
                return try await fetch(exchange, key: key, adding: conditional, validating: chosen, fallback: chosen,
                                       context: context, next: next)
            case .mustFetch(let additional, _):
                return try await fetch(exchange, key: key, adding: additional, validating: nil, fallback: chosen,
                                       context: context, next: next)
            case .gatewayTimeout, .unavailableOffline:
                return Response(status: .gatewayTimeout)
            }
        }
    }

    /// The responses stored under `key`, a single one of at most ``bodySizeLimit`` bytes with
    /// its body: from the memory tier when it holds it, else on the I/O threads.
    private func lookup(_ key: String) async throws -> [HTTPResponseStore.StoredVariant] {
        if let variants = store.storedVariantsInMemory(forKey: key) { return variants }
        let (store, limit) = (self.store, Int64(bodySizeLimit))
        return try await BlockingIOPool.shared.run { store.storedVariants(forKey: key, bodyLimit: limit) }
    }

    /// Calls the app for `exchange` (with `adding`'s fields; about `validating` when it
    /// revalidates) and answers with what it returns: the stored response after a 304, a stale
    /// one where an error status allows it, else the app's response, stored as it passes when it
    /// may be.
    private func fetch(_ exchange: Exchange, key: String, adding: HTTPFields,
                       validating: HTTPResponseStore.StoredVariant?, fallback: HTTPResponseStore.StoredVariant?,
                       context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var fields = exchange.request.headers
        if validating != nil { for name in CachePolicyEngine.conditionalRequestFields { fields[name] = nil } }
        for field in adding { fields[field.name] = field.value }
        var head = exchange.request.head
        head.headerFields = fields
        let requestTime = Date()
        let response = try await next(Request(head: head, body: exchange.request.body), context)
        let responseTime = Date()
        let code = response.status.code
        let responseFields = Self.storedFields(response.headers)
        let (store, request) = (self.store, exchange.cacheRequest)
        if code == 304, let validating {
            let merged = try await BlockingIOPool.shared.run {
                store.applyNotModified(responseFields, validated: validating.entry, key: key, requestTime: requestTime, responseTime: responseTime)
            }
            if var served = try await serve(HTTPResponseStore.StoredVariant(entry: merged, recordKey: validating.recordKey), exchange) {
                // The app's cookies are for this client: sent on, never stored.
                for cookie in response.headers[values: .setCookie] { served.headers.append(HTTPField(name: .setCookie, value: cookie)) }
                return served
            }
            // The stored response went meanwhile: the app answers the client's own request.
            return try await next(exchange.request, context)
        }
        if code == 200, exchange.isHEAD {
            // What the HEAD says of the stored GET responses (RFC 9111 §4.3.5).
            try await BlockingIOPool.shared.run {
                store.freshenAfterHEAD(responseFields, request: request, key: key, requestTime: requestTime, responseTime: responseTime)
            }
        }
        if CachePolicyEngine.staleIfErrorStatusCodes.contains(code), let stale = validating ?? fallback,
           cache.engine.canServeStale(stale.entry.response, for: request, at: responseTime, after: .errorStatus(code)),
           let served = try await serve(stale, exchange) {
            return served
        }
        guard exchange.isGET, !response.headers.contains(.setCookie), !Self.isOver(bodySizeLimit, response),
              Self.saysItMayBeKept(responseFields),
              cache.engine.storability(ofStatus: code, headers: responseFields, for: request).isStorable
        else { return response }
        let stored = StoredResponse(request: request, status: code, headers: responseFields,
                                    requestTime: requestTime, responseTime: responseTime)
        return storing(response, as: stored, exchange, logger: context.logger)
    }

    /// A response's fields as they are stored and decided by: not the connection's (RFC 9111
    /// §3.1), nor `Set-Cookie` (a 304's cookies are not merged into the stored response either).
    private static func storedFields(_ headers: HTTPFields) -> HTTPFields {
        var fields = CachePolicyEngine.endToEndFields(headers)
        fields[.setCookie] = nil
        return fields
    }

    /// Whether the app said a response may be kept: a `max-age`, `s-maxage` or `public`
    /// directive, or an `Expires` field. RFC 9111 §4.2.2 lets a cache keep some responses that
    /// say nothing (a heuristic lifetime), but a route that says nothing may be one that reads a
    /// session cookie, and a client asking with `max-stale` would be answered with another's
    /// page: the middleware keeps only what the app marked.
    private static func saysItMayBeKept(_ fields: HTTPFields) -> Bool {
        let control = CacheControl(fields)
        return control.maxAge != nil || control.sharedMaxAge != nil || control.isPublic || fields.contains(.expires)
    }

    /// Whether `response` says its body is longer than `limit` bytes.
    private static func isOver(_ limit: Int, _ response: Response) -> Bool {
        let length = response.body.contentLength ?? response.headers[.contentLength].flatMap { Int($0) }
        return length.map { $0 > limit } ?? false
    }

    /// `response` with a body that is stored as `stored` once the app has written it whole
    /// (collected as it passes, given up past ``bodySizeLimit``), before its last part goes
    /// out (see ``StoringBodyWriter``).
    private func storing(_ response: Response, as stored: StoredResponse, _ exchange: Exchange, logger: Logger) -> Response {
        let (store, limit, request) = (self.store, bodySizeLimit, exchange.urlRequest)
        let entry = CachedHTTPResponse(url: exchange.cacheRequest.url, response: stored, body: Data(),
                                       mimeType: response.headers[.contentType].map { String($0.prefix { $0 != ";" }) })
        let target = exchange.cacheRequest.url.absoluteString
        let body = response.body
        let length = body.contentLength ?? response.headers[.contentLength].flatMap { Int($0) }
        var result = response
        result.body = ResponseBody(contentLength: body.contentLength) { writer in
            try await body.write(StoringBodyWriter(parent: writer, limit: limit, length: length) { collected in
                var whole = entry
                whole.body = Data(collected.readableBytesView)
                do {
                    try await BlockingIOPool.shared.run { [whole] in _ = try store.storeThrowing(whole, for: request) }
                } catch {
                    logger.warning("Cannot store a response", metadata: ["target": "\(target)", "error": "\(error)"])
                }
            })
        }
        return result
    }

    /// Answers `exchange` from a stored response: a 304 when the client's conditions hold for
    /// it, else the response with its `Age`. Nil when its body is gone or fails its checksum.
    private func serve(_ variant: HTTPResponseStore.StoredVariant, _ exchange: Exchange) async throws -> Response? {
        let stored = variant.entry.response
        var headers = stored.headers
        headers[.age] = CachePolicyEngine.ageFieldValue(cache.engine.freshness(of: stored, at: Date()).currentAge)
        if CachePolicyEngine.answersNotModified(exchange.cacheRequest.headers, stored: stored) {
            return Response(status: .notModified, headers: CachePolicyEngine.notModifiedFields(headers))
        }
        let status = HTTPResponse.Status(code: stored.status)
        let body: ResponseBody
        if variant.isLoaded {
            body = ResponseBody(byteBuffer: ByteBuffer(bytes: variant.entry.body))
        } else {
            guard let chunks = try? await store.body(of: variant) else { return nil }
            if chunks.size <= Int64(bodySizeLimit) {
                // Read whole before answering: a body that fails its checksum is a miss.
                var buffer = ByteBuffer()
                do {
                    for try await chunk in chunks { buffer.writeBytes(chunk) }
                } catch {
                    return nil
                }
                body = ResponseBody(byteBuffer: buffer)
            } else {
                body = ResponseBody(contentLength: Int(chunks.size)) { writer in
                    for try await chunk in chunks { try await writer.write(ByteBuffer(bytes: chunk)) }
                    try await writer.finish(nil)
                }
            }
        }
        guard exchange.isHEAD else { return Response(status: status, headers: headers, body: body) }
        if !headers.contains(.contentLength), let length = body.contentLength { headers[.contentLength] = String(length) }
        return Response(status: status, headers: headers)
    }
}
#endif

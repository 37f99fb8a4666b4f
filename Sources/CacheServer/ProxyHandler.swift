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

typealias ClientParts = NIOAsyncChannelInboundStream<HTTPServerRequestPart>.AsyncIterator

/// How one request was answered, for the access log and the connection.
struct Outcome {
    var status: UInt = 0
    var bytes: Int64 = 0
    /// HIT, MISS, REVALIDATED, STALE, BYPASS, or what an internal endpoint did.
    var cacheStatus = "BYPASS"
    /// The request's body was read to its end, so the next request can be read.
    var canContinue = true
}

/// Answers requests: from the cache as RFC 9111 allows, else from the origin, storing what may
/// be stored as it streams through.
final class ProxyHandler: Sendable {
    let cache: HTTPURLCache
    let configuration: ServerConfiguration
    let origin: OriginClient
    let logger: Logger
    let gate = FetchGate()
    let statistics = PthreadMutex(ServerStatistics())
    let metrics = ServerMetrics()
    /// Answers prepared for hits held in memory (``ServerConfiguration/preparedCapacity`` bytes).
    let prepared: PreparedHits
    private let refreshTasks = PthreadMutex([String: Task<Void, Never>]())
    /// The origin's URL as text, which every request's target is appended to.
    private let originPrefix: String

    init(cache: HTTPURLCache, configuration: ServerConfiguration, origin: OriginClient, logger: Logger) {
        self.cache = cache
        self.configuration = configuration
        self.originPrefix = configuration.origin.description
        self.origin = origin
        self.logger = logger
        self.prepared = PreparedHits(capacity: configuration.preparedCapacity)
    }

    private var engine: CachePolicyEngine { cache.engine }
    /// This node in `Via`, for messages it sends as HTTP/1.1.
    private var via: String { "1.1 \(configuration.viaName)" }

    /// Counts `event` in ``statistics`` and in the Prometheus metrics.
    func note(_ event: ServerMetrics.Event) {
        statistics.withLock { $0.count(event) }
        metrics.record(event)
    }

    /// Waits for the background refreshes under way.
    func waitForRefreshes() async {
        while let task = refreshTasks.withLock({ $0.values.first }) { await task.value }
    }

    // MARK: - One request

    /// One request as the client sent it, and what the cache makes of it.
    struct Exchange {
        let head: HTTPRequestHead
        /// Path and query, as sent to the origin.
        let target: String
        let cacheRequest: CacheRequest
        var isHEAD: Bool { head.method == .HEAD }

        init(head: HTTPRequestHead, target: String, url: URL) {
            self.head = head
            self.target = target
            self.cacheRequest = CacheRequest(method: head.method.rawValue, url: url, headers: Fields.fields(Fields.endToEnd(head.headers)))
        }

        /// The request as a `URLRequest` (its method, URL and end-to-end fields), made anew
        /// each time: a hit answered on the event loop needs none (see
        /// `HTTPURLCache.key(method:url:request:)`).
        var urlRequest: URLRequest {
            var request = URLRequest(url: cacheRequest.url)
            request.httpMethod = cacheRequest.method
            for field in cacheRequest.headers.fields { request.addValue(field.value, forHTTPHeaderField: field.name) }
            return request
        }

        /// The same request as a GET (what a refresh after a HEAD fetches and stores).
        var asGET: Exchange {
            var get = head
            get.method = .GET
            return Exchange(head: get, target: target, url: cacheRequest.url)
        }
    }

    /// Answers the request whose head is `head`, reading the rest of it from `parts`. Throws when
    /// the response could not be finished (the client went, or the origin's body was cut short):
    /// the connection must then close.
    ///
    /// On the admin address (`admin`) only the node's own endpoints answer; when there is one,
    /// the client port forwards their paths and `PURGE` to the origin like any other request.
    func handle(_ head: HTTPRequestHead, parts: inout ClientParts, writer: ClientWriter, admin: Bool = false) async throws -> Outcome {
        let servesOwn = admin || configuration.adminHost == nil
        if servesOwn, head.uri.hasPrefix("/_cache/") {
            try await drain(&parts)
            return try await answerInternal(head, writer: writer, admin: admin)
        }
        if servesOwn, head.method == .RAW(value: "PURGE") {
            try await drain(&parts)
            return try await purge(head, writer: writer)
        }
        if admin {
            try await drain(&parts)
            return try await respond(.notFound, "The admin address answers /_cache/health, /_cache/metrics and PURGE only",
                                     writer: writer, head: head, cacheStatus: "INTERNAL")
        }
        guard let (target, url) = originURL(of: head.uri) else {
            try await drain(&parts)
            return try await respond(.badRequest, "The request target \(head.uri) is not a path", writer: writer, head: head)
        }
        let exchange = Exchange(head: head, target: target, url: url)
        note(.requests)
        if head.method == .GET || head.method == .HEAD {
            try await drain(&parts)
            return try await answerFromCache(exchange, writer: writer)
        }
        return try await forwardUnsafe(exchange, parts: &parts, writer: writer)
    }

    /// The origin-form target of a request target and the origin's URL for it; nil when the
    /// target is not a path (or an absolute URI).
    func originURL(of uri: String) -> (target: String, url: URL)? {
        guard let target = Self.target(of: uri), let url = URL(string: originPrefix + target) else { return nil }
        return (target, url)
    }

    /// The stored variant whose response is `response` (the one a policy decision chose).
    /// A decision's stored response is always one of those it was given, so with one variant
    /// nothing is compared (comparing every header field was about 2 % of a 1 KB hit's CPU).
    static func variant(holding response: StoredResponse?, among variants: [HTTPURLCache.StoredVariant]) -> HTTPURLCache.StoredVariant? {
        guard let response else { return nil }
        if variants.count == 1 { return variants[0] }
        return variants.first { $0.entry.response == response }
    }

    /// The origin-form target of a request target: a path (and query) as is, an absolute URI's path and query.
    static func target(of uri: String) -> String? {
        if uri.hasPrefix("/") { return uri }
        guard let components = URLComponents(string: uri), components.scheme != nil else { return nil }
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        return path + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
    }

    private func drain(_ parts: inout ClientParts) async throws {
        while let part = try await parts.next() {
            if case .end = part { return }
        }
    }

    // MARK: - GET and HEAD

    /// The responses stored for `request`, a single small one with its body: from the memory
    /// tier on this thread when it holds it (no file read, no thread hop), else on the I/O threads.
    private func lookup(_ exchange: Exchange) async throws -> (key: String, variants: [HTTPURLCache.StoredVariant])? {
        let cache = self.cache
        guard let key = cache.key(method: exchange.cacheRequest.method, url: exchange.cacheRequest.url, request: { exchange.urlRequest })
        else { return nil }
        if let variants = cache.storedVariantsInMemory(forKey: key) { return (key, variants) }
        let limit = memoryBodyLimit
        return try await BlockingIOPool.shared.run { (key, cache.storedVariants(forKey: key, bodyLimit: limit)) }
    }

    private func answerFromCache(_ exchange: Exchange, writer: ClientWriter) async throws -> Outcome {
        guard let stored = try await lookup(exchange) else {
            return try await fetch(exchange, key: nil, adding: [:], validating: nil, fallback: nil, writer: writer).outcome!
        }
        var variants = stored.variants
        var waited = false
        // Each pass leaves out a variant whose body could not be read, so this ends.
        while true {
            let decision = engine.decision(for: exchange.cacheRequest, storedResponses: variants.map(\.entry.response), at: Date())
            let chosen = Self.variant(holding: decision.storedResponse, among: variants)
            switch decision {
            case .fresh, .stale:
                if let outcome = try await serveStored(chosen!, exchange, status: "HIT", writer: writer) {
                    note(.hits)
                    return outcome
                }
                variants.removeAll { $0.recordKey == chosen!.recordKey }
            case .staleWhileRevalidate(_, let conditional):
                if let outcome = try await serveStored(chosen!, exchange, status: "STALE", writer: writer) {
                    note(.hits)
                    refreshInBackground(exchange, key: stored.key, validating: chosen!, adding: conditional)
                    return outcome
                }
                variants.removeAll { $0.recordKey == chosen!.recordKey }
            case .revalidate(_, let conditional):
                let result = try await fetch(exchange, key: stored.key, adding: conditional, validating: chosen, fallback: chosen, writer: writer)
                if let outcome = result.outcome { return outcome }
                variants = try await lookup(exchange)?.variants ?? []
            case .mustFetch(let additional, let fallbackResponse):
                let fallback = Self.variant(holding: fallbackResponse, among: variants)
                // One fetch per resource at a time: the others wait for it, then look again.
                if fallback == nil, exchange.head.method == .GET, !waited {
                    if await gate.enter(stored.key) {
                        defer { gate.finish(stored.key) }
                        let result = try await fetch(exchange, key: stored.key, adding: additional, validating: nil, fallback: nil, writer: writer)
                        if let outcome = result.outcome { return outcome }
                        return try await respond(.badGateway, "The origin's answer could not be used", writer: writer, head: exchange.head)
                    }
                    waited = true
                    note(.coalesced)
                    variants = try await lookup(exchange)?.variants ?? []
                    continue
                }
                let result = try await fetch(exchange, key: stored.key, adding: additional, validating: nil, fallback: fallback, writer: writer)
                if let outcome = result.outcome { return outcome }
                variants = try await lookup(exchange)?.variants ?? []
            case .gatewayTimeout, .unavailableOffline:
                return try await respond(.gatewayTimeout, "Nothing stored satisfies only-if-cached", writer: writer, head: exchange.head)
            }
        }
    }

    /// Sends a stored response (or a 304 when the client's conditions hold for it); nil when
    /// its body is gone or fails its checksum before anything was sent.
    private func serveStored(_ variant: HTTPURLCache.StoredVariant, _ exchange: Exchange, status: String,
                             writer: ClientWriter) async throws -> Outcome? {
        if variant.isLoaded {
            let answer = inMemoryResponse(variant, exchange, status: status)
            try await started { try await writer.write(contentsOf: answer.parts) }
            note(.bytesServed(answer.outcome.bytes))
            return answer.outcome
        }
        let response = variant.entry.response
        var headers = servedHeaders(response, status: status)
        if let parts = notModified(response, exchange, headers) {
            try await started { try await writer.write(contentsOf: parts) }
            return Outcome(status: 304, cacheStatus: status)
        }
        // The body from disk: checked whole, then sent (a file by the kernel), or (above the
        // limit) chunks read as they are sent, the first before the head.
        if let checked = try await checkedBody(of: variant) {
            let answer = checkedResponse(checked, response, headers, exchange, status: status, sentFiles: writer.sentFiles)
            do {
                try await started { try await writer.write(contentsOf: answer.parts) }
            } catch {
                // Nothing of it reached the channel: its file is closed here.
                for case .body(.fileRegion(let region)) in answer.parts { writer.sentFiles.close(region.fileHandle) }
                throw error
            }
            note(.bytesServed(answer.outcome.bytes))
            return answer.outcome
        }
        guard let chunks = try await cache.body(of: variant) else { return nil }
        var iterator = chunks.makeAsyncIterator()
        let first: Data?
        do { first = try await iterator.next() } catch { return nil }
        let size = chunks.size
        let (range, code) = servedRange(of: response, size: size, for: exchange, headers: &headers)
        // Once anything is written, a failure cannot be answered any more (see `started(_:)`).
        let sent: Int64 = try await started {
            // Parts go out together (one flush) until the next chunk has to be waited for.
            var pending: [HTTPServerResponsePart] = [.head(HTTPResponseHead(version: .http1_1, status: code, headers: headers))]
            var sent: Int64 = 0
            if !exchange.isHEAD, range != .unsatisfiable {
                // Of a range, the last piece goes only after the whole body matched its checksum
                // (a whole body's last chunk comes only then anyway).
                var next = first, offset: Int64 = 0, held: ByteBuffer?
                while let chunk = next {
                    if let piece = range.slice(ByteBuffer(bytes: chunk), at: offset), piece.readableBytes > 0 {
                        if let previous = held { pending.append(.body(.byteBuffer(previous))) }
                        held = piece
                        sent += Int64(piece.readableBytes)
                    }
                    offset += Int64(chunk.count)
                    try await writer.write(contentsOf: pending)
                    pending.removeAll()
                    // A later chunk that fails its checksum throws here: the connection closes short of the length.
                    next = try await iterator.next()
                }
                if let held { pending.append(.body(.byteBuffer(held))) }
            }
            pending.append(.end(nil))
            try await writer.write(contentsOf: pending)
            return sent
        }
        note(.bytesServed(sent))
        return Outcome(status: code.code, bytes: sent, cacheStatus: status)
    }

    /// The fields a stored response is sent with: the stored ones a client may see, its `Age`,
    /// this node in `Via`, and how it was answered in `X-Cache`.
    private func servedHeaders(_ response: StoredResponse, status: String, at now: Date = Date()) -> HTTPHeaders {
        var headers = Fields.clientView(Fields.headers(response.headers))
        headers.replaceOrAdd(name: "Age", value: Self.ageField(engine.freshness(of: response, at: now).currentAge))
        headers.add(name: "Via", value: via)
        headers.replaceOrAdd(name: "X-Cache", value: status)
        return headers
    }

    /// The `Age` field's value for a current age of `age` seconds: whole seconds, at most 2^31.
    static func ageField(_ age: TimeInterval) -> String {
        String(age.isNaN ? 0 : Int(min(max(age.rounded(.down), 0), 2_147_483_648)))
    }

    /// The 304 that answers `exchange` from `response` (sent with `headers`) when the client's
    /// conditions hold for it.
    private func notModified(_ response: StoredResponse, _ exchange: Exchange, _ headers: HTTPHeaders) -> [HTTPServerResponsePart]? {
        guard Fields.notModified(exchange.head.headers, stored: response) else { return nil }
        let head = HTTPResponseHead(version: .http1_1, status: .notModified, headers: Fields.notModifiedHeaders(headers))
        return [.head(head), .end(nil)]
    }

    /// What of a stored body of `size` bytes answers `exchange` (a range only of a GET of a
    /// 200) and the status that goes with it, its fields set in `headers`.
    private func servedRange(of response: StoredResponse, size: Int64, for exchange: Exchange,
                       headers: inout HTTPHeaders) -> (ByteRange, HTTPResponseStatus) {
        let range = exchange.head.method == .GET && response.status == 200
            ? ByteRange(request: exchange.head.headers, response: response.headers, size: size) : .whole
        return (range, range.apply(to: &headers, status: HTTPResponseStatus(statusCode: response.status), size: size))
    }

    /// A stored response whose body is in memory, as the parts that answer `exchange` (a 304
    /// when the client's conditions hold for it, a 206 or 416 for a range, no body for HEAD),
    /// written together, and what they answer.
    func inMemoryResponse(_ variant: HTTPURLCache.StoredVariant, _ exchange: Exchange,
                          status: String) -> (parts: [HTTPServerResponsePart], outcome: Outcome) {
        let response = variant.entry.response
        var headers = servedHeaders(response, status: status)
        if let parts = notModified(response, exchange, headers) { return (parts, Outcome(status: 304, cacheStatus: status)) }
        let body = variant.entry.body
        let size = Int64(body.count)
        let (range, code) = servedRange(of: response, size: size, for: exchange, headers: &headers)
        return wholeResponse(code, headers, isHEAD: exchange.isHEAD, status: status, range: range, size: size) { bounds in
            let start = body.startIndex + Int(bounds.lowerBound)
            return .byteBuffer(ByteBuffer(bytes: body[start..<start + bounds.count]))
        }
    }

    /// A response written in one go: its head, the part of the body `range` selects (`body`
    /// makes it from its bounds; nothing for HEAD, a 416 or an empty range), and its end.
    private func wholeResponse(_ code: HTTPResponseStatus, _ headers: HTTPHeaders, isHEAD: Bool, status: String,
                               range: ByteRange, size: Int64, body: (Range<Int64>) -> IOData)
        -> (parts: [HTTPServerResponsePart], outcome: Outcome) {
        var parts: [HTTPServerResponsePart] = [.head(HTTPResponseHead(version: .http1_1, status: code, headers: headers))]
        var sent: Int64 = 0
        if !isHEAD, let bounds = range.bounds(size: size), !bounds.isEmpty {
            parts.append(.body(body(bounds)))
            sent = Int64(bounds.count)
        }
        parts.append(.end(nil))
        return (parts, Outcome(status: code.code, bytes: sent, cacheStatus: status))
    }

    /// The largest body the event loop checks before sending it from the page cache (hashing
    /// it through its mapping takes about 35 µs of CPU a MiB, reading and hashing it about
    /// 105, `Benchmarks/c/mapped-check.c`); a larger one is checked on the store's I/O threads.
    static let eventLoopCheckLimit: Int64 = 2 << 20

    /// The answer to `head`, when it can be given at once on the event loop: a GET or HEAD
    /// without a body, on a connection kept alive, for which a stored response may be served as
    /// it is, and either the memory tier holds it with its body, or the page cache holds its
    /// files (read with ``DiskCache/withoutWaitingForDisk(_:)``: a read that would wait for the
    /// disk gives the request to the task instead) and its body is at most
    /// ``eventLoopCheckLimit`` bytes: checked whole, then sent from its file by the kernel.
    /// Nil for every other request (it takes the connection's task: the disk, the origin, a body
    /// to read, the server's own endpoints). Counted as the task would count it. In shared mode
    /// the journal records other processes appended since are read, as by every call into the store.
    func answerOnEventLoop(_ head: HTTPRequestHead, sentFiles: SentFiles) -> (parts: [HTTPServerResponsePart], outcome: Outcome)? {
        guard head.method == .GET || head.method == .HEAD, head.isKeepAlive, !head.uri.hasPrefix("/_cache/"),
              head.headers.first(name: "Content-Length").map({ $0 == "0" }) ?? true,
              !head.headers.contains(name: "Transfer-Encoding")
        else { return nil }
        let preparable = PreparedHits.canAnswer(head.headers)
        let target = PreparedHits.Target(isHEAD: head.method == .HEAD, uri: head.uri)
        if preparable, let answer = preparedAnswer(for: target) {
            noteHit(bytes: answer.outcome.bytes, prepared: true)
            return answer
        }
        guard let (originTarget, url) = originURL(of: head.uri) else { return nil }
        let exchange = Exchange(head: head, target: originTarget, url: url)
        guard let key = cache.key(method: exchange.cacheRequest.method, url: url, request: { exchange.urlRequest }) else { return nil }
        let variants: [HTTPURLCache.StoredVariant]
        if let found = cache.storedVariantsInMemory(forKey: key) {
            variants = found
        } else {
            let cache = self.cache, limit = memoryBodyLimit
            let (stored, waited) = DiskCache.withoutWaitingForDisk { cache.storedVariants(forKey: key, bodyLimit: limit) }
            guard !waited else { return nil }
            variants = stored
        }
        guard !variants.isEmpty else { return nil }
        let now = Date()
        let decision = engine.decision(for: exchange.cacheRequest, storedResponses: variants.map(\.entry.response), at: now)
        switch decision {
        case .fresh, .stale: break
        default: return nil
        }
        guard let chosen = Self.variant(holding: decision.storedResponse, among: variants) else { return nil }
        let answer: (parts: [HTTPServerResponsePart], outcome: Outcome)?
        // Prepared only when it can be kept: otherwise every hit would prepare it again.
        if case .fresh = decision, preparable, chosen.isLoaded, prepared.fits(bodySize: chosen.entry.body.count),
           let hit = prepare(chosen, key: key, url: url, at: now) {
            prepared.keep(hit, for: target)
            answer = preparedResponse(hit, isHEAD: exchange.isHEAD, at: now)
        } else {
            answer = chosen.isLoaded ? inMemoryResponse(chosen, exchange, status: "HIT")
                                     : pageCacheResponse(chosen, exchange, sentFiles: sentFiles)
        }
        guard let answer else { return nil }
        noteHit(bytes: answer.outcome.bytes)
        return answer
    }

    /// Counts a hit answered on the event loop (from a prepared answer when `prepared`, and
    /// straight from the connection's bytes when `fromBytes`).
    private func noteHit(bytes: Int64, prepared: Bool = false, fromBytes: Bool = false) {
        // Under one lock, with no array made: this runs for every hit.
        func each(_ body: (ServerMetrics.Event) -> Void) {
            body(.requests)
            body(.hits)
            body(.hitsOnEventLoop)
            if prepared { body(.hitsPrepared) }
            if fromBytes { body(.hitsFromBytes) }
            body(.bytesServed(bytes))
        }
        statistics.withLock { statistics in each { statistics.count($0) } }
        each { metrics.record($0) }
    }

    /// The answer prepared for `target` (see ``PreparedHits``), when the memory tier still holds
    /// the response it was made from and that response is still fresh; nil otherwise (the
    /// answer is dropped then, and the full path prepares a new one).
    private func preparedAnswer(for target: PreparedHits.Target) -> (parts: [HTTPServerResponsePart], outcome: Outcome)? {
        guard let (hit, now) = currentPreparedHit(for: target) else { return nil }
        return preparedResponse(hit, isHEAD: target.isHEAD, at: now)
    }

    /// The hit prepared for `target` and the time it was found current at: the memory tier
    /// still holds the response it was made from, and that response is still fresh. Else nil,
    /// and the hit is dropped (the full path prepares a new one).
    private func currentPreparedHit(for target: PreparedHits.Target) -> (PreparedHits.Hit, Date)? {
        guard let hit = prepared.hit(for: target) else { return nil }
        let now = Date()
        guard now < hit.freshUntil, let stored = cache.storedResponseInMemory(forKey: hit.primaryKey),
              stored.recordKey == hit.recordKey, stored.body.count == hit.size, stored.text == hit.text
        else {
            prepared.forget(target, ifStill: hit)
            return nil
        }
        return (hit, now)
    }

    /// ``preparedAnswer(for:)`` in its wire form, for ``RawHitResponder``: the same bytes NIO's
    /// encoder would write for it. Nil when no current prepared hit has a wire form. Counted as
    /// a prepared hit.
    func rawAnswer(for target: PreparedHits.Target) -> RawHitResponder.Answer? {
        guard let (hit, now) = currentPreparedHit(for: target), let wire = hit.wire else { return nil }
        let sendsBody = !target.isHEAD && hit.size > 0
        let bodyInHead = sendsBody && hit.size <= RawHitResponder.bodyInHeadLimit
        var head = wire.head(age: Self.ageField(hit.age(at: now)), reserving: bodyInHead ? hit.size : 0)
        if bodyInHead { head.writeImmutableBuffer(hit.body) }
        let answer = RawHitResponder.Answer(head: head, body: sendsBody && !bodyInHead ? hit.body : nil,
                                            outcome: Outcome(status: hit.status.code, bytes: sendsBody ? Int64(hit.size) : 0, cacheStatus: "HIT"))
        noteHit(bytes: answer.outcome.bytes, prepared: true, fromBytes: true)
        return answer
    }

    /// The answer to a request that carries none of ``PreparedHits/fieldsRead`` from
    /// `variant`, a response held in memory with its body that the decision found fresh for
    /// it: what ``inMemoryResponse(_:_:status:)`` would send (a whole response), kept until
    /// the response's freshness for such requests ends. Nil when the decision would read more
    /// of such a request (a `Vary`).
    private func prepare(_ variant: HTTPURLCache.StoredVariant, key: String, url: URL, at now: Date) -> PreparedHits.Hit? {
        let response = variant.entry.response
        guard let text = variant.metadataText, let freshUntil = engine.freshnessDeadline(of: response, url: url, at: now) else { return nil }
        var headers = servedHeaders(response, status: "HIT", at: now)
        let body = variant.entry.body
        let status = ByteRange.whole.apply(to: &headers, status: HTTPResponseStatus(statusCode: response.status), size: Int64(body.count))
        let (beforeAge, afterAge) = PreparedHits.Hit.split(headers)
        return PreparedHits.Hit(primaryKey: key, recordKey: variant.recordKey, text: text, status: status,
                                beforeAge: beforeAge, afterAge: afterAge, body: ByteBuffer(bytes: body), preparedAt: now,
                                ageThen: engine.freshness(of: response, at: now).currentAge, freshUntil: freshUntil)
    }

    /// The parts of `hit`'s answer at `now` (its `Age` then).
    private func preparedResponse(_ hit: PreparedHits.Hit, isHEAD: Bool, at now: Date) -> (parts: [HTTPServerResponsePart], outcome: Outcome) {
        let headers = hit.headers(age: Self.ageField(hit.age(at: now)))
        let body = hit.body
        return wholeResponse(hit.status, headers, isHEAD: isHEAD, status: "HIT", range: .whole, size: Int64(hit.size)) { _ in
            .byteBuffer(body)
        }
    }

    /// A stored response whose body is on disk, answered from the page cache: the body file
    /// checked whole and sent with `sendfile` (its descriptor taken by `sentFiles`, closed once
    /// written), or a 304 without reading it. Nil when its files are not all in the page cache,
    /// are gone or damaged, or the body is above ``eventLoopCheckLimit``.
    private func pageCacheResponse(_ variant: HTTPURLCache.StoredVariant, _ exchange: Exchange,
                                   sentFiles: SentFiles) -> (parts: [HTTPServerResponsePart], outcome: Outcome)? {
        let response = variant.entry.response
        let headers = servedHeaders(response, status: "HIT")
        if let parts = notModified(response, exchange, headers) { return (parts, Outcome(status: 304, cacheStatus: "HIT")) }
        let cache = self.cache, limit = min(configuration.wholeCheckLimit, Self.eventLoopCheckLimit)
        let copying = self.copying
        let (found, waited) = DiskCache.withoutWaitingForDisk { try? cache.checkedBody(of: variant, sizeLimit: limit, copying: copying) }
        guard let checked = found else { return nil }
        if waited {
            checked.discard()
            return nil
        }
        return checkedResponse(checked, response, headers, exchange, status: "HIT", sentFiles: sentFiles)
    }

    /// A stored response whose body was checked whole (``checkedBody(of:)``), as the parts that
    /// answer `exchange` (sent with `headers`): a 206 or 416 for a range, no body for HEAD; a
    /// body file goes as a `FileRegion` (its descriptor taken by `sentFiles`, closed once
    /// written, or here when none of it is sent).
    private func checkedResponse(_ checked: DiskCache.CheckedBody, _ response: StoredResponse, _ headers: HTTPHeaders,
                                 _ exchange: Exchange, status: String,
                                 sentFiles: SentFiles) -> (parts: [HTTPServerResponsePart], outcome: Outcome) {
        var headers = headers
        let size = checked.size
        let (range, code) = servedRange(of: response, size: size, for: exchange, headers: &headers)
        // The body's part made from `part`; `release` lets go of what the body holds when no
        // part is made (HEAD, a range not satisfied), since nothing will send it then.
        func answer(releasing release: () -> Void, _ part: (Range<Int64>) -> IOData) -> (parts: [HTTPServerResponsePart], outcome: Outcome) {
            var made = false
            let answer = wholeResponse(code, headers, isHEAD: exchange.isHEAD, status: status, range: range, size: size) { bounds in
                made = true
                return part(bounds)
            }
            if !made { release() }
            return answer
        }
        switch checked.source {
        case .bytes(let bytes):
            return answer(releasing: {}) { bounds in
                let start = bytes.startIndex + Int(bounds.lowerBound)
                return .byteBuffer(ByteBuffer(bytes: bytes[start..<start + bounds.count]))
            }
        case .copy(let copy):
            // The buffer owns the copy from here, freed when NIO is done with it.
            return answer(releasing: { checked.discard() }) { bounds in
                .byteBuffer(BodyCopies.buffer(copy, size: Int(size), Int(bounds.lowerBound)..<Int(bounds.upperBound)))
            }
        case .file(let descriptor):
            let file = sentFiles.adopt(descriptor)
            return answer(releasing: { sentFiles.close(file) }) { bounds in
                .fileRegion(FileRegion(fileHandle: file, readerIndex: Int(bounds.lowerBound), endIndex: Int(bounds.upperBound)))
            }
        }
    }

    /// Which checked bodies are copied as they are hashed, to be written from memory
    /// (``ServerConfiguration/copyLimit``); nil: none.
    private var copying: DiskCache.BodyCopying? {
        configuration.copyLimit > 0 ? DiskCache.BodyCopying(limit: Int64(configuration.copyLimit), budget: configuration.copyBudget) : nil
    }

    /// The largest body a lookup reads with the stored response (so that the memory tier can
    /// hold it and answer the next request): 256 KiB, or a twentieth of the memory tier.
    private var memoryBodyLimit: Int64 { Int64(min(256 << 10, configuration.memoryCapacity / 20)) }

    /// A stored body from disk, checked whole, when it may be sent that way: nil when it is
    /// gone or damaged, or larger than ``ServerConfiguration/wholeCheckLimit`` (then it is
    /// streamed in chunks instead).
    private func checkedBody(of variant: HTTPURLCache.StoredVariant) async throws -> DiskCache.CheckedBody? {
        let cache = self.cache, limit = configuration.wholeCheckLimit, copying = self.copying
        return try await BlockingIOPool.shared.run { try cache.checkedBody(of: variant, sizeLimit: limit, copying: copying) }
    }

    /// Runs `body`, which writes a response to the client: whatever it throws is a
    /// ``ResponseStarted`` (the connection must close; no other answer may follow).
    private func started<T>(_ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch { throw ResponseStarted(underlying: error) }
    }

    // MARK: - To the origin

    /// What a fetch did: an answer sent, or nothing sent and the cache should be asked again
    /// (a 304 for a response that was replaced meanwhile).
    struct FetchResult {
        var outcome: Outcome?
    }

    /// Sends the request to the origin (with `adding`'s fields; about `validating` when it
    /// revalidates) and answers the client: from the cache after a 304, stale where an error
    /// allows it, else with what the origin sent, stored as it passes when it may be.
    private func fetch(_ exchange: Exchange, key: String?, adding: HTTPHeaderFields, validating: HTTPURLCache.StoredVariant?,
                       fallback: HTTPURLCache.StoredVariant?, writer: ClientWriter) async throws -> FetchResult {
        var headers = Fields.endToEnd(exchange.head.headers)
        if validating != nil { for name in Fields.conditional { headers.remove(name: name) } }
        // A range of something that may be stored: the whole body is fetched (and stored), the
        // range cut out of it on the way.
        if key != nil, exchange.head.method == .GET {
            headers.remove(name: "Range")
            headers.remove(name: "If-Range")
        }
        for field in adding { headers.replaceOrAdd(name: field.name, value: field.value) }
        let head = originHead(exchange, headers: headers)
        let requestTime = Date()
        // Set once anything was sent to the client: an error after that cannot be answered.
        let started = PthreadMutex(false)
        do {
            return try await origin.exchangeReusing(head, informational: { [self] interim in
                // Passed on (an answer may still follow it), never stored.
                var headers = Fields.endToEnd(interim.headers)
                headers.add(name: "Via", value: via)
                try await send(.head(HTTPResponseHead(version: .http1_1, status: interim.status, headers: headers)), writer)
            }) { [self] responseHead, body in
                let responseTime = Date()
                note(.originResponse(seconds: responseTime.timeIntervalSince(requestTime)))
                let code = Int(responseHead.status.code)
                let fields = policyFields(responseHead.headers)
                if code == 304, let validating, let key {
                    while try await body.next() != nil {}
                    let cache = self.cache
                    let merged = try await BlockingIOPool.shared.run {
                        cache.applyNotModified(fields, validated: validating, key: key, requestTime: requestTime, responseTime: responseTime)
                    }
                    guard let outcome = try await serveStored(HTTPURLCache.StoredVariant(entry: merged, recordKey: validating.recordKey),
                                                              exchange, status: "REVALIDATED", writer: writer)
                    else { return FetchResult(outcome: nil) }
                    note(.revalidations)
                    return FetchResult(outcome: outcome)
                }
                if code == 200, exchange.isHEAD, let key {
                    // What the HEAD says of the stored GET responses (RFC 9111 §4.3.5), before it is answered.
                    let (cache, request) = (self.cache, exchange.cacheRequest)
                    try await BlockingIOPool.shared.run {
                        cache.freshenAfterHEAD(fields, request: request, key: key, requestTime: requestTime, responseTime: responseTime)
                    }
                }
                if CachePolicyEngine.staleIfErrorStatusCodes.contains(code), let stale = validating ?? fallback,
                   engine.canServeStale(stale.entry.response, for: exchange.cacheRequest, at: responseTime, after: .errorStatus(code)),
                   let outcome = try await serveStored(stale, exchange, status: "STALE", writer: writer) {
                    note(.staleOnError)
                    return FetchResult(outcome: outcome)
                }
                let storable = key != nil && exchange.head.method == .GET && code != 304 && code != 206
                    && isStorable(exchange.cacheRequest, status: code, fields: fields, sent: responseHead.headers)
                let stored = storable ? StoredResponse(request: exchange.cacheRequest, status: code, headers: fields,
                                                       requestTime: requestTime, responseTime: responseTime) : nil
                started.withLock { $0 = true }
                note(.misses)
                return FetchResult(outcome: try await relay(responseHead, &body, exchange, storing: stored, writer: writer))
            }
        } catch {
            guard !started.withLock({ $0 }), !(error is ClientGone), !(error is ResponseStarted) else { throw error }
            note(.originErrors)
            logger.warning("The origin failed", metadata: ["target": "\(exchange.target)", "error": "\(error)"])
            if let stale = validating ?? fallback,
               engine.canServeStale(stale.entry.response, for: exchange.cacheRequest, at: Date(), after: .disconnected),
               let outcome = try await serveStored(stale, exchange, status: "STALE", writer: writer) {
                note(.staleOnError)
                return FetchResult(outcome: outcome)
            }
            return FetchResult(outcome: try await respond(Self.status(after: error), "The origin did not answer: \(error)", writer: writer, head: exchange.head))
        }
    }

    /// A response's end-to-end fields as this cache decides by them and stores them
    /// (``Fields/targeted(_:)`` on a CDN), without `Set-Cookie`: a stored cookie would reach
    /// every client after (see ``isStorable(_:status:fields:sent:)``; a 304's cookies are not
    /// merged into the stored response either).
    private func policyFields(_ headers: HTTPHeaders) -> HTTPHeaderFields {
        var fields = Fields.fields(Fields.endToEnd(headers))
        fields.removeAll(named: "Set-Cookie")
        return configuration.isCDN ? Fields.targeted(fields) : fields
    }

    /// Whether a response of `status` may be stored for `request`: RFC 9111's rules over its
    /// ``policyFields(_:)`` `fields`, and the node's ``ServerConfiguration/setCookie`` policy
    /// over the fields as the origin `sent` them.
    private func isStorable(_ request: CacheRequest, status: Int, fields: HTTPHeaderFields, sent: HTTPHeaders) -> Bool {
        if configuration.setCookie == .doNotStore, sent.contains(name: "Set-Cookie") { return false }
        return engine.storability(ofStatus: status, headers: fields, for: request).isStorable
    }

    /// The head sent to the origin for `exchange`, with `headers`. A GET or HEAD goes without a
    /// body and without its framing: a body the client sent with one was read and dropped (as
    /// Varnish does), and a `Content-Length` sent without its bytes would make the origin read
    /// the start of the next request on a kept-alive connection as this one's body, and answer
    /// the rest as a request of the client's making (stored under the next request's target).
    private func originHead(_ exchange: Exchange, headers: HTTPHeaders) -> HTTPRequestHead {
        var headers = headers
        if exchange.head.method == .GET || exchange.head.method == .HEAD {
            headers.remove(name: "Content-Length")
            headers.remove(name: "Transfer-Encoding")
        }
        headers.replaceOrAdd(name: "Host", value: configuration.origin.authority)
        headers.add(name: "Via", value: via)
        return HTTPRequestHead(version: .http1_1, method: Self.originMethod(exchange.head.method), uri: exchange.target, headers: headers)
    }

    /// The method as the client spelled it: NIO names `M-SEARCH` `.MSEARCH`, whose raw value
    /// has no hyphen.
    static func originMethod(_ method: HTTPMethod) -> HTTPMethod {
        method == .MSEARCH ? .RAW(value: "M-SEARCH") : method
    }

    /// Sends the origin's response on to the client as it arrives, and into the cache when
    /// `storing` is set (the body spooled to a file in the cache's `tmp/`, then stored whole).
    private func relay(_ responseHead: HTTPResponseHead, _ body: inout OriginClient.ResponseBody, _ exchange: Exchange,
                       storing: StoredResponse?, writer: ClientWriter) async throws -> Outcome {
        var headers = Fields.endToEnd(responseHead.headers)
        headers.add(name: "Via", value: "\(responseHead.version.major).\(responseHead.version.minor) \(configuration.viaName)")
        headers.replaceOrAdd(name: "X-Cache", value: storing == nil ? "BYPASS" : "MISS")
        // A client's range of a whole body the origin sends (the range was not forwarded, so that
        // the whole body could be stored) is cut out as the body passes.
        var range = ByteRange.whole
        var status = responseHead.status
        if exchange.head.method == .GET, responseHead.status == .ok, exchange.head.headers.contains(name: "Range"),
           let length = headers.first(name: "Content-Length").flatMap({ Int64($0) }) {
            range = ByteRange(request: exchange.head.headers, response: Fields.fields(headers), size: length)
            status = range.apply(to: &headers, status: status, size: length)
        }
        var spool: BodySpool?
        if storing != nil, let directory = cache.temporaryDirectory { spool = BodySpool(in: directory) }
        var sent: Int64 = 0
        do {
            try await send(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers)), writer)
            // Each piece goes to the client when the next has come, the last only after the
            // store: a client that has the whole body finds it in the cache.
            var held: ByteBuffer?
            var offset: Int64 = 0
            while let buffer = try await body.next() {
                if !exchange.isHEAD, range != .unsatisfiable, let piece = range.slice(buffer, at: offset), piece.readableBytes > 0 {
                    if let previous = held { try await send(.body(.byteBuffer(previous)), writer) }
                    held = piece
                    sent += Int64(piece.readableBytes)
                }
                offset += Int64(buffer.readableBytes)
                if let current = spool {
                    do { try await current.append(buffer) } catch {
                        logger.warning("Cannot spool a response into the cache", metadata: ["error": "\(error)"])
                        await current.remove()
                        spool = nil
                    }
                }
            }
            if let spool, let storing {
                await store(storing, exchange, spool: spool)
            }
            try await send(held.map { [.body(.byteBuffer($0)), .end(nil)] } ?? [.end(nil)], writer)
        } catch {
            await spool?.remove()
            throw error
        }
        note(.bytesServed(sent))
        return Outcome(status: UInt(status.code), bytes: sent, cacheStatus: storing == nil ? "BYPASS" : "MISS")
    }

    /// Writes to the client; a failure is the client's going (``ClientGone``), not the origin's.
    private func send(_ part: HTTPServerResponsePart, _ writer: ClientWriter) async throws {
        do { try await writer.write(part) } catch { throw ClientGone(underlying: error) }
    }

    /// Writes `parts` to the client together.
    private func send(_ parts: [HTTPServerResponsePart], _ writer: ClientWriter) async throws {
        do { try await writer.write(contentsOf: parts) } catch { throw ClientGone(underlying: error) }
    }

    private func store(_ response: StoredResponse, _ exchange: Exchange, spool: BodySpool) async {
        let cache = self.cache
        let entry = CachedHTTPResponse(url: exchange.cacheRequest.url, response: response, body: Data(),
                                       mimeType: response.headers["Content-Type"].map { String($0.prefix { $0 != ";" }) })
        let request = exchange.urlRequest
        do {
            switch try await spool.finish() {
            case .bytes(let body):
                var whole = entry
                whole.body = body
                try await BlockingIOPool.shared.run { [whole] in try cache.storeWhole(whole, for: request) }
            case .file(let url):
                try await BlockingIOPool.shared.run { try cache.store(entry, bodyFile: url, for: request) }
            }
            note(.stores)
        } catch {
            logger.warning("Cannot store a response", metadata: ["target": "\(exchange.target)", "error": "\(error)"])
        }
        await spool.remove()
    }

    /// A stale-while-revalidate refresh: one per key at a time, answering no client.
    private func refreshInBackground(_ exchange: Exchange, key: String, validating: HTTPURLCache.StoredVariant, adding: HTTPHeaderFields) {
        refreshTasks.withLock { tasks in
            guard tasks[key] == nil else { return }
            tasks[key] = Task {
                await self.refresh(exchange, key: key, validating: validating, adding: adding)
                _ = self.refreshTasks.withLock { $0.removeValue(forKey: key) }
            }
        }
    }

    private func refresh(_ exchange: Exchange, key: String, validating: HTTPURLCache.StoredVariant, adding: HTTPHeaderFields) async {
        var headers = Fields.endToEnd(exchange.head.headers)
        for name in Fields.conditional { headers.remove(name: name) }
        for field in adding { headers.replaceOrAdd(name: field.name, value: field.value) }
        let get = exchange.asGET
        let head = originHead(get, headers: headers)
        let requestTime = Date()
        let cache = self.cache
        do {
            try await origin.exchangeReusing(head) { [self] responseHead, body in
                let responseTime = Date()
                note(.originResponse(seconds: responseTime.timeIntervalSince(requestTime)))
                let code = Int(responseHead.status.code)
                let fields = policyFields(responseHead.headers)
                if code == 304 {
                    while try await body.next() != nil {}
                    _ = try await BlockingIOPool.shared.run {
                        cache.applyNotModified(fields, validated: validating, key: key, requestTime: requestTime, responseTime: responseTime)
                    }
                    return
                }
                guard isStorable(get.cacheRequest, status: code, fields: fields, sent: responseHead.headers),
                      let directory = cache.temporaryDirectory else {
                    while try await body.next() != nil {}
                    return
                }
                let spool = BodySpool(in: directory)
                do {
                    while let buffer = try await body.next() { try await spool.append(buffer) }
                } catch {
                    await spool.remove()
                    throw error
                }
                await store(StoredResponse(request: get.cacheRequest, status: code, headers: fields,
                                           requestTime: requestTime, responseTime: responseTime), get, spool: spool)
            }
        } catch {
            note(.originErrors)
            logger.warning("A background refresh failed", metadata: ["target": "\(exchange.target)", "error": "\(error)"])
        }
    }

    // MARK: - Other methods

    /// Forwards a request other than GET and HEAD with its body, streams the answer back, and
    /// on a success of an unsafe method removes what is stored for its target and for the
    /// `Location` / `Content-Location` it names (RFC 9111 §4.4), before the answer goes on.
    private func forwardUnsafe(_ exchange: Exchange, parts: inout ClientParts, writer: ClientWriter) async throws -> Outcome {
        let head = originHead(exchange, headers: Fields.endToEnd(exchange.head.headers))
        var bodyRead = false
        var started = false
        let requestTime = Date()
        do {
            let outcome = try await origin.exchange(head, sendBody: { origin in
                while let part = try await parts.next() {
                    switch part {
                    case .body(let buffer): try await origin.write(.body(.byteBuffer(buffer)))
                    case .end: bodyRead = true; return
                    case .head: throw ClientGone(underlying: nil)
                    }
                }
                throw ClientGone(underlying: nil)
            }) { responseHead, body in
                note(.originResponse(seconds: Date().timeIntervalSince(requestTime)))
                note(.misses)
                started = true
                // Invalidated before the response goes on: a client that has it and asks for
                // the target again must not get what was stored before.
                let urls = CachePolicyEngine.urlsToInvalidate(after: exchange.cacheRequest, status: Int(responseHead.status.code),
                                                              headers: Fields.fields(responseHead.headers))
                if !urls.isEmpty {
                    let cache = self.cache
                    _ = try? await BlockingIOPool.shared.run { cache.invalidate(urls) }
                }
                return try await relay(responseHead, &body, exchange, storing: nil, writer: writer)
            }
            return outcome
        } catch {
            guard !started, !(error is ClientGone) else { throw error }
            note(.originErrors)
            var outcome = try await respond(Self.status(after: error), "The origin did not answer: \(error)", writer: writer, head: exchange.head)
            outcome.canContinue = bodyRead
            return outcome
        }
    }
}

extension ProxyHandler {
    /// The status sent when the origin gave no answer: 504 when it stayed silent for the read
    /// timeout, 502 otherwise (it could not be reached, or closed the connection).
    static func status(after originFailure: any Error) -> HTTPResponseStatus {
        if case OriginError.timedOut = originFailure { return .gatewayTimeout }
        return .badGateway
    }
}

/// The client went away (or sent something that ends the exchange) part way: the connection closes.
struct ClientGone: Error {
    let underlying: (any Error)?
}

/// A response from the store was part written when this was thrown (a later chunk failed its
/// checksum, the client went): no other answer may follow it, the connection closes.
struct ResponseStarted: Error {
    let underlying: any Error
}

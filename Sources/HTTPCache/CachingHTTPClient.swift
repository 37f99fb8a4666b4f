#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
public import Foundation
import DiskCache
import DiskCacheLocking
import HTTPTypes

/// An HTTP client that answers from an ``HTTPURLCache`` as RFC 9111 and RFC 5861 allow, and goes
/// to the network (through an ``HTTPTransport``) only when it must.
///
/// ```swift
/// let client = CachingHTTPClient(cache: try HTTPURLCache(directory: cacheDirectory))
/// let (data, response) = try await client.data(for: URLRequest(url: url))
/// ```
///
/// **Cache policies.** Each request's `cachePolicy` is honoured, all six of them:
/// `useProtocolCachePolicy` (the RFC), `reloadIgnoringLocalCacheData` (fetch; the response is
/// still stored), `reloadIgnoringLocalAndRemoteCacheData` (fetch with `Cache-Control: no-cache`
/// and `Pragma: no-cache`), `reloadRevalidatingCacheData` (always a conditional request; the
/// stored body on 304), `returnCacheDataElseLoad` (anything stored, else fetch) and
/// `returnCacheDataDontLoad` (anything stored, else ``HTTPCacheError/Code/notCached`` without a
/// network call).
///
/// **Revalidation.** A stale response with validators is revalidated with `If-None-Match` /
/// `If-Modified-Since`; on 304 the stored header fields are updated and the stored body served
/// (``Source/revalidated``).
///
/// **Failures.** When the fetch fails (transport error, or 500/502/503/504), a stored response
/// is served instead where `stale-if-error`, `max-stale` or a disconnected cache allow it
/// (``Source/staleAfterError``); otherwise the error (or the error response) is returned.
///
/// **Background refresh.** Within a `stale-while-revalidate` window the stale response is served
/// at once and one revalidation per stored response runs in the background, however many callers
/// see it stale. ``waitForBackgroundRefreshes()`` awaits them.
///
/// **Coalescing.** Concurrent GET and HEAD requests that would send the same request (method, URL,
/// header fields) share one network fetch and its result.
///
/// **Invalidation.** A successful response (2xx, 3xx) to an unsafe method removes what is stored
/// for the target URI and for same-origin `Location` and `Content-Location` (RFC 9111 §4.4).
///
/// **Large bodies.** With a ``StreamingHTTPTransport``, a body larger than 1 MiB is written to a
/// file as it arrives (in the cache's directory, so that storing it links it in without a copy)
/// and stored from there; ``download(for:chunkSize:)`` hands bodies out as chunks read from
/// disk, cached ones included. Neither holds such a body in memory; ``data(for:)`` and
/// ``response(for:)`` read it in whole, since they return `Data`.
///
/// **Cancellation.** Cancelling the calling task makes the call throw `CancellationError` at once.
/// A fetch shared by coalesced callers is cancelled when its last caller is; a background refresh
/// is not tied to any caller and runs to completion.
///
/// **Threads.** All methods may be called from any task or thread. Cache I/O runs on the cache's
/// own I/O threads, not on the calling task's.
public final class CachingHTTPClient: Sendable {
    /// The cache responses are read from and stored in.
    public let cache: HTTPURLCache
    /// How requests reach the network.
    public let transport: any HTTPTransport
    private let clock: @Sendable () -> Date
    private let state = PthreadMutex(State())
    private let fetches = Coalescer<Answer>()

    /// A body up to this size is held in memory; a larger one, in a file (when the transport
    /// streams, or for ``download(for:chunkSize:)``).
    static let memoryBodyLimit = 1 << 20

    private struct State {
        var statistics = Statistics()
        var refreshes: [String: Task<Void, Never>] = [:]
    }

    /// - Parameters:
    ///   - cache: where responses are kept; its ``HTTPURLCache/engine`` decides the rules, its
    ///     ``HTTPURLCache/keyProvider`` the keys, and its ``HTTPURLCache/willStore`` hook sees
    ///     every response before it is stored.
    ///   - transport: ``URLSessionTransport`` (a cache-less `URLSession`) by default.
    ///   - clock: the current time, for tests; `Date()` by default.
    public init(
        cache: HTTPURLCache,
        transport: any HTTPTransport = URLSessionTransport(),
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.cache = cache
        self.transport = transport
        self.clock = clock
    }

    /// The counters so far.
    public var statistics: Statistics { state.withLock { $0.statistics } }

    // MARK: - Requests

    /// The body and response for `request`, from the cache or the network as its `cachePolicy`
    /// and RFC 9111 decide.
    ///
    /// #### Errors
    /// ``HTTPCacheError/Code/notCached`` under `returnCacheDataDontLoad` with nothing stored;
    /// ``HTTPCacheError/Code/invalidRequest`` without a URL; `CancellationError` when the task is
    /// cancelled; the transport's error when the fetch fails and no stored response may stand in.
    public func data(for request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let response = try await response(for: request)
        return (response.data, response.response)
    }

    /// As ``data(for:)``, also telling where the response came from.
    public func response(for request: URLRequest) async throws -> Response {
        count(\.requestCount)
        let answer = try await respond(to: request, holdingFiles: false)
        countServed(answer.source)
        let data: Data
        switch answer.body {
        // A HEAD may be answered from a stored GET response: headers only.
        case _ where request.httpMethod == "HEAD": data = Data()
        case .data(let bytes): data = bytes
        case .file(let file): data = try await BlockingIOPool.shared.run { try file.readAll() }
        }
        return Response(data: data, response: answer.response, source: answer.source)
    }

    /// As ``response(for:)``, with the body handed out as chunks of `chunkSize` bytes read from
    /// disk as they are asked for: a body larger than memory, stored or fetched, can be read.
    ///
    /// The call returns once the whole body is here, as `URLSession`'s `download(for:)` does:
    /// fetched through a ``StreamingHTTPTransport``, it was written to a file in the cache's
    /// directory as it arrived (stored from there when it may be, linked in, no byte copied;
    /// otherwise removed once the body is no longer read). The same rules apply as for
    /// ``response(for:)``: cache policies, revalidation, stale responses on failures,
    /// coalescing, invalidation.
    ///
    /// **Memory.** A body of at most 1 MiB is held in memory. A larger one is not: fetching it
    /// holds at most 1 MiB of it, and reading it one chunk at a time. A plain
    /// ``HTTPTransport`` returns the body whole, so with one a fetched body is in memory once.
    ///
    /// **Files.** A body held in a file stays readable, whatever the cache does meanwhile,
    /// until the body (``Download/body``) and every iterator made from it are gone; then the
    /// file is closed and, when it is not in the cache, removed. A cached body is checked
    /// against its checksum before the call returns (read once more when the cache checks
    /// checksums).
    ///
    /// #### Errors
    /// As ``data(for:)``. An error while the body arrives is a failed fetch: a stored response
    /// may stand in for it, as for any failed fetch, and nothing is stored. Reading the body
    /// throws the storage layer's error when the file cannot be read, and `CancellationError`
    /// when the reading task is cancelled.
    public func download(for request: URLRequest, chunkSize: Int = 1 << 20) async throws -> Download {
        count(\.requestCount)
        let answer = try await respond(to: request, holdingFiles: true)
        countServed(answer.source)
        let body: HTTPBodyStream
        switch answer.body {
        case _ where request.httpMethod == "HEAD": body = HTTPBodyStream(Data())
        case .data(let bytes): body = HTTPBodyStream(bytes)
        case .file(let file): body = file.chunks(chunkSize: chunkSize)
        }
        return Download(body: body, response: answer.response, source: answer.source)
    }

    /// The cached response at once (when one is stored for the request, fresh or not), then the
    /// current one: the placeholder-then-refresh pattern.
    ///
    /// The second element comes from a revalidation (`reloadRevalidatingCacheData`) when a cached
    /// one was yielded, so an unchanged resource costs a 304; otherwise from a request with the
    /// request's own policy. Under `returnCacheDataDontLoad` only the cached element is yielded
    /// (or ``HTTPCacheError/Code/notCached`` thrown). Each element counts as one request.
    /// Ending the iteration, or cancelling the iterating task, cancels the fetch.
    public func responses(for request: URLRequest) -> AsyncThrowingStream<Response, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    var next = request
                    if let stored = try await cache.async.storedResponse(for: request) {
                        count(\.requestCount)
                        let placeholder = served(Held(entry: stored), at: clock(), source: .cache)
                        countServed(placeholder.source)
                        continuation.yield(Response(data: stored.body, response: placeholder.response, source: placeholder.source))
                        if request.cachePolicy == .returnCacheDataDontLoad {
                            continuation.finish()
                            return
                        }
                        next.cachePolicy = .reloadRevalidatingCacheData
                    }
                    continuation.yield(try await response(for: next))
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Returns when no background refresh is running (those started while waiting included).
    public func waitForBackgroundRefreshes() async {
        while let refresh = state.withLock({ $0.refreshes.values.first }) {
            await refresh.value
        }
    }

    // MARK: - Deciding

    /// - Parameter excluding: record keys of variants whose body could not be read after they
    ///   were chosen; each try leaves one more out, so this ends (at most 16 tries).
    ///
    /// `holdingFiles`: a chosen stored body larger than ``memoryBodyLimit`` is held open as a
    /// file, not read into memory.
    private func respond(to request: URLRequest, excluding: Set<String> = [], holdingFiles: Bool) async throws -> Answer {
        try Task.checkCancellation()
        guard let url = request.url, let cacheRequest = CacheRequest(request) else {
            throw HTTPCacheError(.invalidRequest, "the request has no URL")
        }
        // A request the key provider bypasses is decided as one with nothing stored: the policy
        // still applies (the headers of `reloadIgnoringLocalAndRemoteCacheData`, the refusal of
        // `returnCacheDataDontLoad`), and nothing is stored from its answer.
        let key = cache.keyProvider.key(for: request)
        let responses = cache.responses
        // The stored responses' metadata and the chosen one's body are read on the caches' I/O
        // threads, never on the cooperative pool.
        let bodyLimit = holdingFiles ? Int64(Self.memoryBodyLimit) : .max
        let variants = try await BlockingIOPool.shared.run { key.map { responses.variants(forKey: $0, bodyLimit: bodyLimit) } ?? [] }
            .filter { !excluding.contains($0.recordKey) }
        let now = clock()
        let decision = cache.engine.decision(
            for: cacheRequest, storedResponses: variants.map(\.entry.response), at: now,
            policy: RequestCachePolicy(request.cachePolicy)
        )
        // The chosen response's body is read after the choice; if it cannot be (its record
        // went in between: evicted, replaced, found damaged, unreadable), decide again without it.
        let chosen = decision.storedResponse.flatMap { stored in variants.first { $0.entry.response == stored } }
        var chosenEntry: Held?
        if let chosen { chosenEntry = try await hold(chosen, inFile: holdingFiles) }
        if let chosen, chosenEntry == nil {
            return try await respond(to: request, excluding: excluding.union([chosen.recordKey]), holdingFiles: holdingFiles)
        }
        let exchange = Exchange(request: request, cacheRequest: cacheRequest, key: key)

        switch decision {
        case .fresh, .stale:
            return served(chosenEntry!, at: now, source: .cache)
        case .staleWhileRevalidate(_, let conditionalHeaders):
            let entry = chosenEntry!
            refreshInBackground(exchange.validating(entry), adding: conditionalHeaders)
            return served(entry, at: now, source: .cache)
        case .revalidate(_, let conditionalHeaders):
            return try await fetch(exchange.validating(chosenEntry), adding: conditionalHeaders)
        case .mustFetch(let additionalHeaders, _):
            var exchange = exchange
            exchange.fallback = chosenEntry
            return try await fetch(exchange, adding: additionalHeaders)
        case .gatewayTimeout:
            let response = HTTPURLResponse(url: url, statusCode: 504, httpVersion: "HTTP/1.1", headerFields: ["Content-Length": "0"])!
            return Answer(body: .data(Data()), response: response, source: .gatewayTimeout)
        case .unavailableOffline:
            throw HTTPCacheError(.notCached, "nothing is stored for \(url.absoluteString) and the policy forbids the network")
        }
    }

    /// `variant` with its body: read into memory, or, with `inFile` and a body larger than
    /// ``memoryBodyLimit``, held open as a file. `nil` when its record has gone or now holds
    /// another variant (or its body is damaged).
    private func hold(_ variant: VariantRecords.Variant, inFile: Bool) async throws -> Held? {
        let responses = cache.responses
        let limit = Int64(Self.memoryBodyLimit)
        let loaded = try await BlockingIOPool.shared.run { () -> CachedHTTPResponse?? in
            guard !inFile || variant.isLoaded || (responses.records.storedSize(for: variant.recordKey) ?? 0) <= limit else {
                return .none
            }
            return .some(responses.load(variant))
        }
        if let loaded { return loaded.map { Held(entry: $0, file: nil) } }
        guard let (file, metadata) = try await BodyFile.holding(variant.recordKey, in: responses.records),
              let entry = CachedHTTPResponse(body: Data(), metadata: metadata),
              entry.variantID == variant.entry.variantID
        else { return nil }
        return Held(entry: entry, file: file)
    }

    /// A stored response with its body: in `entry.body`, or held open in `file` (then
    /// `entry.body` is empty).
    private struct Held: Sendable {
        var entry: CachedHTTPResponse
        var file: BodyFile? = nil
    }

    /// A body as the client passes it on.
    private enum Body: Sendable {
        case data(Data)
        case file(BodyFile)

        var data: Data? { if case .data(let data) = self { data } else { nil } }
        var file: BodyFile? { if case .file(let file) = self { file } else { nil } }
    }

    /// What answers a request (what a shared fetch hands every caller it has).
    private struct Answer: Sendable {
        var body: Body
        var response: HTTPURLResponse
        var source: Source
    }

    /// One request on its way to the network, with what the cache knows about it.
    private struct Exchange: Sendable {
        var request: URLRequest
        var cacheRequest: CacheRequest
        var key: String?
        /// The stored response a conditional request is about.
        var validatingEntry: Held?
        /// A stored response that may answer if the fetch fails.
        var fallback: Held?

        func validating(_ entry: Held?) -> Exchange {
            var copy = self
            copy.validatingEntry = entry
            return copy
        }
    }

    private func refreshInBackground(_ exchange: Exchange, adding headers: HTTPFields) {
        let refreshKey = (exchange.key ?? "") + "\n" + (exchange.validatingEntry?.entry.variantID ?? "")
        state.withLock { state in
            guard state.refreshes[refreshKey] == nil else { return }
            // The task removes itself under this lock, so it cannot do so before it is registered.
            state.refreshes[refreshKey] = Task {
                _ = try? await self.fetch(exchange, adding: headers)
                self.state.withLock { _ = $0.refreshes.removeValue(forKey: refreshKey) }
            }
        }
    }

    // MARK: - Fetching

    private func fetch(_ exchange: Exchange, adding headers: HTTPFields) async throws -> Answer {
        var outgoing = exchange.request
        for field in headers {
            outgoing.setValue(field.value, forHTTPHeaderField: field.name.rawName)
        }
        // A URLSession-based transport must not answer from, or store into, a URLCache itself.
        outgoing.cachePolicy = .reloadIgnoringLocalCacheData
        let operation: @Sendable () async throws -> Answer = { [outgoing] in
            try await self.perform(exchange, sending: outgoing)
        }
        guard let coalescingKey = Self.coalescingKey(for: outgoing) else {
            return try await operation()
        }
        return try await fetches.run(key: coalescingKey, operation: operation)
    }

    /// How many callers share the fetch `request` would join now (for tests: a way to know that
    /// concurrent callers have coalesced without waiting on time).
    func coalescedCallerCount(for request: URLRequest) -> Int {
        var outgoing = request
        outgoing.cachePolicy = .reloadIgnoringLocalCacheData
        return Self.coalescingKey(for: outgoing).map(fetches.waiterCount) ?? 0
    }

    /// Identical safe requests share a fetch: same method, URL and header fields.
    private static func coalescingKey(for request: URLRequest) -> String? {
        let method = request.httpMethod ?? "GET"
        guard method == "GET" || method == "HEAD", let url = request.url else { return nil }
        let fields = (request.allHTTPHeaderFields ?? [:])
            .map { ($0.key._asciiLowercased, $0.value) }
            .sorted { $0 < $1 }
            .map { "\($0.0): \($0.1)" }
        return ([method + " " + url.absoluteString] + fields).joined(separator: "\n")
    }

    /// Sends the request and brings the cache up to date with the answer.
    private func perform(_ exchange: Exchange, sending outgoing: URLRequest) async throws -> Answer {
        let engine = cache.engine
        let requestTime = clock()
        count(\.networkCount)
        let body: Body
        let http: HTTPURLResponse
        do {
            (body, http) = try await receive(outgoing)
        } catch {
            if Task.isCancelled || error is CancellationError || (error as? URLError)?.code == .cancelled {
                throw CancellationError()
            }
            if let stale = exchange.validatingEntry ?? exchange.fallback,
               engine.canServeStale(stale.entry.response, for: exchange.cacheRequest, at: clock(), after: .disconnected) {
                return served(stale, at: clock(), source: .staleAfterError)
            }
            throw error
        }
        let responseTime = clock()
        let headers = Self.storedHeaderFields(of: http)

        if http.statusCode == 304, let validating = exchange.validatingEntry, let key = exchange.key {
            let merged = try await BlockingIOPool.shared.run {
                // A validated response held in a file keeps it: only its metadata is rewritten.
                Held(entry: self.cache.responseStore.applyNotModified(headers, validated: validating.entry, key: key,
                                                        requestTime: requestTime, responseTime: responseTime,
                                                        through: .init(request: exchange.request, validatedBody: validating.file == nil)),
                     file: validating.file)
            }
            return served(merged, at: responseTime, source: .revalidated)
        }
        if CachePolicyEngine.staleIfErrorStatusCodes.contains(http.statusCode),
           let stale = exchange.validatingEntry ?? exchange.fallback,
           engine.canServeStale(stale.entry.response, for: exchange.cacheRequest, at: responseTime, after: .errorStatus(http.statusCode)) {
            return served(stale, at: responseTime, source: .staleAfterError)
        }

        let invalidated = CachePolicyEngine.urlsToInvalidate(after: exchange.cacheRequest, status: http.statusCode, headers: headers)
            .flatMap { cache.keyProvider.invalidationKeys(for: $0) }
        var entry: CachedHTTPResponse?
        if exchange.key != nil,
           engine.storability(ofStatus: http.statusCode, headers: headers, for: exchange.cacheRequest).isStorable {
            let stored = StoredResponse(
                request: exchange.cacheRequest, status: http.statusCode, headers: headers,
                requestTime: requestTime, responseTime: responseTime
            )
            entry = CachedHTTPResponse(
                url: http.url ?? exchange.cacheRequest.url, response: stored, body: body.data ?? Data(),
                mimeType: http.mimeType, textEncodingName: http.textEncodingName
            )
        }
        let response = Answer(body: body, response: http, source: .network)
        let freshensHEAD = exchange.key != nil && exchange.cacheRequest.method == "HEAD" && http.statusCode == 200
        guard !invalidated.isEmpty || freshensHEAD || entry != nil else { return response }
        // The cache is brought up to date on its I/O threads, in a task of its own: once the
        // answer is here, cancelling the caller no longer keeps it from the cache.
        let toStore = entry
        try await Task.detached {
            try await BlockingIOPool.shared.run {
                for key in invalidated { try? self.cache.responses.removeAll(forKey: key) }
                if freshensHEAD, let key = exchange.key {
                    self.cache.responseStore.freshenAfterHEAD(headers, request: exchange.cacheRequest, key: key, requestTime: requestTime,
                                                responseTime: responseTime, through: .init(request: exchange.request))
                }
                // A body in a file is linked into the cache (moved), no byte copied: the file
                // stays open here for the callers, whatever name it has.
                if let toStore { self.cache.store(toStore, for: exchange.request, bodyFile: body.file?.url) }
            }
        }.value
        return response
    }

    /// Sends `outgoing` and brings the whole body here: as the transport returns it from a plain
    /// ``HTTPTransport``; from a ``StreamingHTTPTransport``, in memory up to
    /// ``memoryBodyLimit`` and beyond that in a file, written on the caches' I/O threads in
    /// pieces of that size. An error or a cancellation while the body arrives removes the file.
    private func receive(_ outgoing: URLRequest) async throws -> (Body, HTTPURLResponse) {
        guard let streaming = transport as? any StreamingHTTPTransport else {
            let (data, http) = try await transport.send(outgoing)
            return (.data(data), http)
        }
        let (http, chunks) = try await streaming.stream(outgoing)
        let cache = cache
        var pending = Data()
        var file: BodyFile?
        for try await chunk in chunks {
            pending.append(chunk)
            guard pending.count > Self.memoryBodyLimit else { continue }
            if file == nil { file = try await BlockingIOPool.shared.run { try BodyFile.create(for: cache) } }
            let target = file!
            let piece = pending
            pending = Data()
            try await BlockingIOPool.shared.run { try target.append(piece) }
        }
        try Task.checkCancellation()
        guard let file else { return (.data(pending), http) }
        if !pending.isEmpty {
            let piece = pending
            try await BlockingIOPool.shared.run { try file.append(piece) }
        }
        return (.file(file), http)
    }

    // MARK: - Helpers

    /// What is stored of `response`'s fields: not those of the connection (RFC 9111 §3.1).
    private static func storedHeaderFields(of response: HTTPURLResponse) -> HTTPFields {
        CachePolicyEngine.endToEndFields(HTTPFields(response))
    }

    /// A stored response as a response, with the `Age` field RFC 9111 §5.1 requires.
    private func served(_ held: Held, at now: Date, source: Source) -> Answer {
        let entry = held.entry
        // The stored times come from disk or a hook: the age may be negative, huge or NaN,
        // which `ageFieldValue` writes as a delta-seconds all the same.
        let age = CachePolicyEngine.ageFieldValue(cache.engine.freshness(of: entry.response, at: now).currentAge)
        let response = HTTPURLCache.httpURLResponse(entry, extraHeaders: ["Age": age])
        return Answer(body: held.file.map(Body.file) ?? .data(entry.body), response: response, source: source)
    }

    private func count(_ counter: WritableKeyPath<Statistics, Int>) {
        state.withLock { $0.statistics[keyPath: counter] += 1 }
    }

    private func countServed(_ source: Source) {
        switch source {
        case .cache, .staleAfterError: count(\.hitCount)
        case .revalidated: count(\.conditionalHitCount)
        case .network, .gatewayTimeout: break
        }
    }
}

#if Server
import DiskCache
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCache
import NIOCore
import NIOHTTP1
import HTTPTypes

// GET and HEAD on the connection's task: the stored responses looked up, the policy's decision
// acted on, a stored response sent (from memory, a checked file, or streamed in chunks).
extension ProxyHandler {
    /// A request's key and the responses stored under it.
    typealias Stored = (key: String, variants: [HTTPResponseStore.StoredVariant])

    /// The key `exchange` is stored under; nil when the key provider bypasses it.
    func key(of exchange: Exchange) -> String? {
        cache.key(method: exchange.cacheRequest.method, url: exchange.cacheRequest.url, request: { exchange.urlRequest })
    }

    /// The responses stored under `key`, read from disk (a single small one with its body, see
    /// ``memoryBodyLimit``); with `pageCacheOnly`, only what the page cache holds, and nil when
    /// a read gave up rather than wait for the disk. Blocking without `pageCacheOnly`.
    func variantsFromDisk(forKey key: String, pageCacheOnly: DiskCache.PageCacheOnly?) -> [HTTPResponseStore.StoredVariant]? {
        let variants = cache.storedVariants(forKey: key, bodyLimit: memoryBodyLimit, pageCacheOnly: pageCacheOnly)
        return pageCacheOnly?.gaveUp == true ? nil : variants
    }

    /// The responses stored for `exchange`: from the memory tier on this thread when it holds
    /// them (no file read, no thread hop), else from disk on the I/O threads. Both the task and
    /// the event loop (``answerOnEventLoop(_:sentFiles:)``) look up this way.
    private func lookup(_ exchange: Exchange) async throws -> Stored? {
        guard let key = key(of: exchange) else { return nil }
        if let variants = cache.storedVariantsInMemory(forKey: key) { return (key, variants) }
        return try await BlockingIOPool.shared.run { (key, self.variantsFromDisk(forKey: key, pageCacheOnly: nil) ?? []) }
    }

    /// The largest body a lookup reads with the stored response (so that the memory tier can
    /// hold it and answer the next request): 256 KiB, or a twentieth of the memory tier.
    var memoryBodyLimit: Int64 { Int64(min(256 << 10, configuration.memoryCapacity / 20)) }

    /// Answers a GET or HEAD: from what is stored, looked up unless `known` (what the event
    /// loop found) is given, else from the origin.
    func answerFromCache(_ exchange: Exchange, known: Stored? = nil, writer: ClientWriter) async throws -> Outcome {
        let found: Stored?
        if let known { found = known } else { found = try await lookup(exchange) }
        guard let stored = found else {
            return try await fetch(exchange, key: nil, adding: [:], validating: nil, fallback: nil, writer: writer).outcome!
        }
        var variants = stored.variants
        var waited = false
        // Each pass leaves out a variant whose body could not be read, so this ends.
        while true {
            let decision = engine.decision(for: exchange.cacheRequest, storedResponses: variants.map(\.entry.response), at: Date())
            let chosen = HTTPResponseStore.StoredVariant.holding(decision.storedResponse, among: variants)
            switch decision {
            case .fresh, .stale:
                // A fresh hit that a prepared answer could give is prepared for the next request.
                var preparing: String?
                if case .fresh = decision, PreparedHits.canAnswer(exchange.fields), !exchange.target.hasPrefix("/_cache/") {
                    preparing = stored.key
                }
                if let outcome = try await serveStored(chosen!, exchange, status: "HIT", preparing: preparing, writer: writer) {
                    noteHit(.task)
                    return outcome
                }
                variants.removeAll { $0.recordKey == chosen!.recordKey }
            case .staleWhileRevalidate(_, let conditional):
                if let outcome = try await serveStored(chosen!, exchange, status: "STALE", writer: writer) {
                    noteHit(.task)
                    refreshInBackground(exchange, key: stored.key, validating: chosen!, adding: conditional)
                    return outcome
                }
                variants.removeAll { $0.recordKey == chosen!.recordKey }
            case .revalidate(_, let conditional):
                let result = try await fetch(exchange, key: stored.key, adding: conditional, validating: chosen, fallback: chosen, writer: writer)
                if let outcome = result.outcome { return outcome }
                variants = try await lookup(exchange)?.variants ?? []
            case .mustFetch(let additional, let fallbackResponse):
                let fallback = HTTPResponseStore.StoredVariant.holding(fallbackResponse, among: variants)
                // One fetch per resource at a time: the others wait for it, then look again.
                if fallback == nil, exchange.method == .get, !waited {
                    if case .leads = try await gate.enter(stored.key) {
                        defer { gate.finish(stored.key) }
                        let result = try await fetch(exchange, key: stored.key, adding: additional, validating: nil, fallback: nil, writer: writer)
                        if let outcome = result.outcome { return outcome }
                        return try await respond(.badGateway, "The origin's answer could not be used", writer: writer, isHEAD: exchange.isHEAD)
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
                return try await respond(.gatewayTimeout, "Nothing stored satisfies only-if-cached", writer: writer, isHEAD: exchange.isHEAD)
            }
        }
    }

    /// Sends a stored response (or a 304 when the client's conditions hold for it); nil when
    /// its body is gone or fails its checksum before anything was sent. `preparing`: the key of
    /// a fresh hit to prepare an answer for (``hitInMemory(_:_:key:preparing:at:)``).
    func serveStored(_ variant: HTTPResponseStore.StoredVariant, _ exchange: Exchange, status: String, preparing key: String? = nil,
                     writer: ClientWriter) async throws -> Outcome? {
        if variant.isLoaded {
            let answer: ReadyResponse
            // The task asked for no prepared answer yet (the event loop did): one made for the same response answers.
            if key != nil, let (hit, then) = prepared.current(for: exchange.preparedTarget, cache: cache),
               hit.recordKey == variant.recordKey {
                answer = hit.parts(isHEAD: exchange.isHEAD, at: then)
            } else {
                answer = key.map { hitInMemory(variant, exchange, key: $0, preparing: true, at: Date()) }
                    ?? inMemoryResponse(variant, exchange, status: status)
            }
            try await started { try await writer.write(contentsOf: answer.parts) }
            note(.bytesServed(answer.outcome.bytes))
            return answer.outcome
        }
        let response = variant.entry.response
        var fields = servedFields(response, status: status)
        // A 304 reads no body: answered here, not behind the disk reads queued for I/O threads.
        if let parts = notModified(response, exchange, fields) {
            try await started { try await writer.write(contentsOf: parts) }
            return Outcome(status: 304, cacheStatus: status)
        }
        // The body from disk: checked whole, then sent (a file by the kernel), or (above the
        // limit) chunks read as they are sent, the first before the head.
        let limit = configuration.wholeCheckLimit, sentFiles = writer.sentFiles, served = fields
        if let answer = try await BlockingIOPool.shared.run({
            try self.checkedAnswer(variant, exchange, fields: served, status: status, sizeLimit: limit, sentFiles: sentFiles)
        }) {
            do {
                try await started { try await writer.write(contentsOf: answer.parts) }
            } catch {
                // Nothing of it reached the channel: its file is closed here.
                for case .body(.fileRegion(let region)) in answer.parts { sentFiles.close(region.fileHandle) }
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
        let (range, code) = servedRange(of: response, size: size, for: exchange, fields: &fields)
        // Once anything is written, a failure cannot be answered any more (see `started(_:)`).
        let sent: Int64 = try await started {
            // Parts go out together (one flush) until the next chunk has to be waited for.
            var pending: [HTTPServerResponsePart] = [.head(Fields.responseHead(code, fields))]
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
        return Outcome(status: UInt(code.code), bytes: sent, cacheStatus: status)
    }

    /// Runs `body`, which writes a response to the client: whatever it throws is a
    /// ``ResponseStarted`` (the connection must close; no other answer may follow).
    private func started<T>(_ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch { throw ResponseStarted(underlying: error) }
    }
}
#endif

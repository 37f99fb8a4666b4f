#if Server
import DiskCache
import DiskCacheLocking
import Foundation
import HTTPCache
import Logging
import NIOCore
import NIOHTTP1
import HTTPTypes

// GET and HEAD sent to the origin: the request made, the answer stored, revalidated or relayed,
// stale served where an error allows it.
extension ProxyHandler {
    /// What a fetch did: an answer sent, or nothing sent and the cache should be asked again
    /// (a 304 for a response that was replaced meanwhile).
    struct FetchResult {
        var outcome: Outcome?
    }

    /// Sends the request to the origin (with `adding`'s fields; about `validating` when it
    /// revalidates) and answers the client: from the cache after a 304, stale where an error
    /// allows it, else with what the origin sent, stored as it passes when it may be.
    func fetch(_ exchange: Exchange, key: String?, adding: HTTPFields, validating: HTTPResponseStore.StoredVariant?,
                       fallback: HTTPResponseStore.StoredVariant?, writer: ClientWriter) async throws -> FetchResult {
        var fields = CachePolicyEngine.endToEndFields(exchange.fields)
        if validating != nil { for name in CachePolicyEngine.conditionalRequestFields { fields[name] = nil } }
        // A range of something that may be stored: the whole body is fetched (and stored), the
        // range cut out of it on the way.
        if key != nil, exchange.method == .get {
            fields[.range] = nil
            fields[.ifRange] = nil
        }
        for field in adding { fields.replaceOrAppend(field.name, field.value) }
        let head = originHead(exchange, fields: fields)
        let requestTime = Date()
        // Set once anything was sent to the client: an error after that cannot be answered.
        let started = PthreadMutex(false)
        do {
            return try await origin.exchangeReusing(head, informational: { [self] interim in
                // Passed on (an answer may still follow it), never stored; never to a client of
                // HTTP/1.0, and not the origin's 100, which answers nothing the client asked.
                guard exchange.acceptsInterim, interim.status != .continue else { return }
                var fields = CachePolicyEngine.endToEndFields(Fields.fields(interim.headers))
                fields.append(HTTPField(name: .via, value: via))
                try await send(.head(Fields.responseHead(Fields.status(interim), fields)), writer)
            }) { [self] responseHead, body in
                let responseTime = Date()
                note(.originResponse(seconds: responseTime.timeIntervalSince(requestTime)))
                let code = Int(responseHead.status.code)
                let sent = Fields.fields(responseHead.headers)
                let fields = policyFields(sent)
                if code == 304, let validating, let key {
                    while try await body.next() != nil {}
                    let cache = self.cache
                    let merged = try await BlockingIOPool.shared.run {
                        cache.applyNotModified(fields, validated: validating.entry, key: key, requestTime: requestTime, responseTime: responseTime)
                    }
                    guard let outcome = try await serveStored(HTTPResponseStore.StoredVariant(entry: merged, recordKey: validating.recordKey),
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
                var storable = key != nil && exchange.method == .get && code != 304 && code != 206
                    && isStorable(exchange.cacheRequest, status: code, fields: fields, sent: sent)
                // `--min-uses`: a key with nothing stored is stored on its n-th miss.
                let declined = storable && validating == nil && fallback == nil && !admits(key)
                if declined {
                    storable = false
                    note(.storesDeclined)
                }
                let stored = storable ? StoredResponse(request: exchange.cacheRequest, status: code, headers: fields,
                                                       requestTime: requestTime, responseTime: responseTime) : nil
                started.withLock { $0 = true }
                note(.misses)
                return FetchResult(outcome: try await relay(responseHead, sent, &body, exchange, storing: stored, declined: declined, writer: writer))
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
            return FetchResult(outcome: try await respond(Self.status(after: error), "The origin did not answer: \(error)", writer: writer, isHEAD: exchange.isHEAD))
        }
    }

    /// Counts a miss of `key` toward ``ServerConfiguration/minimumUses``; whether its response
    /// is to be stored.
    func admits(_ key: String?) -> Bool {
        guard configuration.minimumUses > 1, let key else { return true }
        let (minimum, window) = (configuration.minimumUses, configuration.minimumUsesWindow)
        return uses.withLock { $0.admits(key.hashValue, minimumUses: minimum, window: window) }
    }

    /// A response's end-to-end fields as this cache decides by them and stores them
    /// (``Fields/targeted(_:)`` on a CDN), without `Set-Cookie`: a stored cookie would reach
    /// every client after (see ``isStorable(_:status:fields:sent:)``; a 304's cookies are not
    /// merged into the stored response either).
    func policyFields(_ sent: HTTPFields) -> HTTPFields {
        var fields = CachePolicyEngine.endToEndFields(sent)
        fields[.setCookie] = nil
        return configuration.isCDN ? Fields.targeted(fields) : fields
    }

    /// Whether a response of `status` may be stored for `request`: RFC 9111's rules over its
    /// ``policyFields(_:)`` `fields`, and the node's ``ServerConfiguration/setCookie`` policy
    /// over the fields as the origin `sent` them.
    func isStorable(_ request: CacheRequest, status: Int, fields: HTTPFields, sent: HTTPFields) -> Bool {
        if configuration.setCookie == .doNotStore, sent.contains(.setCookie) { return false }
        return engine.storability(ofStatus: status, headers: fields, for: request).isStorable
    }

    /// The head sent to the origin for `exchange`, with `fields`. A GET or HEAD goes without a
    /// body and without its framing: a body the client sent with one was read and dropped (as
    /// Varnish does), and a `Content-Length` sent without its bytes would make the origin read
    /// the start of the next request on a kept-alive connection as this one's body, and answer
    /// the rest as a request of the client's making (stored under the next request's target).
    /// `Expect` is not forwarded (nginx does not either): the node answers `100-continue`
    /// itself (``forwardUnsafe(_:sendsContinue:parts:writer:)``), and sends the body without
    /// waiting for the origin's.
    func originHead(_ exchange: Exchange, fields: HTTPFields) -> HTTPRequestHead {
        var fields = fields
        fields[.expect] = nil
        if exchange.method == .get || exchange.method == .head {
            fields[.contentLength] = nil
            fields[.transferEncoding] = nil
        }
        fields.replaceOrAppend(Fields.host, configuration.origin.authority)
        fields.append(HTTPField(name: .via, value: via))
        return Fields.originHead(exchange.method, target: exchange.target, fields)
    }

    /// The status sent when the origin gave no answer: 504 when it stayed silent for the read
    /// timeout, 502 otherwise (it could not be reached, or closed the connection).
    static func status(after originFailure: any Error) -> HTTPResponse.Status {
        if case OriginError.timedOut = originFailure { return .gatewayTimeout }
        return .badGateway
    }
}
#endif

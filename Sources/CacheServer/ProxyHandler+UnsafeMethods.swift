import DiskCache
import Foundation
import HTTPCache
import NIOCore
import NIOHTTP1

// Methods other than GET and HEAD: forwarded with their bodies, and what they change invalidated.
extension ProxyHandler {
    /// Forwards a request other than GET and HEAD with its body, streams the answer back, and
    /// on a success of an unsafe method removes what is stored for its target and for the
    /// `Location` / `Content-Location` it names (RFC 9111 §4.4), before the answer goes on.
    func forwardUnsafe(_ exchange: Exchange, parts: inout ClientParts, writer: ClientWriter) async throws -> Outcome {
        let head = originHead(exchange, fields: CachePolicyEngine.endToEndFields(exchange.fields))
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
                let sent = Fields.fields(responseHead.headers)
                let urls = CachePolicyEngine.urlsToInvalidate(after: exchange.cacheRequest, status: Int(responseHead.status.code),
                                                              headers: sent)
                if !urls.isEmpty {
                    let cache = self.cache
                    _ = try? await BlockingIOPool.shared.run { cache.invalidate(urls) }
                }
                return try await relay(responseHead, sent, &body, exchange, storing: nil, writer: writer)
            }
            return outcome
        } catch {
            guard !started, !(error is ClientGone) else { throw error }
            note(.originErrors)
            var outcome = try await respond(Self.status(after: error), "The origin did not answer: \(error)", writer: writer, isHEAD: exchange.isHEAD)
            outcome.canContinue = bodyRead
            return outcome
        }
    }
}

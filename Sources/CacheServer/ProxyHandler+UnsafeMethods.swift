#if Server
import DiskCache
import DiskCacheLocking
import Foundation
import HTTPCache
import NIOCore
import NIOHTTP1

// Methods other than GET and HEAD: forwarded with their bodies, and what they change invalidated.
extension ProxyHandler {
    /// Where a forwarded request stands, as its two tasks (the body's and the answer's) see it.
    private struct Upload {
        /// The client's body was read to its end.
        var bodyEnded = false
        /// Something of the answer went to the client: a failure after cannot be answered.
        var answerStarted = false
        /// The answer began before the body ended: the connection closes after both.
        var answeredEarly = false
    }

    /// Forwards a request other than GET and HEAD with its body, streams the answer back, and
    /// on a success of an unsafe method removes what is stored for its target and for the
    /// `Location` / `Content-Location` it names (RFC 9111 §4.4), before the answer goes on.
    ///
    /// The body goes to the origin while the origin's answer is read, so an origin that answers
    /// before it has read the body (a 413, a 401) has that answer relayed at once, not a 502.
    /// An answer that begins before the client's body has ended (the origin's, or the node's
    /// own 502 or 504) carries `Connection: close`: the rest of the body is read and dropped
    /// (what the origin no longer takes is dropped too), then the connection closes; or, once
    /// the answer has ended, after the lingering time (``ClientTimeouts``) at most. Closing
    /// with the body unread would make the kernel reset the connection, and the client could
    /// lose the answer; nginx reads on the same way (its lingering close).
    ///
    /// `sendsContinue`: the client asked for `100 Continue` (``continueExpected(_:)``). As
    /// nginx does, the node sends it itself once the origin's connection is open and the body
    /// is about to be read, and does not forward `Expect` (``originHead(_:fields:)``).
    func forwardUnsafe(_ exchange: Exchange, sendsContinue: Bool, parts: inout ClientParts, writer: ClientWriter) async throws -> Outcome {
        let head = originHead(exchange, fields: CachePolicyEngine.endToEndFields(exchange.fields))
        // A body of a declared length has ended, for the origin, with its last byte (a request
        // with neither `Content-Length` nor `Transfer-Encoding` has none, RFC 9112 §6.3): it
        // may answer at once, before `.end` is read here.
        let length = exchange.fields.contains(.transferEncoding) ? nil : exchange.fields[values: .contentLength].first.map { Int($0) ?? -1 } ?? 0
        let upload = PthreadMutex(Upload(bodyEnded: length == 0))
        let requestTime = Date()
        do {
            var outcome = try await origin.exchange(head, sendBody: { origin in
                var forwarding = true
                var received = 0
                while true {
                    let part: HTTPServerRequestPart?
                    do { part = try await parts.next() } catch { throw ClientGone(underlying: error) }
                    switch part {
                    case .body(let buffer)?:
                        received += buffer.readableBytes
                        if let length, received >= length { upload.withLock { $0.bodyEnded = true } }
                        // Once the origin stops taking the body (it answered, or closed), the
                        // rest is read and dropped.
                        guard forwarding else { continue }
                        do { try await origin.write(.body(.byteBuffer(buffer))) } catch { forwarding = false }
                    case .end?:
                        upload.withLock { $0.bodyEnded = true }
                        return
                    case .head?, nil:
                        throw ClientGone(underlying: nil)
                    }
                }
            }, answer: { [self] response in
                // Before anything else the answer's task writes: nothing of the answer precedes it.
                if sendsContinue { try await send(.head(HTTPResponseHead(version: .http1_1, status: .continue)), writer) }
                let responseHead: HTTPResponseHead
                do {
                    responseHead = try await response.head(informational: { [self] interim in
                        // The origin's own 100 (`Expect` was not forwarded) answers nothing the client asked.
                        guard exchange.acceptsInterim, interim.status != .continue else { return }
                        var fields = CachePolicyEngine.endToEndFields(Fields.fields(interim.headers))
                        fields.append(HTTPField(name: .via, value: via))
                        try await send(.head(Fields.responseHead(Fields.status(interim), fields)), writer)
                    })
                } catch let error where !(error is ClientGone) && !Task.isCancelled {
                    note(.originErrors)
                    let early = upload.withLock { upload in
                        upload.answerStarted = true
                        upload.answeredEarly = !upload.bodyEnded
                        return upload.answeredEarly
                    }
                    return try await respond(Self.status(after: error), "The origin did not answer: \(error)", writer: writer,
                                             isHEAD: exchange.isHEAD, closing: early)
                }
                note(.originResponse(seconds: Date().timeIntervalSince(requestTime)))
                note(.misses)
                // Invalidated before the response goes on: a client that has it and asks for
                // the target again must not get what was stored before.
                let sent = Fields.fields(responseHead.headers)
                let urls = CachePolicyEngine.urlsToInvalidate(after: exchange.cacheRequest, status: Int(responseHead.status.code),
                                                              headers: sent)
                if !urls.isEmpty {
                    let cache = self.cache
                    _ = try? await BlockingIOPool.shared.run { cache.invalidate(urls) }
                }
                let early = upload.withLock { upload in
                    upload.answerStarted = true
                    upload.answeredEarly = !upload.bodyEnded
                    return upload.answeredEarly
                }
                return try await relay(responseHead, sent, &response, exchange, storing: nil, closing: early, writer: writer)
            })
            if upload.withLock({ $0.answeredEarly }) { outcome.canContinue = false }
            return outcome
        } catch {
            guard !upload.withLock({ $0.answerStarted }), !(error is ClientGone) else { throw error }
            // The origin could not be reached (or took no head): the body was not read, and no
            // `100 Continue` went out, so a client that waits for one has sent none of it.
            note(.originErrors)
            var outcome = try await respond(Self.status(after: error), "The origin did not answer: \(error)", writer: writer, isHEAD: exchange.isHEAD)
            outcome.canContinue = false
            return outcome
        }
    }

    /// Whether `head` asks for `100 Continue` before its body (RFC 9110 §10.1.1): an
    /// `Expect` member `100-continue`, in a request of HTTP/1.1 or later (one of HTTP/1.0 is not
    /// sent any 1xx) whose framing says a body follows.
    static func continueExpected(_ head: HTTPRequestHead) -> Bool {
        guard head.version.major > 1 || (head.version.major == 1 && head.version.minor >= 1) else { return false }
        let expects = head.headers["Expect"].contains { value in
            value.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces).lowercased() == "100-continue" }
        }
        guard expects else { return false }
        if head.headers.contains(name: "Transfer-Encoding") { return true }
        return head.headers["Content-Length"].contains { $0.trimmingCharacters(in: .whitespaces) != "0" }
    }
}
#endif

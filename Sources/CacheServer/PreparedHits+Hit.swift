#if Server
import Foundation
import HTTPCache
import NIOCore
import HTTPTypes

extension PreparedHits {
    /// One prepared answer: made once from a stored response (``init(variant:key:url:at:engine:headers:)``),
    /// then given as often as it is asked for, with its `Age` at the time: as parts for NIO's
    /// pipeline (``parts(isHEAD:at:)``) or in its wire form (``wireAnswer(isHEAD:at:)``).
    struct Hit: Sendable {
        /// The cache key of the target and the record of the response the answer was made from.
        let primaryKey: String
        let recordKey: String
        /// The response's metadata text (see ``HTTPResponseStore/storedResponseInMemory(forKey:)``).
        let text: String
        let status: HTTPResponse.Status
        /// The fields sent, in the full path's order: those before `Age`, then `Age` (made
        /// for each answer), then those after it.
        let beforeAge: HTTPFields
        let afterAge: HTTPFields
        let body: ByteBuffer
        var size: Int { body.readableBytes }
        /// The head as it goes on the wire, but for its `Age` value (see ``WireHead``); nil when
        /// a field cannot be written as it is (the full path's header check then refuses it).
        let wire: WireHead?
        let preparedAt: Date
        /// The response's current age at `preparedAt`; it grows second for second.
        let ageThen: TimeInterval
        /// The end of its freshness for such requests.
        let freshUntil: Date

        init(primaryKey: String, recordKey: String, text: String, status: HTTPResponse.Status, beforeAge: HTTPFields,
             afterAge: HTTPFields, body: ByteBuffer, preparedAt: Date, ageThen: TimeInterval, freshUntil: Date) {
            self.primaryKey = primaryKey
            self.recordKey = recordKey
            self.text = text
            self.status = status
            self.beforeAge = beforeAge
            self.afterAge = afterAge
            self.body = body
            self.preparedAt = preparedAt
            self.ageThen = ageThen
            self.freshUntil = freshUntil
            wire = WireHead(status: status, beforeAge: beforeAge, afterAge: afterAge)
        }

        /// The answer to a request that carries none of ``PreparedHits/fieldsRead`` from
        /// `variant`, a response held in memory with its body (stored under `key`) that the
        /// decision found fresh for it: what ``ProxyHandler/inMemoryResponse(_:_:status:)`` would
        /// send (a whole response), kept until the response's freshness for such requests ends.
        /// `headers` are the fields a stored response is sent with as a hit
        /// (``ProxyHandler/servedFields(_:status:at:)`` at `now`), made only once the response
        /// is found preparable. Nil when the decision would read more of such a request (a
        /// `Vary`), or the response's metadata text is not known.
        init?(variant: HTTPResponseStore.StoredVariant, key: String, url: URL, at now: Date, engine: CachePolicyEngine,
              fields servedFields: @autoclosure () -> HTTPFields) {
            let response = variant.entry.response
            guard let text = variant.metadataText, let freshUntil = engine.freshnessDeadline(of: response, url: url, at: now)
            else { return nil }
            var fields = servedFields()
            let body = variant.entry.body
            let status = ByteRange.whole.apply(to: &fields, status: HTTPResponse.Status(code: response.status), size: Int64(body.count))
            let (beforeAge, afterAge) = Self.split(fields)
            self.init(primaryKey: key, recordKey: variant.recordKey, text: text, status: status,
                      beforeAge: beforeAge, afterAge: afterAge, body: ByteBuffer(bytes: body), preparedAt: now,
                      ageThen: engine.freshness(of: response, at: now).currentAge, freshUntil: freshUntil)
        }

        func age(at now: Date) -> TimeInterval { ageThen + now.timeIntervalSince(preparedAt) }

        /// The answer at `now` (its `Age` then), as the parts NIO's pipeline writes, and what it
        /// answers: a whole response, no body for HEAD.
        func parts(isHEAD: Bool, at now: Date) -> ReadyResponse {
            let fields = self.fields(age: CachePolicyEngine.ageFieldValue(age(at: now)))
            let body = self.body
            let sent = ProxyHandler.sentBounds(.whole, size: Int64(size), isHEAD: isHEAD).map { _ in IOData.byteBuffer(body) }
            return ProxyHandler.wholeResponse(status, fields, status: "HIT", body: sent)
        }

        /// The answer at `now` in its wire form, for ``RawHitResponder``: the bytes NIO's encoder
        /// would write for ``parts(isHEAD:at:)``, a body up to ``RawHitResponder/bodyInHeadLimit``
        /// bytes in the head's buffer. Nil when the answer has no wire form (``wire``).
        func wireAnswer(isHEAD: Bool, at now: Date) -> RawHitResponder.Answer? {
            guard let wire else { return nil }
            let sendsBody = !isHEAD && size > 0
            let bodyInHead = sendsBody && size <= RawHitResponder.bodyInHeadLimit
            var head = wire.head(age: CachePolicyEngine.ageFieldValue(age(at: now)), reserving: bodyInHead ? size : 0)
            if bodyInHead { head.writeImmutableBuffer(body) }
            return RawHitResponder.Answer(head: head, body: sendsBody && !bodyInHead ? body : nil,
                                          outcome: Outcome(status: UInt(status.code), bytes: sendsBody ? Int64(size) : 0, cacheStatus: "HIT"))
        }

        /// The fields of the answer with `age` as its `Age`.
        private func fields(age: String) -> HTTPFields {
            var fields = beforeAge
            fields.append(HTTPField(name: .age, value: age))
            fields.append(contentsOf: afterAge)
            return fields
        }

        /// `fields`, which has one `Age` field, split around it.
        private static func split(_ fields: HTTPFields) -> (before: HTTPFields, after: HTTPFields) {
            guard let age = fields.firstIndex(where: { $0.name == .age }) else { return (fields, [:]) }
            return (HTTPFields(fields[..<age]), HTTPFields(fields[(age + 1)...]))
        }
    }
}
#endif

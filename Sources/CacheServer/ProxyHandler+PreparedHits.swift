import Foundation
import HTTPCache
import NIOCore
import NIOHTTP1

// Answers prepared for fresh hits held in memory (``PreparedHits``): made, checked, and sent as
// parts or in their wire form (``RawHitResponder``).
extension ProxyHandler {
    /// The answer prepared for `target` (see ``PreparedHits``), when the memory tier still holds
    /// the response it was made from and that response is still fresh; nil otherwise (the
    /// answer is dropped then, and the full path prepares a new one).
    func preparedAnswer(for target: PreparedHits.Target) -> ReadyResponse? {
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
    func prepare(_ variant: HTTPURLCache.StoredVariant, key: String, url: URL, at now: Date) -> PreparedHits.Hit? {
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
    func preparedResponse(_ hit: PreparedHits.Hit, isHEAD: Bool, at now: Date) -> ReadyResponse {
        let headers = hit.headers(age: Self.ageField(hit.age(at: now)))
        let body = hit.body
        return wholeResponse(hit.status, headers, isHEAD: isHEAD, status: "HIT", range: .whole, size: Int64(hit.size)) { _ in
            .byteBuffer(body)
        }
    }
}

#if Server
import Foundation
import HTTPCache
import NIOCore
import HTTPTypes

// Answers prepared for fresh hits held in memory (``PreparedHits``): made where a hit held in
// memory is answered (on the event loop or the connection's task), asked for by the doors that
// give them: as parts (``EventLoopHitResponder``) or in their wire form (``RawHitResponder``).
extension ProxyHandler {
    /// The answer to `exchange` from `chosen`, a stored response held in memory with its body,
    /// as a hit at `now`. With `preparing` (a response the decision found fresh, for a request
    /// ``PreparedHits/canAnswer(_:)`` allows), it is prepared and kept for the next such request
    /// (when it can be kept: otherwise every hit would prepare it again); else made as
    /// ``inMemoryResponse(_:_:status:)`` makes it.
    func hitInMemory(_ chosen: HTTPResponseStore.StoredVariant, _ exchange: Exchange, key: String, preparing: Bool,
                     at now: Date) -> ReadyResponse {
        if preparing, prepared.fits(bodySize: chosen.entry.body.count),
           let hit = PreparedHits.Hit(variant: chosen, key: key, url: exchange.cacheRequest.url, at: now, engine: engine,
                                      fields: servedFields(chosen.entry.response, status: "HIT", at: now)) {
            prepared.keep(hit, for: exchange.preparedTarget)
            return hit.parts(isHEAD: exchange.isHEAD, at: now)
        }
        return inMemoryResponse(chosen, exchange, status: "HIT")
    }

    /// The answer prepared for `target` (see ``PreparedHits``), when the memory tier still holds
    /// the response it was made from and that response is still fresh; nil otherwise (the
    /// answer is dropped then, and the full path prepares a new one). Counted as a prepared hit
    /// on the event loop.
    func preparedAnswer(for target: PreparedHits.Target) -> ReadyResponse? {
        guard let (hit, now) = prepared.current(for: target, cache: cache) else { return nil }
        let answer = hit.parts(isHEAD: target.isHEAD, at: now)
        noteHit(.eventLoop(bytes: answer.outcome.bytes, prepared: true))
        return answer
    }

    /// ``preparedAnswer(for:)`` in its wire form, for ``RawHitResponder``: the same bytes NIO's
    /// encoder would write for it. Nil when no current prepared hit has a wire form. Counted as
    /// a prepared hit.
    func rawAnswer(for target: PreparedHits.Target) -> RawHitResponder.Answer? {
        guard let (hit, now) = prepared.current(for: target, cache: cache),
              let answer = hit.wireAnswer(isHEAD: target.isHEAD, at: now)
        else { return nil }
        noteHit(.fromBytes(bytes: answer.outcome.bytes))
        return answer
    }
}
#endif

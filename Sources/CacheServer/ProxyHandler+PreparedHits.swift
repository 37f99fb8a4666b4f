import Foundation
import HTTPCache
import NIOCore

// Answers prepared for fresh hits held in memory (``PreparedHits``), asked for by the doors that
// give them: as parts (``EventLoopHitResponder``) or in their wire form (``RawHitResponder``).
extension ProxyHandler {
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

#if Server
import Foundation
import HTTPCache
import MemoryCache
import NIOCore
import NIOHTTP1
import HTTPTypes

/// Answers prepared for hits: for a request target whose stored response the memory tier
/// holds and a policy decision found fresh, the response's head as it is sent (but its `Age`)
/// and its body as a `ByteBuffer`, kept until that response stops being fresh. The next GET or
/// HEAD of the target that carries none of ``fieldsRead`` is answered from them, once the
/// memory tier is seen to hold the same response still (``HTTPResponseStore/storedResponseInMemory(forKey:)``):
/// without decoding the stored response, deciding again, converting its header fields or
/// copying its body.
///
/// Such a request is answered by the stored response and the time alone: the decision reads
/// nothing else of it (``CachePolicyEngine/freshnessDeadline(of:url:at:)``: no `Vary`, no
/// directives), and without conditions or a range the answer is the whole response. A
/// request with any of these fields, a response replaced, removed or evicted from memory since,
/// or past its deadline takes the full path, which prepares the answer again.
///
/// An answer is made and checked here (``Hit``, ``current(for:cache:)``) and given in the form
/// each door writes: parts for NIO's pipeline (``EventLoopHitResponder``) or bytes for the
/// socket (``RawHitResponder``). The doors only ask for it and write it.
///
/// Bounded by ``capacity`` bytes (bodies, and ``entryOverhead`` for each entry's head): the
/// answers prepared first go first. Thread-safe.
final class PreparedHits: Sendable {
    /// The request fields that make an answer depend on more than the stored response and
    /// the time: the decision's (``CachePolicyEngine/directiveFields``), the conditional ones
    /// (a 304) and `Range` (a 206).
    static let fieldsRead: [HTTPField.Name] = CachePolicyEngine.directiveFields + CachePolicyEngine.conditionalRequestFields + [.range]

    /// What an entry is counted as besides its body: its head's fields and keys.
    static let entryOverhead = 1024

    /// A GET or HEAD request's target, as sent.
    struct Target: Hashable, Sendable {
        let isHEAD: Bool
        let uri: String
    }

    let capacity: Int
    /// The answers, each costing its body and ``entryOverhead``. Looked up without counting a
    /// use, so that the least recently used is the first prepared (or prepared again).
    private let hits: MemoryCache<Target, Hit>

    init(capacity: Int) {
        self.capacity = capacity
        hits = MemoryCache(name: "prepared answers", totalCostLimit: capacity, policy: .leastRecentlyUsed)
    }

    /// Whether a request with `fields` can be answered by a prepared answer.
    static func canAnswer(_ fields: HTTPFields) -> Bool {
        !fieldsRead.contains { fields.contains($0) }
    }

    /// The same, of a head as NIO read it (before it is converted).
    static func canAnswer(_ headers: HTTPHeaders) -> Bool {
        !fieldsRead.contains { headers.contains(name: $0.rawName) }
    }

    /// Whether an answer with a body of `size` bytes can be kept at all (worth preparing).
    func fits(bodySize size: Int) -> Bool { size + Self.entryOverhead <= capacity }

    func hit(for target: Target) -> Hit? {
        hits.valueWithoutUse(for: target)
    }

    /// The hit prepared for `target` and the time it was found current at: the memory tier of
    /// `cache` still holds the response it was made from (the same record, body size and
    /// metadata text), and that response is still fresh. Else nil, and the hit is dropped (the
    /// full path prepares a new one). The time is read only once a hit is found.
    func current(for target: Target, cache: HTTPResponseStore) -> (hit: Hit, now: Date)? {
        guard let hit = hit(for: target) else { return nil }
        let now = Date()
        guard now < hit.freshUntil, let stored = cache.storedResponseInMemory(forKey: hit.primaryKey),
              stored.recordKey == hit.recordKey, stored.body.count == hit.size, stored.text == hit.text
        else {
            forget(target, ifStill: hit)
            return nil
        }
        return (hit, now)
    }

    /// Keeps `hit` as the answer for `target`, in place of any before; nothing when it alone
    /// would take more than ``capacity``.
    func keep(_ hit: Hit, for target: Target) {
        guard fits(bodySize: hit.size) else { return }
        hits.store(hit, for: target, cost: hit.size + Self.entryOverhead)
    }

    /// Drops the answer for `target` when it is still `hit` (found stale or replaced). An
    /// answer prepared for the target between the look and the removal goes too; the next
    /// hit prepares it again.
    func forget(_ target: Target, ifStill hit: Hit) {
        guard let current = hits.valueWithoutUse(for: target), current.preparedAt == hit.preparedAt,
              current.recordKey == hit.recordKey
        else { return }
        hits.removeValue(for: target)
    }

    /// Entries and bytes held, for tests.
    var usage: (entries: Int, bytes: Int) { (hits.count, hits.totalCost) }
}
#endif

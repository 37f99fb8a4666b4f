import Foundation
import HTTPCache
import MemoryCache
import NIOCore
import NIOHTTP1

/// Answers prepared for hits: for a request target whose stored response the memory tier
/// holds and a policy decision found fresh, the response's head as it is sent (but its `Age`)
/// and its body as a `ByteBuffer`, kept until that response stops being fresh. The next GET or
/// HEAD of the target that carries none of ``fieldsRead`` is answered from them, once the
/// memory tier is seen to hold the same response still (``HTTPURLCache/storedResponseInMemory(forKey:)``):
/// without decoding the stored response, deciding again, converting its header fields or
/// copying its body.
///
/// Such a request is answered by the stored response and the time alone: the decision reads
/// nothing else of it (``CachePolicyEngine/freshnessDeadline(of:url:at:)``: no `Vary`, no
/// directives), and without conditions or a range the answer is the whole response. A
/// request with any of these fields, a response replaced, removed or evicted from memory since,
/// or past its deadline takes the full path, which prepares the answer again.
///
/// Bounded by ``capacity`` bytes (bodies, and ``entryOverhead`` for each entry's head): the
/// answers prepared first go first. Thread-safe.
final class PreparedHits: Sendable {
    /// The request fields that make an answer depend on more than the stored response and
    /// the time: the decision's (``CachePolicyEngine/directiveFields``), the conditional ones
    /// (a 304) and `Range` (a 206).
    static let fieldsRead = CachePolicyEngine.directiveFields + Fields.conditional + ["Range"]

    /// What an entry is counted as besides its body: its head's fields and keys.
    static let entryOverhead = 1024

    /// A GET or HEAD request's target, as sent.
    struct Target: Hashable, Sendable {
        let isHEAD: Bool
        let uri: String
    }

    /// One prepared answer.
    struct Hit: Sendable {
        /// The cache key of the target and the record of the response the answer was made from.
        let primaryKey: String
        let recordKey: String
        /// The response's metadata text (see ``HTTPURLCache/storedResponseInMemory(forKey:)``).
        let text: String
        let status: HTTPResponseStatus
        /// The fields sent, in the full path's order: those before `Age`, then `Age` (made
        /// for each answer), then those after it.
        let beforeAge: HTTPHeaders
        let afterAge: HTTPHeaders
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

        init(primaryKey: String, recordKey: String, text: String, status: HTTPResponseStatus, beforeAge: HTTPHeaders,
             afterAge: HTTPHeaders, body: ByteBuffer, preparedAt: Date, ageThen: TimeInterval, freshUntil: Date) {
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

        func age(at now: Date) -> TimeInterval { ageThen + now.timeIntervalSince(preparedAt) }

        /// The fields of the answer with `age` as its `Age`.
        func headers(age: String) -> HTTPHeaders {
            var headers = beforeAge
            headers.add(name: "Age", value: age)
            headers.add(contentsOf: afterAge)
            return headers
        }

        /// `headers`, which has one `Age` field, split around it.
        static func split(_ headers: HTTPHeaders) -> (before: HTTPHeaders, after: HTTPHeaders) {
            var before = HTTPHeaders(), after = HTTPHeaders(), seenAge = false
            for (name, value) in headers {
                if name.lowercased() == "age" {
                    seenAge = true
                } else if seenAge {
                    after.add(name: name, value: value)
                } else {
                    before.add(name: name, value: value)
                }
            }
            return (before, after)
        }
    }

    /// A response head in HTTP/1.1's wire form, as NIO's `HTTPResponseEncoder` writes it (status
    /// line, each field as `name: value` and CRLF, an empty line), cut around the `Age` field's
    /// value, which is the only part that changes from one answer to the next.
    struct WireHead: Sendable {
        /// The status line and the fields up to `Age: `.
        let beforeAge: ByteBuffer
        /// CRLF ending `Age`, the fields after it and the empty line.
        let afterAge: ByteBuffer

        /// Nil when a field's name is not a token or its value holds a control character (a CR
        /// or LF would split the response): NIO's header validator refuses those on the full
        /// path, and here nothing would. Nil too where NIO's encoder would change the fields'
        /// framing: a status without a body (it drops `Content-Length`), no `Content-Length` (it
        /// adds chunked coding), or a `Transfer-Encoding` beside one (it drops that).
        init?(status: HTTPResponseStatus, beforeAge: HTTPHeaders, afterAge: HTTPHeaders) {
            let fields = beforeAge.map { $0 } + afterAge.map { $0 }
            guard fields.allSatisfy({ Self.isToken($0.name) && Self.isFieldValue($0.value) }), Self.isFieldValue(status.reasonPhrase),
                  status.mayHaveResponseBody,
                  fields.contains(where: { $0.name.lowercased() == "content-length" }),
                  !fields.contains(where: { $0.name.lowercased() == "transfer-encoding" })
            else { return nil }
            var before = ByteBuffer(string: "HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\n")
            for (name, value) in beforeAge { before.writeString("\(name): \(value)\r\n") }
            before.writeString("Age: ")
            var after = ByteBuffer(string: "\r\n")
            for (name, value) in afterAge { after.writeString("\(name): \(value)\r\n") }
            after.writeString("\r\n")
            self.beforeAge = before
            self.afterAge = after
        }

        /// The head with `age` as the `Age` value, with room for `extra` more bytes after it.
        func head(age: String, reserving extra: Int = 0) -> ByteBuffer {
            var head = ByteBuffer()
            head.reserveCapacity(beforeAge.readableBytes + age.utf8.count + afterAge.readableBytes + extra)
            head.writeImmutableBuffer(beforeAge)
            head.writeString(age)
            head.writeImmutableBuffer(afterAge)
            return head
        }

        /// RFC 9110's token: what a field name is made of.
        static func isToken(_ text: String) -> Bool {
            !text.isEmpty && text.utf8.allSatisfy(HTTPHeaderFields.isTokenByte)
        }

        /// A field value (or reason phrase) with no control character but tab.
        static func isFieldValue(_ text: String) -> Bool {
            text.utf8.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }
        }
    }

    let capacity: Int
    /// The answers, each costing its body and ``entryOverhead``. Looked up without counting a
    /// use, so that the least recently used is the first prepared (or prepared again).
    private let hits: MemoryCache<Target, Hit>

    init(capacity: Int) {
        self.capacity = capacity
        hits = MemoryCache(name: "prepared answers", totalCostLimit: capacity, policy: .leastRecentlyUsed)
    }

    /// Whether a request with `headers` can be answered by a prepared answer.
    static func canAnswer(_ headers: HTTPHeaders) -> Bool {
        !fieldsRead.contains { headers.contains(name: $0) }
    }

    /// Whether an answer with a body of `size` bytes can be kept at all (worth preparing).
    func fits(bodySize size: Int) -> Bool { size + Self.entryOverhead <= capacity }

    func hit(for target: Target) -> Hit? {
        hits.valueWithoutUse(for: target)
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

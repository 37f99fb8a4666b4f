#if Server
import HTTPCache
import HTTPTypes

/// How the start of a connection's bytes reads to ``RawHitResponder``: a strict subset of
/// HTTP/1.1 (RFC 9112) that NIO's parser reads the same way, so both see a request end at the
/// same byte.
enum RequestScan: Equatable {
    /// Not a whole head yet.
    case incomplete
    /// A GET or HEAD request of HTTP/1.1 without a body (no `Content-Length` and no
    /// `Transfer-Encoding`: it ends with its head), `length` bytes long. `target` when a
    /// prepared answer may answer it: none of ``PreparedHits/fieldsRead``, exactly one `Host`
    /// holding one host (``RequestGuard/isHost(_:)``), no fragment, and not the server's own
    /// endpoints.
    case headOnly(length: Int, target: PreparedHits.Target?)
    /// Anything else: another method or version, a body, `Connection` other than `keep-alive`,
    /// `Expect`, `Upgrade`, a form this reads no further (a bare LF, a folded line, a control
    /// character, an absolute target), or a head longer than ``maximumHead``.
    case other

    static let maximumHead = 16 * 1024

    /// Fields whose presence makes the request `.other`.
    private static let refused = ["content-length", "transfer-encoding", "expect", "upgrade"].map { Array($0.utf8) }
    /// Fields whose presence keeps a prepared answer from answering.
    private static let notAnswered = PreparedHits.fieldsRead.map { Array($0.canonicalName.utf8) }
    private static let host = Array("host".utf8)
    private static let connection = Array("connection".utf8)
    private static let keepAlive = Array("keep-alive".utf8)
    private static let internalPrefix = Array("/_cache/".utf8)

    static func scan(_ bytes: UnsafeRawBufferPointer) -> RequestScan {
        let count = bytes.count
        // Past the head's limit nothing is held back: NIO's decoder has limits of its own.
        func incomplete() -> RequestScan { count < maximumHead ? .incomplete : .other }
        // The method, then the target up to the space before the version.
        let isHEAD: Bool
        var at: Int
        if starts(bytes, with: "GET ") {
            isHEAD = false
            at = 4
        } else if starts(bytes, with: "HEAD ") {
            isHEAD = true
            at = 5
        } else {
            return isPrefix(bytes, of: "GET ") || isPrefix(bytes, of: "HEAD ") ? incomplete() : .other
        }
        let targetStart = at
        while at < count, bytes[at] != 0x20 {
            guard bytes[at] > 0x20, bytes[at] < 0x7F else { return .other }
            at += 1
        }
        guard at < count else { return incomplete() }
        guard at > targetStart, bytes[targetStart] == UInt8(ascii: "/") else { return .other }
        let targetEnd = at
        at += 1
        let version = " HTTP/1.1\r\n".utf8.dropFirst()
        for byte in version {
            guard at < count else { return incomplete() }
            guard bytes[at] == byte else { return .other }
            at += 1
        }
        // The fields, to the empty line.
        var answerable = true
        var hosts = 0
        while true {
            guard at < count else { return incomplete() }
            if bytes[at] == 0x0D {
                guard at + 1 < count else { return incomplete() }
                guard bytes[at + 1] == 0x0A else { return .other }
                at += 2
                break
            }
            let nameStart = at
            while at < count, bytes[at] != UInt8(ascii: ":") {
                guard HTTPField.isTokenByte(bytes[at]) else { return .other }
                at += 1
            }
            guard at < count else { return incomplete() }
            let name = nameStart..<at
            guard !name.isEmpty else { return .other }
            at += 1
            let valueStart = at
            while at < count, bytes[at] != 0x0D {
                let byte = bytes[at]
                guard byte == 0x09 || (byte >= 0x20 && byte != 0x7F) else { return .other }
                at += 1
            }
            guard at + 1 < count else { return incomplete() }
            guard bytes[at + 1] == 0x0A else { return .other }
            let value = valueStart..<at
            at += 2
            if refused.contains(where: { equalsIgnoringCase(bytes, name, $0) }) { return .other }
            if equalsIgnoringCase(bytes, name, host) {
                hosts += 1
                if !RequestGuard.isHost(UnsafeRawBufferPointer(rebasing: bytes[value])) { hosts += 1 }
            } else if equalsIgnoringCase(bytes, name, connection) {
                guard equalsIgnoringCase(bytes, trimmed(bytes, value), keepAlive) else { return .other }
            } else if answerable, notAnswered.contains(where: { equalsIgnoringCase(bytes, name, $0) }) {
                answerable = false
            }
        }
        // A whole head above the limit too: NIO's decoder refuses one whose fields pass its own.
        guard at <= maximumHead else { return .other }
        let targetBytes = UnsafeRawBufferPointer(rebasing: bytes[targetStart..<targetEnd])
        // Without exactly one Host (a Host that is not one host counts twice), or with a
        // fragment, NIO's pipeline refuses it (`RequestGuard`).
        guard answerable, hosts == 1, !targetBytes.contains(UInt8(ascii: "#")), !targetBytes.starts(with: internalPrefix)
        else { return .headOnly(length: at, target: nil) }
        return .headOnly(length: at, target: PreparedHits.Target(isHEAD: isHEAD, uri: String(decoding: targetBytes, as: UTF8.self)))
    }

    private static func starts(_ bytes: UnsafeRawBufferPointer, with text: StaticString) -> Bool {
        let prefix = UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
        return bytes.count >= prefix.count && bytes.starts(with: prefix)
    }

    private static func isPrefix(_ bytes: UnsafeRawBufferPointer, of text: StaticString) -> Bool {
        let whole = UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
        return bytes.count < whole.count && whole.starts(with: bytes)
    }

    /// `range` without the spaces and tabs at either end.
    private static func trimmed(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> Range<Int> {
        var lower = range.lowerBound, upper = range.upperBound
        while lower < upper, bytes[lower] == 0x20 || bytes[lower] == 0x09 { lower += 1 }
        while upper > lower, bytes[upper - 1] == 0x20 || bytes[upper - 1] == 0x09 { upper -= 1 }
        return lower..<upper
    }

    /// Whether `bytes[range]` is `lowercased` (ASCII) but for case.
    private static func equalsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, _ lowercased: [UInt8]) -> Bool {
        guard range.count == lowercased.count else { return false }
        var at = range.lowerBound
        for expected in lowercased {
            var byte = bytes[at]
            if byte >= UInt8(ascii: "A"), byte <= UInt8(ascii: "Z") { byte |= 0x20 }
            guard byte == expected else { return false }
            at += 1
        }
        return true
    }
}
#endif

import HTTPCache
import NIOCore

/// Answers, straight from a connection's bytes, the requests a prepared answer answers
/// (``PreparedHits``): a GET or HEAD of HTTP/1.1 with no body and none of
/// ``PreparedHits/fieldsRead``, as ``RequestScan`` reads it, answered with the answer's wire
/// form (``PreparedHits/WireHead``) and body. Such a request never reaches NIO's HTTP decoder,
/// its pipelining handler, the response encoder or the header validator, which take most of a
/// small hit's time in user space.
///
/// It sits first in the pipeline, and every other request's bytes go on to NIO's decoder as
/// they came, in order. While a request handed on is not yet answered (its `.end` not yet
/// written into the pipeline: ``HandedOn``), the requests after it are handed on too, so the
/// answers leave in the order of the requests. Bytes it cannot delimit (a body, a form it does
/// not read) go on with everything after them on the connection. A head not yet whole is held
/// until it is, up to ``RequestScan/maximumHead`` bytes.
final class RawHitResponder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = IOData

    /// An answer in its wire form: its head (with a small body appended) and the rest of its body.
    struct Answer {
        let head: ByteBuffer
        let body: ByteBuffer?
        let outcome: Outcome
    }

    /// Bodies up to this size go out in the same buffer as their head.
    static let bodyInHeadLimit = 4096

    private let handedOn: HandedOn
    private let activity: ConnectionActivity
    private let answer: (PreparedHits.Target) -> Answer?
    private let answered: (PreparedHits.Target, Outcome, ContinuousClock.Instant) -> Void
    /// The start of a head still to come whole.
    private var held: ByteBuffer?
    /// Set once bytes went on that ``RequestScan`` cannot delimit: from then on all do.
    private var handingOnEverything = false

    /// `answer` gives the answer for a target or declines (nil), `answered` is told of each
    /// answer written (the access log); `activity` counts the answers not yet on the socket.
    init(handedOn: HandedOn, activity: ConnectionActivity, answer: @escaping (PreparedHits.Target) -> Answer?,
         answered: @escaping (PreparedHits.Target, Outcome, ContinuousClock.Instant) -> Void) {
        self.handedOn = handedOn
        self.activity = activity
        self.answer = answer
        self.answered = answered
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !handingOnEverything else {
            context.fireChannelRead(data)
            return
        }
        var bytes = unwrapInboundIn(data)
        if var start = held {
            held = nil
            start.writeBuffer(&bytes)
            bytes = start
        }
        var answers = AnswerGroup(activity: activity)
        reading: while bytes.readableBytes > 0 {
            switch bytes.withUnsafeReadableBytes({ RequestScan.scan($0) }) {
            case .incomplete:
                held = bytes
                break reading
            case .other:
                answers.write(context)
                handingOnEverything = true
                context.fireChannelRead(wrapInboundOut(bytes))
                break reading
            case .headOnly(let length, let target):
                if let target, handedOn.isIdle, context.channel.isWritable {
                    let started = ContinuousClock.now
                    // Counted before `answer` looks (and so before it sees whether the server is
                    // draining), as ``EventLoopHitResponder`` counts its answers.
                    answers.begin()
                    if let found = answer(target) {
                        answers.add(found)
                        bytes.moveReaderIndex(forwardBy: length)
                        answered(target, found.outcome, started)
                        continue reading
                    }
                }
                // The answers before it go first: NIO's pipeline may answer this one at once.
                answers.write(context)
                handedOn.requests += 1
                context.fireChannelRead(wrapInboundOut(bytes.readSlice(length: length)!))
            }
        }
        if answers.write(context) { context.flush() }
    }

    func channelInactive(context: ChannelHandlerContext) {
        // What NIO's decoder makes of a head cut short is its to say.
        if let held {
            self.held = nil
            context.fireChannelRead(wrapInboundOut(held))
        }
        context.fireChannelInactive()
    }

    /// Answers made and not yet written: written together, the last with a promise that counts
    /// them out of the connection's activity once written (or failed).
    private struct AnswerGroup {
        let activity: ConnectionActivity
        var parts: [IOData] = []
        var begun = false
        var wroteAny = false

        mutating func begin() {
            guard !begun else { return }
            activity.begin()
            begun = true
        }

        mutating func add(_ answer: Answer) {
            parts.append(.byteBuffer(answer.head))
            if let body = answer.body { parts.append(.byteBuffer(body)) }
        }

        /// Writes what was added since the last call; true when this group wrote anything at all.
        @discardableResult
        mutating func write(_ context: ChannelHandlerContext) -> Bool {
            defer {
                parts.removeAll(keepingCapacity: true)
                begun = false
            }
            guard begun else { return wroteAny }
            guard let last = parts.last else {
                activity.end()
                return wroteAny
            }
            for part in parts.dropLast() { context.write(NIOAny(part), promise: nil) }
            let written = context.eventLoop.makePromise(of: Void.self)
            let activity = self.activity
            written.futureResult.whenComplete { _ in activity.end() }
            context.write(NIOAny(last), promise: written)
            wroteAny = true
            return true
        }
    }
}

/// The requests of a connection that ``RawHitResponder`` handed on to NIO's pipeline, and the
/// `.end`s of answers written into the pipeline since (counted by ``ResponseWrites``). Only
/// on the connection's event loop.
final class HandedOn {
    var requests = 0
    var ends = 0

    /// Every request handed on has its answer's end written: an answer written now follows it.
    var isIdle: Bool { requests == ends }
}

/// How the start of a connection's bytes reads to ``RawHitResponder``: a strict subset of
/// HTTP/1.1 (RFC 9112) that NIO's parser reads the same way, so both see a request end at the
/// same byte.
enum RequestScan: Equatable {
    /// Not a whole head yet.
    case incomplete
    /// A GET or HEAD request of HTTP/1.1 without a body (no `Content-Length` and no
    /// `Transfer-Encoding`: it ends with its head), `length` bytes long. `target` when a
    /// prepared answer may answer it: none of ``PreparedHits/fieldsRead`` and not the server's
    /// own endpoints.
    case headOnly(length: Int, target: PreparedHits.Target?)
    /// Anything else: another method or version, a body, `Connection` other than `keep-alive`,
    /// `Expect`, `Upgrade`, a form this reads no further (a bare LF, a folded line, a control
    /// character, an absolute target), or a head longer than ``maximumHead``.
    case other

    static let maximumHead = 16 * 1024

    /// Fields whose presence makes the request `.other`.
    private static let refused = ["content-length", "transfer-encoding", "expect", "upgrade"].map { Array($0.utf8) }
    /// Fields whose presence keeps a prepared answer from answering.
    private static let notAnswered = PreparedHits.fieldsRead.map { Array($0.lowercased().utf8) }
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
                guard HTTPHeaderFields.isTokenByte(bytes[at]) else { return .other }
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
            if equalsIgnoringCase(bytes, name, connection) {
                guard equalsIgnoringCase(bytes, trimmed(bytes, value), keepAlive) else { return .other }
            } else if answerable, notAnswered.contains(where: { equalsIgnoringCase(bytes, name, $0) }) {
                answerable = false
            }
        }
        let targetBytes = UnsafeRawBufferPointer(rebasing: bytes[targetStart..<targetEnd])
        guard answerable, !targetBytes.starts(with: internalPrefix) else { return .headOnly(length: at, target: nil) }
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

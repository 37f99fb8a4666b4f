#if Server
// The differential check of `RequestScan` against NIO's HTTP/1.1 request decoder: one function,
// run by the `request-scan` fuzz target on every input and by
// `RequestScanCorpusTests` (Tests/CacheServerTests) on every file of its seed corpus. The test
// target compiles this very file through a symlink, so that the two cannot drift apart.
import NIOCore
import NIOEmbedded
import NIOHTTP1
@testable import CacheServer

/// How `RequestScan` and NIO's request decoder read the same connection bytes differently, or
/// nil when they agree.
///
/// `RawHitResponder` answers a request itself when `RequestScan` reads it as `.headOnly`, and
/// hands every other on to NIO's pipeline, which parses it with `HTTPRequestDecoder`. Two
/// parsers of one stream must agree on where each request ends: where they do not, the bytes
/// one takes for the end of a request the other takes for the start of the next (request
/// smuggling), and the fast path answers a request the full path would refuse or read as
/// another. So, with the requests the scan claims read one after another, as
/// `RawHitResponder` reads them (each `.headOnly` from where the one before ended):
///
/// 1. NIO's decoder, set up as `configureHTTPServerPipeline()` sets it up for the server and fed
///    each claimed request's bytes as its own buffer (as `RawHitResponder` hands them on), gives
///    for each exactly one head and its end, no body and no error: the request ends, for NIO,
///    within its bytes, and it has no body.
/// 2. The head NIO gives has the method, target, version (HTTP/1.1) and field lines (names as
///    sent, values without the spaces and tabs around them, in order) that the bytes have when
///    read by the grammar the scan accepts (`method SP target SP HTTP/1.1 CRLF`, then
///    `name ":" value CRLF` lines, then CRLF), and keeps the connection alive (the scan reads
///    on after it).
/// 3. The scan gives a target (a prepared answer may answer it) exactly when the full path would
///    look for a prepared answer with NIO's head (`ProxyHandler.answerOnEventLoop`: a
///    connection kept alive, not the server's own endpoints, `PreparedHits.canAnswer`).
/// 4. When the claimed requests are the whole input, NIO is between requests after the last:
///    its end of input finds no head begun (so no byte of a claimed request was left for NIO to
///    read as the start of the next). Checked only there, because NIO cannot be asked mid-stream;
///    any claimed request can be the last of some input, and the fuzzer makes those.
/// 5. Bytes the scan holds (`.incomplete`, after the claimed requests) hold no whole head for
///    NIO: otherwise a client that sent a whole request would wait for an answer until it sends
///    more or closes. NIO may refuse held bytes already: it refuses some forms as soon as it
///    sees them (a target that does not start with `/`, found by this target) where
///    the scan decides at the end of the target or the line; the bytes then go on to NIO once
///    the scan decides, or at 16 KiB, or when the client closes, and get NIO's answer then.
///
/// Nothing is required of the bytes from the first request the scan calls `.other` on: they go
/// to NIO's pipeline as they came, so NIO's reading is the only one.
func requestScanDisagreement(_ input: [UInt8]) -> String? {
    let channel = EmbeddedChannel()
    let decoded = DecodedParts()
    do {
        try channel.pipeline.syncOperations.configureHTTPServerPipeline()
        let decoder = try channel.pipeline.syncOperations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
        try channel.pipeline.syncOperations.addHandler(decoded, position: .after(decoder))
    } catch {
        return "the decoder could not be set up: \(error)"
    }
    defer { _ = try? channel.finish(acceptAlreadyClosed: true) }

    func describe(_ error: any Error) -> String { "refused it: \(error)" }

    /// Writes `bytes` into the pipeline; what went wrong, if anything.
    func feed(_ bytes: ArraySlice<UInt8>) -> String? {
        do {
            try channel.writeInbound(channel.allocator.buffer(bytes: bytes))
        } catch {
            return describe(error)
        }
        return decoded.errors.first.map(describe)
    }

    var start = 0
    var scan = RequestScan.incomplete
    while start < input.count {
        scan = input[start...].withUnsafeBytes { RequestScan.scan($0) }
        guard case .headOnly(let length, let target) = scan else { break }
        guard length > 0, length <= input.count - start else {
            return "request at \(start): the scan claims \(length) bytes of the \(input.count - start) left"
        }
        let request = input[start..<start + length]
        let at = { [start] in "request at \(start) (\(length) bytes, \(shown(request)))" }
        start += length

        // 1. One head and its end, for exactly these bytes.
        if let problem = feed(request) { return "\(at()): NIO's decoder \(problem)" }
        guard decoded.parts.count == 2, case .head(let head) = decoded.parts[0], case .end(nil) = decoded.parts[1] else {
            return "\(at()): NIO's decoder gave \(decoded.parts) where the scan read one head without a body"
        }
        decoded.parts.removeAll()

        // 2. The same head.
        guard let plain = PlainHead(request) else {
            return "\(at()): the scan claims bytes that do not read as a plain head"
        }
        let nio = PlainHead(head)
        guard plain == nio else { return "\(at()): the bytes read as \(plain), NIO's decoder read \(nio)" }
        guard head.isKeepAlive else { return "\(at()): NIO's decoder reads a request that closes the connection" }

        // 3. The same decision on whether a prepared answer may answer it (never one the full
        //    path refuses: `RequestGuard`).
        let fullPaths = RequestGuard.refusal(of: head) == nil && !head.uri.hasPrefix("/_cache/") && PreparedHits.canAnswer(head.headers)
            ? PreparedHits.Target(isHEAD: head.method == .HEAD, uri: head.uri) : nil
        guard target == fullPaths else {
            return "\(at()): the scan's target is \(String(describing: target)), the full path's \(String(describing: fullPaths))"
        }
    }

    if start == input.count {
        // 4. Between requests at the end of what the scan claimed.
        do {
            _ = try channel.finish()
        } catch {
            return "at the end of the claimed requests the channel did not close: \(error)"
        }
        if let error = decoded.errors.first { return "at the end of the claimed requests NIO's decoder \(describe(error))" }
        guard decoded.parts.isEmpty else { return "at the end of the claimed requests NIO's decoder gave \(decoded.parts)" }
    } else if scan == .incomplete {
        // 5. Nothing whole in what the scan holds (refused or not).
        let held = input[start...]
        _ = feed(held)
        guard decoded.parts.isEmpty else {
            return "\(held.count) bytes held at \(start) (\(shown(held))): NIO's decoder gave \(decoded.parts)"
        }
    }
    return nil
}

/// Bytes as a message shows them: quoted, escaped, the first 200 at most.
private func shown(_ bytes: ArraySlice<UInt8>) -> String {
    let text = String(decoding: bytes.prefix(200), as: UTF8.self).debugDescription
    return bytes.count > 200 ? text + "…" : text
}

/// Collects what NIO's decoder makes of the bytes, and what it refuses, without passing either
/// on (the handlers after it answer and close, which is not what is compared).
private final class DecodedParts: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart

    var parts: [HTTPServerRequestPart] = []
    var errors: [any Error] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        parts.append(unwrapInboundIn(data))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        errors.append(error)
    }
}

/// A request head as text: what is compared between the two readings.
private struct PlainHead: Equatable, CustomStringConvertible {
    struct Field: Equatable {
        let name: String
        let value: String
    }

    let method: String
    let target: String
    let version: String
    let fields: [Field]

    var description: String {
        "\(method) \(target.debugDescription) \(version) \(fields.map { "\($0.name.debugDescription): \($0.value.debugDescription)" })"
    }

    /// NIO's head, values without the spaces and tabs around them (RFC 9110 §5.5: not part of the
    /// value).
    init(_ head: HTTPRequestHead) {
        method = head.method.rawValue
        target = head.uri
        version = "HTTP/\(head.version.major).\(head.version.minor)"
        fields = head.headers.map { Field(name: $0.name, value: Self.trimmed(Array($0.value.utf8)[...])) }
    }

    /// The bytes as `method SP target SP version CRLF *(name ":" value CRLF) CRLF`; nil when they
    /// are not that, with nothing after the empty line.
    init?(_ bytes: ArraySlice<UInt8>) {
        var lines: [ArraySlice<UInt8>] = []
        var lineStart = bytes.startIndex
        var at = bytes.startIndex
        while at < bytes.endIndex {
            if bytes[at] == 0x0D, at + 1 < bytes.endIndex, bytes[at + 1] == 0x0A {
                lines.append(bytes[lineStart..<at])
                at += 2
                lineStart = at
            } else {
                at += 1
            }
        }
        // The last line is the empty one, and it ends the bytes.
        guard lineStart == bytes.endIndex, lines.count >= 2, lines.last!.isEmpty else { return nil }
        let requestLine = lines[0].split(separator: 0x20, omittingEmptySubsequences: false)
        guard requestLine.count == 3 else { return nil }
        method = String(decoding: requestLine[0], as: UTF8.self)
        target = String(decoding: requestLine[1], as: UTF8.self)
        version = String(decoding: requestLine[2], as: UTF8.self)
        var fields: [Field] = []
        for line in lines.dropFirst().dropLast() {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return nil }
            fields.append(Field(name: String(decoding: line[..<colon], as: UTF8.self),
                                value: Self.trimmed(line[(colon + 1)...])))
        }
        self.fields = fields
    }

    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> String {
        var value = bytes
        while let first = value.first, first == 0x20 || first == 0x09 { value.removeFirst() }
        while let last = value.last, last == 0x20 || last == 0x09 { value.removeLast() }
        return String(decoding: value, as: UTF8.self)
    }
}
#endif

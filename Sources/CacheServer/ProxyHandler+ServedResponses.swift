import DiskCache
import Foundation
import HTTPCache
import NIOCore
import NIOHTTP1

// A stored response made into what is sent: its fields, a 304, a range, the parts written
// together; shared by the task, the event loop and prepared hits.
extension ProxyHandler {
    /// The fields a stored response is sent with: the stored ones a client may see, its `Age`,
    /// this node in `Via`, and how it was answered in `X-Cache`.
    func servedHeaders(_ response: StoredResponse, status: String, at now: Date = Date()) -> HTTPHeaders {
        var headers = Fields.clientView(Fields.headers(response.headers))
        headers.replaceOrAdd(name: "Age", value: CachePolicyEngine.ageFieldValue(engine.freshness(of: response, at: now).currentAge))
        headers.add(name: "Via", value: via)
        headers.replaceOrAdd(name: "X-Cache", value: status)
        return headers
    }

    /// The 304 that answers `exchange` from `response` (sent with `headers`) when the client's
    /// conditions hold for it.
    func notModified(_ response: StoredResponse, _ exchange: Exchange, _ headers: HTTPHeaders) -> [HTTPServerResponsePart]? {
        guard Fields.notModified(exchange.head.headers, stored: response) else { return nil }
        let head = HTTPResponseHead(version: .http1_1, status: .notModified, headers: Fields.notModifiedHeaders(headers))
        return [.head(head), .end(nil)]
    }

    /// What of a stored body of `size` bytes answers `exchange` (a range only of a GET of a
    /// 200) and the status that goes with it, its fields set in `headers`.
    func servedRange(of response: StoredResponse, size: Int64, for exchange: Exchange,
                       headers: inout HTTPHeaders) -> (ByteRange, HTTPResponseStatus) {
        let range = exchange.head.method == .GET && response.status == 200
            ? ByteRange(request: exchange.head.headers, response: response.headers, size: size) : .whole
        return (range, range.apply(to: &headers, status: HTTPResponseStatus(statusCode: response.status), size: size))
    }

    /// A stored response whose body is in memory, as the parts that answer `exchange` (a 304
    /// when the client's conditions hold for it, a 206 or 416 for a range, no body for HEAD),
    /// written together, and what they answer.
    func inMemoryResponse(_ variant: HTTPURLCache.StoredVariant, _ exchange: Exchange,
                          status: String) -> ReadyResponse {
        let response = variant.entry.response
        var headers = servedHeaders(response, status: status)
        if let parts = notModified(response, exchange, headers) { return (parts, Outcome(status: 304, cacheStatus: status)) }
        let body = variant.entry.body
        let size = Int64(body.count)
        let (range, code) = servedRange(of: response, size: size, for: exchange, headers: &headers)
        return Self.wholeResponse(code, headers, isHEAD: exchange.isHEAD, status: status, range: range, size: size) { bounds in
            let start = body.startIndex + Int(bounds.lowerBound)
            return .byteBuffer(ByteBuffer(bytes: body[start..<start + bounds.count]))
        }
    }

    /// A response written in one go: its head, the part of the body `range` selects (`body`
    /// makes it from its bounds; nothing for HEAD, a 416 or an empty range), and its end.
    static func wholeResponse(_ code: HTTPResponseStatus, _ headers: HTTPHeaders, isHEAD: Bool, status: String,
                              range: ByteRange, size: Int64, body: (Range<Int64>) -> IOData) -> ReadyResponse {
        var parts: [HTTPServerResponsePart] = [.head(HTTPResponseHead(version: .http1_1, status: code, headers: headers))]
        var sent: Int64 = 0
        if !isHEAD, let bounds = range.bounds(size: size), !bounds.isEmpty {
            parts.append(.body(body(bounds)))
            sent = Int64(bounds.count)
        }
        parts.append(.end(nil))
        return (parts, Outcome(status: code.code, bytes: sent, cacheStatus: status))
    }

    /// A stored response whose body was checked whole (``checkedBody(of:)``), as the parts that
    /// answer `exchange` (sent with `headers`): a 206 or 416 for a range, no body for HEAD; a
    /// body file goes as a `FileRegion` (its descriptor taken by `sentFiles`, closed once
    /// written, or here when none of it is sent).
    func checkedResponse(_ checked: DiskCache.CheckedBody, _ response: StoredResponse, _ headers: HTTPHeaders,
                                 _ exchange: Exchange, status: String,
                                 sentFiles: SentFiles) -> ReadyResponse {
        var headers = headers
        let size = checked.size
        let (range, code) = servedRange(of: response, size: size, for: exchange, headers: &headers)
        // The body's part made from `part`; `release` lets go of what the body holds when no
        // part is made (HEAD, a range not satisfied), since nothing will send it then.
        func answer(releasing release: () -> Void, _ part: (Range<Int64>) -> IOData) -> ReadyResponse {
            var made = false
            let answer = Self.wholeResponse(code, headers, isHEAD: exchange.isHEAD, status: status, range: range, size: size) { bounds in
                made = true
                return part(bounds)
            }
            if !made { release() }
            return answer
        }
        switch checked.source {
        case .bytes(let bytes):
            return answer(releasing: {}) { bounds in
                let start = bytes.startIndex + Int(bounds.lowerBound)
                return .byteBuffer(ByteBuffer(bytes: bytes[start..<start + bounds.count]))
            }
        case .copy(let copy):
            // The buffer owns the copy from here, freed when NIO is done with it.
            return answer(releasing: { checked.discard() }) { bounds in
                .byteBuffer(BodyCopies.buffer(copy, size: Int(size), Int(bounds.lowerBound)..<Int(bounds.upperBound)))
            }
        case .file(let descriptor):
            let file = sentFiles.adopt(descriptor)
            return answer(releasing: { sentFiles.close(file) }) { bounds in
                .fileRegion(FileRegion(fileHandle: file, readerIndex: Int(bounds.lowerBound), endIndex: Int(bounds.upperBound)))
            }
        }
    }

    /// Which checked bodies are copied as they are hashed, to be written from memory
    /// (``ServerConfiguration/copyLimit``); nil: none.
    var copying: DiskCache.BodyCopying? {
        configuration.copyLimit > 0 ? DiskCache.BodyCopying(limit: Int64(configuration.copyLimit), budget: configuration.copyBudget) : nil
    }
}

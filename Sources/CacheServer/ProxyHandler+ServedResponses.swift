#if Server
import DiskCache
import Foundation
import HTTPCache
import NIOCore
import NIOHTTP1
import HTTPTypes

// A stored response made into what is sent: its fields, a 304, a range, the parts written
// together; shared by the task, the event loop and prepared hits.
extension ProxyHandler {
    /// The fields a stored response is sent with: the stored ones a client may see, its `Age`,
    /// this node in `Via`, and how it was answered in `X-Cache`.
    func servedFields(_ response: StoredResponse, status: String, at now: Date = Date()) -> HTTPFields {
        var fields = Fields.clientView(response.headers)
        fields.replaceOrAppend(.age, CachePolicyEngine.ageFieldValue(engine.freshness(of: response, at: now).currentAge))
        fields.append(HTTPField(name: .via, value: via))
        fields.replaceOrAppend(Fields.xCache, status)
        return fields
    }

    /// The 304 that answers `exchange` from `response` (sent with `fields`) when the client's
    /// conditions hold for it.
    func notModified(_ response: StoredResponse, _ exchange: Exchange, _ fields: HTTPFields) -> [HTTPServerResponsePart]? {
        guard CachePolicyEngine.answersNotModified(exchange.fields, stored: response) else { return nil }
        return [.head(Fields.responseHead(.notModified, CachePolicyEngine.notModifiedFields(fields))), .end(nil)]
    }

    /// What of a stored body of `size` bytes answers `exchange` (a range only of a GET of a
    /// 200) and the status that goes with it, its fields set in `fields`.
    func servedRange(of response: StoredResponse, size: Int64, for exchange: Exchange,
                     fields: inout HTTPFields) -> (ByteRange, HTTPResponse.Status) {
        let range = exchange.method == .get && response.status == 200
            ? ByteRange(request: exchange.fields, response: response.headers, size: size) : .whole
        return (range, range.apply(to: &fields, status: HTTPResponse.Status(code: response.status), size: size))
    }

    /// A stored response whose body is in memory, as the parts that answer `exchange` (a 304
    /// when the client's conditions hold for it, a 206 or 416 for a range, no body for HEAD),
    /// written together, and what they answer.
    func inMemoryResponse(_ variant: HTTPResponseStore.StoredVariant, _ exchange: Exchange,
                          status: String) -> ReadyResponse {
        let response = variant.entry.response
        var fields = servedFields(response, status: status)
        if let parts = notModified(response, exchange, fields) { return (parts, Outcome(status: 304, cacheStatus: status)) }
        let body = variant.entry.body
        let size = Int64(body.count)
        let (range, code) = servedRange(of: response, size: size, for: exchange, fields: &fields)
        let part = Self.sentBounds(range, size: size, isHEAD: exchange.isHEAD).map { bounds -> IOData in
            let start = body.startIndex + Int(bounds.lowerBound)
            return .byteBuffer(ByteBuffer(bytes: body[start..<start + bounds.count]))
        }
        return Self.wholeResponse(code, fields, status: status, body: part)
    }

    /// A response written in one go: its head, the part of the body it sends (nil for HEAD, a
    /// 416 or an empty range: ``sentBounds(_:size:isHEAD:)``), and its end.
    static func wholeResponse(_ code: HTTPResponse.Status, _ fields: HTTPFields, status: String, body: IOData?) -> ReadyResponse {
        var parts: [HTTPServerResponsePart] = [.head(Fields.responseHead(code, fields))]
        if let body { parts.append(.body(body)) }
        parts.append(.end(nil))
        return (parts, Outcome(status: UInt(code.code), bytes: Int64(body?.readableBytes ?? 0), cacheStatus: status))
    }

    /// The bytes of a body of `size` that a response sends for `range`: none (nil) for HEAD,
    /// a range not satisfied or an empty one.
    static func sentBounds(_ range: ByteRange, size: Int64, isHEAD: Bool) -> Range<Int64>? {
        guard !isHEAD, let bounds = range.bounds(size: size), !bounds.isEmpty else { return nil }
        return bounds
    }

    /// A stored response whose body was checked whole, as the parts that answer `exchange`
    /// (sent with `fields`): a 206 or 416 for a range, no body for HEAD; a body file goes as a
    /// `FileRegion` (its descriptor taken by `sentFiles`, closed once written). When none of the
    /// body is sent, the file or copy is let go here, with `checked`.
    func checkedResponse(_ checked: consuming DiskCache.CheckedBody, _ response: StoredResponse, _ fields: HTTPFields,
                         _ exchange: Exchange, status: String, sentFiles: SentFiles) -> ReadyResponse {
        var fields = fields
        let size = checked.size
        let (range, code) = servedRange(of: response, size: size, for: exchange, fields: &fields)
        // The bytes sent, if any: none for HEAD or a range not satisfied.
        let sent = Self.sentBounds(range, size: size, isHEAD: exchange.isHEAD)
        let part: IOData?
        switch checked.takeSource() {
        case .bytes(let bytes):
            part = sent.map { bounds in
                let start = bytes.startIndex + Int(bounds.lowerBound)
                return .byteBuffer(ByteBuffer(bytes: bytes[start..<start + bounds.count]))
            }
        case .copy(let copy):
            // The buffer owns the copy from here, freed when NIO is done with it.
            if let bounds = sent {
                part = .byteBuffer(BodyCopies.buffer(copy, size: Int(size), Int(bounds.lowerBound)..<Int(bounds.upperBound)))
            } else {
                part = nil
            }
        case .file(let file):
            if let bounds = sent {
                let handle = sentFiles.adopt(file.release())
                part = .fileRegion(FileRegion(fileHandle: handle, readerIndex: Int(bounds.lowerBound), endIndex: Int(bounds.upperBound)))
            } else {
                part = nil
            }
        }
        return Self.wholeResponse(code, fields, status: status, body: part)
    }

    /// A stored response whose body is on disk, answered whole with `fields` (its
    /// ``servedFields(_:status:at:)``): a 304 without reading it, or the body checked whole
    /// (``HTTPResponseStore/checkedBody(of:sizeLimit:copying:pageCacheOnly:)``) and made into parts
    /// by ``checkedResponse(_:_:_:_:status:sentFiles:)``. Nil when the body is gone or damaged
    /// or above `sizeLimit` bytes, and with `pageCacheOnly`, when a read would have waited for
    /// the disk. The one answer of the task (on an I/O thread: it blocks) and of the event loop
    /// (with `pageCacheOnly`).
    func checkedAnswer(_ variant: HTTPResponseStore.StoredVariant, _ exchange: Exchange, fields: HTTPFields, status: String,
                       sizeLimit: Int64, pageCacheOnly: DiskCache.PageCacheOnly? = nil, sentFiles: SentFiles) throws -> ReadyResponse? {
        let response = variant.entry.response
        if let parts = notModified(response, exchange, fields) { return (parts, Outcome(status: 304, cacheStatus: status)) }
        guard let checked = try cache.checkedBody(of: variant, sizeLimit: sizeLimit, copying: copying, pageCacheOnly: pageCacheOnly)
        else { return nil }
        return checkedResponse(checked, response, fields, exchange, status: status, sentFiles: sentFiles)
    }

    /// Which checked bodies are copied as they are hashed, to be written from memory
    /// (``ServerConfiguration/copyLimit``); nil: none.
    var copying: DiskCache.BodyCopying? {
        configuration.copyLimit > 0 ? DiskCache.BodyCopying(limit: Int64(configuration.copyLimit), budget: configuration.copyBudget) : nil
    }
}
#endif

#if Server
import Foundation
import HTTPCache
import NIOCore
import NIOHTTP1
import HTTPTypes

// The server's own answers: short text ones (its errors among them), and the health and metrics
// endpoints.
extension ProxyHandler {
    /// A short text answer of the server's own; `closing`: with `Connection: close`.
    func respond(_ status: HTTPResponse.Status, _ text: String, writer: ClientWriter, isHEAD: Bool,
                 contentType: String = "text/plain; charset=utf-8", cacheStatus: String = "BYPASS", closing: Bool = false) async throws -> Outcome {
        let body = ByteBuffer(string: text.hasSuffix("\n") ? text : text + "\n")
        var fields: HTTPFields = [.contentType: contentType, .contentLength: String(body.readableBytes), .cacheControl: "no-store"]
        if closing { fields.append(HTTPField(name: .connection, value: "close")) }
        let head = HTTPServerResponsePart.head(Fields.responseHead(status, fields))
        try await writer.write(contentsOf: isHEAD ? [head, .end(nil)] : [head, .body(.byteBuffer(body)), .end(nil)])
        return Outcome(status: UInt(status.code), bytes: Int64(body.readableBytes), cacheStatus: cacheStatus)
    }

    /// `/_cache/health` (200 while the store is open and its directory in place, else 503 with the reason) and `/_cache/metrics` (Prometheus text).
    /// On the client port, with ``ServerConfiguration/metricsNeedToken``, metrics need the purge token.
    func answerInternal(_ request: HTTPRequest, writer: ClientWriter, admin: Bool) async throws -> Outcome {
        let target = request.path ?? ""
        let path = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? target
        let isHEAD = request.method == .head
        guard request.method == .get || isHEAD else {
            return try await respond(.methodNotAllowed, "Only GET and HEAD", writer: writer, isHEAD: isHEAD, cacheStatus: "INTERNAL")
        }
        let records = cache.storeStatistics()
        switch path {
        case "/_cache/health":
            do {
                try cache.checkStore()
            } catch {
                let encoder = JSONEncoder()
                encoder.outputFormatting = .sortedKeys
                let body = (try? encoder.encode(["status": "failing", "reason": "\(error)"])).map { String(decoding: $0, as: UTF8.self) }
                return try await respond(.serviceUnavailable, body ?? "{\"status\":\"failing\"}",
                                         writer: writer, isHEAD: isHEAD, contentType: "application/json", cacheStatus: "INTERNAL")
            }
            return try await respond(.ok, "{\"status\":\"ok\",\"entries\":\(records.entries),\"bytes\":\(records.bytes)}",
                                     writer: writer, isHEAD: isHEAD, contentType: "application/json", cacheStatus: "INTERNAL")
        case "/_cache/metrics":
            if configuration.metricsNeedToken, !admin, !carriesToken(request.headerFields) {
                return try await respond(.unauthorized, "Metrics need Authorization: Bearer <token>", writer: writer, isHEAD: isHEAD,
                                         cacheStatus: "INTERNAL")
            }
            let text = metrics.exposition(storeBytes: records.bytes, storeEntries: records.entries)
            return try await respond(.ok, text, writer: writer, isHEAD: isHEAD, contentType: "text/plain; version=0.0.4", cacheStatus: "INTERNAL")
        default:
            return try await respond(.notFound, "No such endpoint: \(path)", writer: writer, isHEAD: isHEAD, cacheStatus: "INTERNAL")
        }
    }
}
#endif

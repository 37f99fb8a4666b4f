import Foundation
import HTTPCache
import NIOCore
import NIOHTTP1

// The server's own answers: short text ones (its errors among them), and the health and metrics
// endpoints.
extension ProxyHandler {
    /// A short text answer of the server's own.
    func respond(_ status: HTTPResponseStatus, _ text: String, writer: ClientWriter, head request: HTTPRequestHead,
                 contentType: String = "text/plain; charset=utf-8", cacheStatus: String = "BYPASS") async throws -> Outcome {
        let body = ByteBuffer(string: text.hasSuffix("\n") ? text : text + "\n")
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        headers.add(name: "Cache-Control", value: "no-store")
        let head = HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))
        try await writer.write(contentsOf: request.method == .HEAD ? [head, .end(nil)] : [head, .body(.byteBuffer(body)), .end(nil)])
        return Outcome(status: status.code, bytes: Int64(body.readableBytes), cacheStatus: cacheStatus)
    }

    /// `/_cache/health` (200 while the store is open and its directory in place, else 503 with the reason) and `/_cache/metrics` (Prometheus text).
    /// On the client port, with ``ServerConfiguration/metricsNeedToken``, metrics need the purge token.
    func answerInternal(_ head: HTTPRequestHead, writer: ClientWriter, admin: Bool) async throws -> Outcome {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        guard head.method == .GET || head.method == .HEAD else {
            return try await respond(.methodNotAllowed, "Only GET and HEAD", writer: writer, head: head, cacheStatus: "INTERNAL")
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
                                         writer: writer, head: head, contentType: "application/json", cacheStatus: "INTERNAL")
            }
            return try await respond(.ok, "{\"status\":\"ok\",\"entries\":\(records.entries),\"bytes\":\(records.bytes)}",
                                     writer: writer, head: head, contentType: "application/json", cacheStatus: "INTERNAL")
        case "/_cache/metrics":
            if configuration.metricsNeedToken, !admin, !carriesToken(head.headers) {
                return try await respond(.unauthorized, "Metrics need Authorization: Bearer <token>", writer: writer, head: head,
                                         cacheStatus: "INTERNAL")
            }
            let text = metrics.exposition(storeBytes: records.bytes, storeEntries: records.entries)
            return try await respond(.ok, text, writer: writer, head: head, contentType: "text/plain; version=0.0.4", cacheStatus: "INTERNAL")
        default:
            return try await respond(.notFound, "No such endpoint: \(path)", writer: writer, head: head, cacheStatus: "INTERNAL")
        }
    }
}

import DiskCache
import DiskCacheLocking
import Foundation
import HTTPCache
import NIOCore
import NIOHTTP1

// The server's own answers: errors, the health and metrics endpoints, and purges.
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

    /// `PURGE <target>` with `Authorization: Bearer <token>`: removes what is stored for the
    /// target (GET and HEAD responses, every variant); `PURGE /prefix*` for every target that
    /// begins with `/prefix`; `PURGE *` removes everything.
    func purge(_ head: HTTPRequestHead, writer: ClientWriter) async throws -> Outcome {
        guard configuration.purgeToken != nil else {
            return try await respond(.forbidden, "Purging is off (no purge token is configured)", writer: writer, head: head, cacheStatus: "PURGE")
        }
        guard carriesToken(head.headers) else {
            return try await respond(.unauthorized, "A purge needs Authorization: Bearer <token>", writer: writer, head: head, cacheStatus: "PURGE")
        }
        let cache = self.cache
        if head.uri == "*" || head.uri == "/*" {
            try await BlockingIOPool.shared.run { cache.removeAllCachedResponses() }
            return try await respond(.ok, "Purged everything", writer: writer, head: head, cacheStatus: "PURGE")
        }
        if head.uri.hasSuffix("*"), let prefix = Self.target(of: String(head.uri.dropLast())) {
            let urlPrefix = configuration.origin.description + prefix
            let removed = try await BlockingIOPool.shared.run { try cache.purge(prefix: urlPrefix) }
            return try await respond(.ok, "Purged \(removed) stored responses under \(prefix)", writer: writer, head: head, cacheStatus: "PURGE")
        }
        guard let (target, url) = originURL(of: head.uri) else {
            return try await respond(.badRequest, "The purge target \(head.uri) is not a path", writer: writer, head: head, cacheStatus: "PURGE")
        }
        let removed = try await BlockingIOPool.shared.run { try cache.purge(url) }
        return try await respond(removed ? .ok : .notFound, removed ? "Purged \(target)" : "Nothing stored for \(target)",
                                 writer: writer, head: head, cacheStatus: "PURGE")
    }
}

extension ProxyHandler {
    /// Whether `headers` carry `Authorization: Bearer <purge token>`: the scheme in any case
    /// (RFC 9110 §11.1), the token compared in time that does not depend on where it differs.
    func carriesToken(_ headers: HTTPHeaders) -> Bool {
        guard let token = configuration.purgeToken, let value = headers.first(name: "Authorization") else { return false }
        let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return false }
        return Self.sameBytes(Array(parts[1].trimmingCharacters(in: .whitespaces).utf8), Array(token.utf8))
    }

    /// `a == b`, reading every byte of the longer whatever the contents.
    static func sameBytes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for index in 0..<max(a.count, b.count) {
            difference |= (index < a.count ? a[index] : 0) ^ (index < b.count ? b[index] : 0)
        }
        return difference == 0
    }
}

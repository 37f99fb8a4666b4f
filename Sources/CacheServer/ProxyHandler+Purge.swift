#if Server
import DiskCache
import Foundation
import HTTPCache
import NIOCore
import HTTPTypes

// PURGE, and the purge token it needs (as the metrics endpoint does where so configured).
extension ProxyHandler {
    /// `PURGE <target>` with `Authorization: Bearer <token>`: removes what is stored for the
    /// target (GET and HEAD responses, every variant); `PURGE /prefix*` for every target that
    /// begins with `/prefix`; `PURGE *` removes everything.
    func purge(_ request: HTTPRequest, writer: ClientWriter) async throws -> Outcome {
        let requested = request.path ?? ""
        guard configuration.purgeToken != nil else {
            return try await respond(.forbidden, "Purging is off (no purge token is configured)", writer: writer, isHEAD: false, cacheStatus: "PURGE")
        }
        guard carriesToken(request.headerFields) else {
            return try await respond(.unauthorized, "A purge needs Authorization: Bearer <token>", writer: writer, isHEAD: false, cacheStatus: "PURGE")
        }
        let cache = self.cache
        if requested == "*" || requested == "/*" {
            try await BlockingIOPool.shared.run { try? cache.removeAll() }
            return try await respond(.ok, "Purged everything", writer: writer, isHEAD: false, cacheStatus: "PURGE")
        }
        if requested.hasSuffix("*"), let prefix = Self.target(of: String(requested.dropLast())) {
            let urlPrefix = configuration.origin.description + prefix
            let removed = try await BlockingIOPool.shared.run { try cache.purge(prefix: urlPrefix) }
            return try await respond(.ok, "Purged \(removed) stored responses under \(prefix)", writer: writer, isHEAD: false, cacheStatus: "PURGE")
        }
        guard let (target, url) = originURL(of: requested) else {
            return try await respond(.badRequest, "The purge target \(requested) is not a path", writer: writer, isHEAD: false, cacheStatus: "PURGE")
        }
        let removed = try await BlockingIOPool.shared.run { try cache.purge(url) }
        return try await respond(removed ? .ok : .notFound, removed ? "Purged \(target)" : "Nothing stored for \(target)",
                                 writer: writer, isHEAD: false, cacheStatus: "PURGE")
    }

    /// Whether `headers` carry `Authorization: Bearer <purge token>`: the scheme in any case
    /// (RFC 9110 §11.1), the token compared in time that does not depend on where it differs.
    func carriesToken(_ fields: HTTPFields) -> Bool {
        guard let token = configuration.purgeToken, let value = fields[values: .authorization].first else { return false }
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
#endif

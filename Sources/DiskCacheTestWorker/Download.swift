#if AsyncHTTPClient
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCache
import HTTPCacheAsyncHTTPClient
import HTTPTestOrigin

// MARK: - A download through the caching client

/// Fetches `bytes` of `StreamingOrigin`'s pattern from `origin` (`http://host:port`) through a
/// `CachingHTTPClient` over AsyncHTTPClient, then again from its cache, each a `phase` (the
/// peak resident growth: this process measures its own memory, which the tests' process,
/// running other tests at the same time, cannot). After each: "SOURCE phase source SAME" when
/// every byte was the origin's ("DIFFERENT" otherwise).
func measureDownload(_ directory: URL, origin: String, bytes: Int) async throws {
    let cache = try HTTPURLCache(memoryCapacity: 1 << 20, diskCapacity: 2 * bytes + (64 << 20),
                                 directory: directory.appendingPathComponent("cache"))
    let client = CachingHTTPClient(cache: cache, transport: AsyncHTTPClientTransport())
    // Warmed up first (AsyncHTTPClient's event loops and connection pool), outside the phases.
    _ = try await isOriginPattern(client.download(for: URLRequest(url: URL(string: "\(origin)/bytes/1000")!)).body, size: 1000)
    let request = URLRequest(url: URL(string: "\(origin)/bytes/\(bytes)")!)
    for name in ["fetch", "cached"] {
        var line = ""
        try await phase(name, bytes: Int64(bytes)) {
            let download = try await client.download(for: request)
            let same = try await isOriginPattern(download.body, size: bytes)
            line = "SOURCE \(name) \(download.source) \(same ? "SAME" : "DIFFERENT")"
        }
        say(line)
    }
}

/// Whether `body` holds exactly `size` bytes of `StreamingOrigin`'s pattern, compared a chunk
/// at a time (no more than a chunk in memory).
func isOriginPattern(_ body: HTTPBodyStream, size: Int) async throws -> Bool {
    var offset = 0
    for try await chunk in body {
        let expected = StreamingOrigin.bytes(at: offset, count: chunk.count)
        let same = chunk.withUnsafeBytes { actual in
            expected.withUnsafeBytes { memcmp(actual.baseAddress!, $0.baseAddress!, chunk.count) == 0 }
        }
        guard chunk.isEmpty || same else { return false }
        offset += chunk.count
    }
    return offset == size
}
#endif

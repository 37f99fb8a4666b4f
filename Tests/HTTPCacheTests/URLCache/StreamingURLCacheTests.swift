import Foundation
import HTTPTypes
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import DiskCache
import Testing
@testable import HTTPCache

/// Responses with large bodies: stored from a file, read as chunks or a file, kept out of the
/// memory tier, and always paired with their own headers.
struct StreamingURLCacheTests {
    private let url = URL(string: "https://example.com/video")!

    private func response(_ fields: [String: String] = [:]) -> HTTPURLResponse {
        HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                        headerFields: ["Cache-Control": "max-age=3600"].merging(fields) { $1 })!
    }

    private func body(_ count: Int, _ seed: UInt8) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) })
    }

    @Test func aResponseStoredFromAFileReadsBackEveryWay() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = try HTTPURLCache(memoryCapacity: 1 << 20, diskCapacity: 64 << 20, directory: directory.cacheDirectory)
        let bytes = body(3 << 20, 1)
        let file = directory.url.appendingPathComponent("download.tmp")
        try bytes.write(to: file)
        let request = URLRequest(url: url)
        try await cache.storeCachedResponse(response(["Content-Type": "video/mp4"]), bodyContentsOf: file, for: request,
                                            transfer: .move)
        #expect(!FileManager.default.fileExists(atPath: file.path))
        #expect(cache.currentMemoryUsage == 0)

        let (stored, chunks) = try #require(try await cache.cachedResponseBody(for: request, chunkSize: 1 << 20))
        #expect(stored.body.isEmpty)
        #expect(stored.response.headers["content-type"] == "video/mp4")
        var received = Data()
        for try await chunk in chunks { received.append(chunk) }
        #expect(received == bytes)

        let size = try await cache.withCachedResponseFile(for: request) { stored, file -> Int64 in
            #expect(stored.response.status == 200)
            #expect((try? Data(contentsOf: file.url)) == bytes)
            return file.size
        }
        #expect(size == Int64(bytes.count))
        #expect(try await cache.async.cachedResponse(for: request)?.data == bytes)
        #expect(cache.currentMemoryUsage == 0)  // 3 MiB is over 5 % of 1 MiB: never in memory
        #expect(try await cache.cachedResponseBody(for: URLRequest(url: URL(string: "https://example.com/none")!)) == nil)
    }

    /// Two variants of one URL (by `Vary: Accept-Language`), each stored from its own file: each
    /// request gets its own variant's headers with its own body.
    @Test func eachVariantGetsItsOwnBody() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = try HTTPURLCache(diskCapacity: 64 << 20, directory: directory.cacheDirectory)
        var requests: [URLRequest] = []
        for (index, language) in ["en", "fr"].enumerated() {
            var request = URLRequest(url: url)
            request.setValue(language, forHTTPHeaderField: "Accept-Language")
            let file = directory.url.appendingPathComponent("\(language).bin")
            try body(500_000 + index, UInt8(index)).write(to: file)
            try cache.storeCachedResponse(response(["Vary": "Accept-Language", "Content-Language": language]),
                                          bodyContentsOf: file, for: request)
            requests.append(request)
        }
        for (index, request) in requests.enumerated() {
            let pair = try cache.withCachedResponseFile(for: request) { stored, file in
                (stored.response.headers["content-language"], try? Data(contentsOf: file.url))
            }
            #expect(pair?.0 == ["en", "fr"][index])
            #expect(pair?.1 == body(500_000 + index, UInt8(index)))
        }
    }

    /// What `storeCachedResponse` refuses, it refuses for a file too, and leaves the file; a
    /// missing file is a clear error and the earlier response stays.
    @Test func refusalsAndFailuresLeaveTheFileAndTheEarlierResponse() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = try HTTPURLCache(diskCapacity: 64 << 20, directory: directory.cacheDirectory)
        let request = URLRequest(url: url)
        cache.storeCachedResponse(CachedURLResponse(response: response(), data: Data("earlier".utf8)), for: request)
        let file = directory.url.appendingPathComponent("body.bin")
        try body(1000, 3).write(to: file)
        try cache.storeCachedResponse(response(), bodyContentsOf: file, for: request, storagePolicy: .notAllowed, transfer: .move)
        #expect(FileManager.default.fileExists(atPath: file.path))
        do {
            try cache.storeCachedResponse(response(), bodyContentsOf: directory.url.appendingPathComponent("missing"), for: request)
            Issue.record("a missing file was stored")
        } catch let error as DiskCacheError {
            #expect(error.code == .notFound)
        }
        #expect(cache.cachedResponse(for: request)?.data == Data("earlier".utf8))
    }
}

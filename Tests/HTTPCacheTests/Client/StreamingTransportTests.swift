import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import DiskCacheLocking
import Testing
@testable import HTTPCache

/// ``CachingHTTPClient`` over a ``StreamingHTTPTransport``: bodies larger than the client holds
/// in memory go through a file in the cache's `tmp/`, and the RFC's rules apply as they do with
/// a plain transport.
struct StreamingTransportTests {
    /// Serves every request with `headers` and `size` bytes (byte i is `i % 251`) in 64 KiB
    /// chunks; with `failingAfter`, the body throws once that many bytes have gone. Answers a
    /// request whose `If-None-Match` is the `ETag` in `headers` with a 304.
    final class FakeTransport: StreamingHTTPTransport {
        struct Failure: Error {}

        let headers: [String: String]
        let size: Int
        let failingAfter: Int?
        private let counter = PthreadMutex(0)

        init(headers: [String: String], size: Int, failingAfter: Int? = nil) {
            self.headers = headers
            self.size = size
            self.failingAfter = failingAfter
        }

        var requestCount: Int { counter.withLock { $0 } }

        func stream(_ request: URLRequest) async throws -> (HTTPURLResponse, HTTPBodyStream) {
            counter.withLock { $0 += 1 }
            let notModified = headers["ETag"] != nil && request.value(forHTTPHeaderField: "If-None-Match") == headers["ETag"]
            let response = HTTPURLResponse(url: request.url!, statusCode: notModified ? 304 : 200, httpVersion: "HTTP/1.1",
                                           headerFields: headers)!
            let size = notModified ? 0 : size
            let failingAfter = failingAfter
            return (response, HTTPBodyStream {
                var offset = 0
                return {
                    if let failingAfter, offset >= failingAfter { throw Failure() }
                    guard offset < size else { return nil }
                    let count = min(64 << 10, size - offset)
                    defer { offset += count }
                    return Data((offset..<offset + count).map { UInt8($0 % 251) })
                }
            })
        }
    }

    /// Whether `body` is `size` bytes of the fake's pattern, read one chunk at a time.
    static func isPattern(_ body: HTTPBodyStream, size: Int) async throws -> Bool {
        var offset = 0
        for try await chunk in body {
            for (index, byte) in chunk.enumerated() where byte != UInt8((offset + index) % 251) { return false }
            offset += chunk.count
        }
        return offset == size
    }

    func temporaryFiles(_ directory: TemporaryDirectory) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.cacheDirectory.appendingPathComponent("tmp").path)
    }

    @Test func aLargeBodyIsStoredFromItsFileAndServedFromTheCache() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = try HTTPURLCache(memoryCapacity: 1 << 20, diskCapacity: 64 << 20, directory: directory.cacheDirectory)
        let size = 3 << 20 + 12_345
        let transport = FakeTransport(headers: ["Cache-Control": "max-age=600"], size: size)
        let client = CachingHTTPClient(cache: cache, transport: transport)
        let request = URLRequest(url: URL(string: "https://example.com/large")!)

        let first = try await client.download(for: request, chunkSize: 100_000)
        #expect(first.source == .network)
        #expect(try await Self.isPattern(first.body, size: size))
        let second = try await client.download(for: request)
        #expect(second.source == .cache)
        #expect(try await Self.isPattern(second.body, size: size))
        let (data, _) = try await client.data(for: request)
        #expect(data.count == size)
        #expect(transport.requestCount == 1)
        #expect(try temporaryFiles(directory).isEmpty)
    }

    @Test func aConditionalRequestAnswered304ServesTheBodyHeldInAFile() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = try HTTPURLCache(memoryCapacity: 1 << 20, diskCapacity: 64 << 20, directory: directory.cacheDirectory)
        let size = 2 << 20
        let transport = FakeTransport(headers: ["Cache-Control": "max-age=0", "ETag": "\"v1\""], size: size)
        let client = CachingHTTPClient(cache: cache, transport: transport)
        let request = URLRequest(url: URL(string: "https://example.com/validated")!)

        #expect(try await Self.isPattern(client.download(for: request).body, size: size))
        let revalidated = try await client.download(for: request)
        #expect(revalidated.source == .revalidated)
        #expect(try await Self.isPattern(revalidated.body, size: size))
        #expect(transport.requestCount == 2)
        // The 304 rewrote the stored metadata only: the body is still there, whole.
        #expect(try await Self.isPattern(client.download(for: request).body, size: size))
    }

    @Test func aBodyThatFailsMidwayStoresNothingAndLeavesNoFile() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = try HTTPURLCache(memoryCapacity: 1 << 20, diskCapacity: 64 << 20, directory: directory.cacheDirectory)
        let transport = FakeTransport(headers: ["Cache-Control": "max-age=600"], size: 4 << 20, failingAfter: 3 << 20)
        let client = CachingHTTPClient(cache: cache, transport: transport)
        let request = URLRequest(url: URL(string: "https://example.com/broken")!)

        await #expect(throws: FakeTransport.Failure.self) {
            _ = try await client.download(for: request)
        }
        #expect(cache.storedResponse(for: request) == nil)
        #expect(try temporaryFiles(directory).isEmpty)
    }

    @Test func aResponseThatMustNotBeStoredStreamsThroughAFileThatIsThenRemoved() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = try HTTPURLCache(memoryCapacity: 1 << 20, diskCapacity: 64 << 20, directory: directory.cacheDirectory)
        let size = 3 << 20
        let transport = FakeTransport(headers: ["Cache-Control": "no-store"], size: size)
        let client = CachingHTTPClient(cache: cache, transport: transport)
        let request = URLRequest(url: URL(string: "https://example.com/private")!)

        var download: CachingHTTPClient.Download? = try await client.download(for: request)
        #expect(try temporaryFiles(directory).count == 1)
        #expect(try await Self.isPattern(download!.body, size: size))
        download = nil
        #expect(try temporaryFiles(directory).isEmpty)
        #expect(cache.storedResponse(for: request) == nil)
        // data(for:) with the same transport: the same bytes, in memory.
        #expect(try await client.data(for: request).0.count == size)
        #expect(transport.requestCount == 2)
    }
}

@testable import DiskCache
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import HTTPCache
import HTTPTestOrigin
import TestSupport

/// A temporary directory for one test, removed by ``remove()``.
struct TemporaryDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("HTTPCacheTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The cache directory inside it (created by the cache).
    var cacheDirectory: URL { url.appendingPathComponent("cache", isDirectory: true) }

    func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}

/// A server, a disk-backed cache and a client over them, torn down by ``finish()``.
struct ClientFixture {
    let server: OriginServer
    let directory: TemporaryDirectory
    let cache: HTTPURLCache
    let client: CachingHTTPClient

    init(
        engine: CachePolicyEngine = CachePolicyEngine(),
        keyProvider: any CacheKeyProvider = DefaultCacheKeyProvider(),
        willStore: HTTPURLCache.WillStoreHandler? = nil,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) async throws {
        server = try await OriginServer()
        directory = try TemporaryDirectory()
        cache = try HTTPURLCache(
            memoryCapacity: 1 << 20, diskCapacity: 8 << 20, directory: directory.cacheDirectory,
            engine: engine, keyProvider: keyProvider, willStore: willStore
        )
        client = CachingHTTPClient(cache: cache, clock: clock)
    }

    func request(_ path: String, method: String = "GET", policy: URLRequest.CachePolicy = .useProtocolCachePolicy,
                 headers: [String: String] = [:], body: String? = nil) -> URLRequest {
        var request = URLRequest(url: server.url(path), cachePolicy: policy)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpBody = body.map { Data($0.utf8) }
        return request
    }

    func get(_ path: String, policy: URLRequest.CachePolicy = .useProtocolCachePolicy,
             headers: [String: String] = [:]) async throws -> CachingHTTPClient.Response {
        try await client.response(for: request(path, policy: policy, headers: headers))
    }

    func finish() async {
        await client.waitForBackgroundRefreshes()
        try? await server.stop()
        directory.remove()
    }
}

extension CachingHTTPClient.Response {
    var text: String { String(decoding: data, as: UTF8.self) }
    var status: Int { response.statusCode }
    func header(_ name: String) -> String? { response.value(forHTTPHeaderField: name) }
}

extension CachingHTTPClient.Statistics {
    init(requests: Int, network: Int, hits: Int, conditionalHits: Int) {
        self.init()
        requestCount = requests
        networkCount = network
        hitCount = hits
        conditionalHitCount = conditionalHits
    }
}

/// The current time as an HTTP date.
func httpDateNow(offset: TimeInterval = 0) -> String {
    HTTPDate.string(from: Date().addingTimeInterval(offset))
}

extension ManualClock {
    /// A clock from now, so that HTTP freshness, which reads the real time, is unchanged.
    static func startingNow() -> ManualClock { ManualClock(Date()) }

    /// A disk configuration that reads this clock.
    var configuration: DiskCache.Configuration {
        var configuration = DiskCache.Configuration()
        configuration.clock = { [self] in milliseconds }
        return configuration
    }
}

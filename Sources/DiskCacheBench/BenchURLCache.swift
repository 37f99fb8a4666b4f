import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Foundation's `URLCache` (FoundationNetworking on Linux) on disk only (no memory tier), with
/// the same bodies under `https://example.com/resource/<n>`, as a 200 response with a
/// `Cache-Control: max-age` so that it is storable.
final class BenchURLCache: @unchecked Sendable {  // unchecked: URLCache is documented as thread-safe
    let cache: URLCache

    init(directory: String, capacity: Int64) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        #if canImport(FoundationNetworking)
        cache = URLCache(memoryCapacity: 0, diskCapacity: Int(capacity), diskPath: directory)
        #else
        cache = URLCache(memoryCapacity: 0, diskCapacity: Int(capacity), directory: URL(fileURLWithPath: directory))
        #endif
    }

    private func request(_ index: Int) -> URLRequest {
        URLRequest(url: URL(string: BenchRunner.key(index))!)
    }

    func put(_ index: Int, _ body: Data) -> Int {
        let request = request(index)
        let response = HTTPURLResponse(url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1",
                                       headerFields: ["Content-Length": "\(body.count)", "Cache-Control": "max-age=86400"])!
        cache.storeCachedResponse(CachedURLResponse(response: response, data: body, userInfo: nil, storagePolicy: .allowed),
                                  for: request)
        return body.count
    }

    func get(_ index: Int) -> Int {
        cache.cachedResponse(for: request(index))?.data.count ?? 0
    }
}

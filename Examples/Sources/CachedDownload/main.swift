// Large downloads through `CachingHTTPClient` with `AsyncHTTPClientTransport`: the body is
// written to a file in the cache's directory as it arrives, stored from there, and handed out
// as chunks read from disk, so that neither the download nor the cached copy is held in memory.
//
// The example starts an origin of its own (a Vapor app on a loopback port that serves a 3 MiB
// report, fresh for a minute) and saves the report twice: the second copy comes from the cache,
// without a second request to the origin. `save(_:to:with:)` and the client are the README's
// AsyncHTTPClient section.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCache
import HTTPCacheAsyncHTTPClient
import Vapor

/// Writes `url`'s body into `destination`, from the cache when RFC 9111 allows: a body of any
/// size, one chunk (1 MiB) in memory at a time. Returns where the response came from.
func save(_ url: URL, to destination: URL, with client: CachingHTTPClient) async throws -> CachingHTTPClient.Source {
    let download = try await client.download(for: URLRequest(url: url))
    guard download.response.statusCode == 200 else {
        throw URLError(.badServerResponse)
    }
    FileManager.default.createFile(atPath: destination.path, contents: nil)
    let file = try FileHandle(forWritingTo: destination)
    defer { try? file.close() }
    for try await chunk in download.body {
        try file.write(contentsOf: chunk)
    }
    return download.source
}

/// Counts the origin's answers.
actor Counter {
    private(set) var value = 0
    func increment() { value += 1 }
}

func runExample() async throws {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("CachedDownload-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let cacheDirectory = directory.appendingPathComponent("cache", isDirectory: true)

    // The origin: 3 MiB, fresh for a minute.
    let report = Data((0..<(3 << 20)).map { UInt8($0 % 251) })
    let originCalls = Counter()
    let origin = try await Application.make(.testing)
    origin.get("reports", "latest") { _ async -> Response in
        await originCalls.increment()
        return Response(status: .ok, headers: ["Cache-Control": "max-age=60"], body: .init(data: report))
    }
    do {
        try await origin.server.start(address: .hostname("127.0.0.1", port: 0))
        let port = origin.http.server.shared.localAddress?.port ?? 0
        let url = URL(string: "http://127.0.0.1:\(port)/reports/latest")!

        // One client for the app: a cache of up to 1 GiB on disk, AsyncHTTPClient's shared client.
        let client = CachingHTTPClient(
            cache: try HTTPURLCache(memoryCapacity: 4 << 20, diskCapacity: 1 << 30, directory: cacheDirectory),
            transport: AsyncHTTPClientTransport()
        )

        for name in ["first", "second"] {
            let destination = directory.appendingPathComponent("\(name).bin")
            let source = try await save(url, to: destination, with: client)
            let saved = try Data(contentsOf: destination)
            print("\(name) copy: \(saved.count) bytes from \(source) (origin calls: \(await originCalls.value))")
            guard saved == report else { throw ExampleError(message: "the \(name) copy differs from the report") }
        }
        guard await originCalls.value == 1 else {
            throw ExampleError(message: "the second copy did not come from the cache")
        }
        await origin.server.shutdown()
        try await origin.asyncShutdown()
    } catch {
        await origin.server.shutdown()
        try? await origin.asyncShutdown()
        throw error
    }
}

struct ExampleError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

try await runExample()

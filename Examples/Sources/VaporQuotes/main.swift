// A Vapor 4 app that caches a slow upstream's answers in a disk cache, configured with
// `app.caches.use(.disk(directory:))`: `req.cache` and `app.cache` keep their values across
// restarts of the app, with no Redis server and no database.
//
// The example runs the app twice on one cache directory, each time on a loopback port, and
// asks it for a quote with Vapor's own HTTP client: the second app answers from the cache the
// first one filled, without calling the upstream. `configure` is the README's Vapor section.
import DiskCache
import DiskCacheVapor
import Foundation
import Vapor

struct Quote: Content {
    var symbol: String
    var cents: Int
}

// `upstream` is the slow service whose answers are cached.
func configure(_ app: Application, cacheDirectory: URL, upstream: Upstream) throws {
    // Opened now (a directory that cannot be a cache fails here), closed at shutdown.
    try app.caches.use(.disk(directory: cacheDirectory))

    app.get("quotes", ":symbol") { req async throws -> Quote in
        let symbol = try req.parameters.require("symbol")
        if let quote = try await req.cache.get("quote:\(symbol)", as: Quote.self) {
            return quote
        }
        let quote = try await upstream.quote(for: symbol)
        try await req.cache.set("quote:\(symbol)", to: quote, expiresIn: .minutes(5))
        return quote
    }
}

/// Stands in for a slow upstream service; counts its calls.
actor Upstream {
    private(set) var calls = 0
    func quote(for symbol: String) async throws -> Quote {
        calls += 1
        try await Task.sleep(for: .milliseconds(50))
        return Quote(symbol: symbol, cents: Int.random(in: 1_000...99_999))
    }
}

/// Runs an app on `cacheDirectory` on a loopback port, and asks it for one quote.
func runApp(cacheDirectory: URL, upstream: Upstream) async throws -> Quote {
    let app = try await Application.make(.testing)
    do {
        try configure(app, cacheDirectory: cacheDirectory, upstream: upstream)
        try await app.server.start(address: .hostname("127.0.0.1", port: 0))
        let port = app.http.server.shared.localAddress?.port ?? 0
        let response = try await app.client.get("http://127.0.0.1:\(port)/quotes/ACME")
        let quote = try response.content.decode(Quote.self)
        await app.server.shutdown()
        try await app.asyncShutdown()
        return quote
    } catch {
        await app.server.shutdown()
        try? await app.asyncShutdown()
        throw error
    }
}

func runExample() async throws {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("VaporQuotes-\(UUID().uuidString)", isDirectory: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let upstream = Upstream()

    let first = try await runApp(cacheDirectory: directory, upstream: upstream)
    print("first app:  \(first.symbol) \(first.cents) cents (upstream calls: \(await upstream.calls))")
    // A restart: the new app answers from the cache the first one filled.
    let second = try await runApp(cacheDirectory: directory, upstream: upstream)
    print("second app: \(second.symbol) \(second.cents) cents (upstream calls: \(await upstream.calls))")
    guard second.cents == first.cents, await upstream.calls == 1 else {
        throw ExampleError(message: "the cached quote did not survive the restart")
    }
}

struct ExampleError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

try await runExample()

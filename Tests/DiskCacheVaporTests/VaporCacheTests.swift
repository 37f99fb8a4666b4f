#if Vapor
import DiskCache
import DiskCacheVapor
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing
import TestSupport
import Vapor
import VaporTesting

/// The Vapor cache driver in real Vapor applications, configured with
/// `app.caches.use(.disk(...))` and driven through VaporTesting.
@Suite struct VaporCacheTests {
    /// Routes over `req.cache`: PUT /values/:key (`set`, with an optional `?ttl=` in seconds),
    /// GET /values/:key (404 when absent), DELETE /values/:key.
    func routes(_ app: Application) {
        app.put("values", ":key") { req async throws -> HTTPStatus in
            let key = try req.parameters.require("key")
            let value = req.body.string ?? ""
            if let ttl = try? req.query.get(Int.self, at: "ttl") {
                try await req.cache.set(key, to: value, expiresIn: .seconds(ttl))
            } else {
                try await req.cache.set(key, to: value)
            }
            return .ok
        }
        app.get("values", ":key") { req async throws -> String in
            guard let value = try await req.cache.get(req.parameters.require("key"), as: String.self) else {
                throw Abort(.notFound)
            }
            return value
        }
        app.delete("values", ":key") { req async throws -> HTTPStatus in
            try await req.cache.delete(req.parameters.require("key"))
            return .noContent
        }
    }

    @Test func valuesSurviveARestartOfTheApp() async throws {
        try await withTemporaryDirectory("DiskCacheVaporTests") { directory in
            try await withApp(configure: { app in
                try app.caches.use(.disk(directory: directory))
                routes(app)
            }) { app in
                try await app.testing().test(.PUT, "values/greeting", body: ByteBuffer(string: "hello")) { response in
                    #expect(response.status == .ok)
                }
                try await app.cache.set("limited", to: ["a": 1], expiresIn: .hours(1))
                try await app.cache.set("removed", to: "x")
                try await app.cache.set("removed", to: String?.none)
            }
            // The app closed the cache at its shutdown: nothing else has the directory open now.
            var exclusiveConfiguration = DiskCache.Configuration(sharing: .exclusive)
            exclusiveConfiguration.kind = DiskCacheVaporCache.cacheKind
            let exclusive = try DiskCache(directory: directory, configuration: exclusiveConfiguration)
            try await exclusive.close()

            try await withApp(configure: { app in
                try app.caches.use(.disk(directory: directory))
                routes(app)
            }) { app in
                try await app.testing().test(.GET, "values/greeting") { response in
                    #expect(response.status == .ok)
                    #expect(response.body.string == "hello")
                }
                #expect(try await app.cache.get("limited", as: [String: Int].self) == ["a": 1])
                #expect(try await app.cache.get("removed", as: String.self) == nil)
            }
        }
    }

    @Test func expiryFollowsCacheExpirationTime() async throws {
        try await withTemporaryDirectory("DiskCacheVaporTests") { directory in
            let cache = try DiskCache(directory: directory)
            defer { try? cache.close() }
            try await withApp(configure: { app in
                app.caches.use(.disk(cache))
                routes(app)
            }) { app in
                // Zero seconds, or fewer: already expired.
                try await app.testing().test(.PUT, "values/now?ttl=0", body: ByteBuffer(string: "x")) { response in
                    #expect(response.status == .ok)
                }
                try await app.testing().test(.GET, "values/now") { response in
                    #expect(response.status == .notFound)
                }
                try await app.cache.set("past", to: "x", expiresIn: .seconds(-5))
                #expect(try await app.cache.get("past", as: String.self) == nil)

                // An expiration time is counted from the call, in whole seconds.
                try await app.cache.set("hour", to: "x", expiresIn: .hours(1))
                let expires = try #require(try await cache.entry(for: "hour")?.expires)
                #expect(expires > Date() && expires <= Date().addingTimeInterval(3600 + 1))
                #expect(try await app.cache.get("hour", as: String.self) == "x")
                try await app.cache.set("day", to: "x", expiresIn: .days(1))
                let day = try #require(try await cache.entry(for: "day")?.expires)
                #expect(day > Date().addingTimeInterval(23 * 3600))

                // A set without a time stores a value that never expires, as Vapor's memory cache does.
                try await app.cache.set("hour", to: "y")
                #expect(try await cache.entry(for: "hour")?.expires == nil)
                #expect(try await app.cache.get("hour", as: String.self) == "y")

                // A value whose time runs out while stored reads as absent afterwards.
                try await app.cache.set("second", to: "x", expiresIn: .seconds(1))
                try await Task.sleep(for: .milliseconds(1500))
                #expect(try await app.cache.get("second", as: String.self) == nil)
            }
        }
    }

    @Test func setNilAndDeleteRemove() async throws {
        try await withTemporaryDirectory("DiskCacheVaporTests") { directory in
            try await withApp(configure: { app in
                try app.caches.use(.disk(directory: directory))
                routes(app)
            }) { app in
                try await app.testing().test(.PUT, "values/k", body: ByteBuffer(string: "v"))
                try await app.testing().test(.DELETE, "values/k") { response in
                    #expect(response.status == .noContent)
                }
                try await app.testing().test(.GET, "values/k") { response in
                    #expect(response.status == .notFound)
                }
                try await app.cache.set("n", to: 1)
                try await app.cache.set("n", to: Int?.none)
                #expect(try await app.cache.get("n", as: Int.self) == nil)
                // Removing a key that holds nothing is not an error.
                try await app.cache.delete("never")
            }
        }
    }

    @Test func codableValuesAndAWrongType() async throws {
        struct Profile: Codable, Sendable, Equatable {
            var name: String
            var visits: Int
        }
        try await withTemporaryDirectory("DiskCacheVaporTests") { directory in
            try await withApp(configure: { app in
                try app.caches.use(.disk(directory: directory))
            }) { app in
                try await app.cache.set("profile", to: Profile(name: "Ada", visits: 3))
                #expect(try await app.cache.get("profile", as: Profile.self) == Profile(name: "Ada", visits: 3))
                // Another type reads as nil, as with Vapor's memory cache: not a 500 carrying the key.
                #expect(try await app.cache.get("profile", as: [Int].self) == nil)
                // The entry stays.
                #expect(try await app.cache.get("profile", as: Profile.self)?.visits == 3)
            }
        }
    }

    @Test func aCacheOfTheCallersIsFlushedNotClosed() async throws {
        try await withTemporaryDirectory("DiskCacheVaporTests") { directory in
            let cache = try DiskCache(directory: directory)
            try await withApp(configure: { app in
                app.caches.use(.disk(cache))
            }) { app in
                try await app.cache.set("k", to: "v")
            }
            #expect(try await cache.value(String.self, for: "k") == "v")
            try await cache.close()
        }
    }

    @Test func openingAnUnusableDirectoryFailsAtConfiguration() async throws {
        try await withTemporaryDirectory("DiskCacheVaporTests") { directory in
            // A directory with files in it that is not a cache: the cache refuses to take it over.
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try Data("x".utf8).write(to: directory.appendingPathComponent("notes.txt"))
            try await withApp { app in
                let error = #expect(throws: DiskCacheError.self) {
                    try app.caches.use(.disk(directory: directory))
                }
                #expect(error?.code == .notACache)
            }
        }
    }

    /// Another kind of cache in the directory (a plain `DiskCache`'s, an `HTTPURLCache`'s of
    /// either mode, a Hummingbird persist driver's, each opened with the kind its code passes)
    /// is refused when the app is configured, naming both kinds, and keeps its entries; and a
    /// Vapor cache's directory is refused to each of them the same way.
    @Test(arguments: [DiskCache.Configuration.defaultKind, "HTTPURLCache", "HTTPURLCache.shared", "hummingbird-persist"])
    func aDirectoryOfAnotherKindIsRefusedAndKeepsItsEntries(other: String) async throws {
        var otherConfiguration = DiskCache.Configuration()
        otherConfiguration.kind = other
        try await withTemporaryDirectory("DiskCacheVaporTests") { directory in
            // The other kind first.
            let first = try DiskCache(directory: directory, configuration: otherConfiguration)
            try await first.store(Data("theirs".utf8), for: "k")
            try await first.close()
            try await withApp { app in
                let error = #expect(throws: DiskCacheError.self) {
                    try app.caches.use(.disk(directory: directory))
                }
                #expect(error?.code == .otherKind)
                #expect(error?.message.contains("\"\(other)\"") == true)
                #expect(error?.message.contains("\"\(DiskCacheVaporCache.cacheKind)\"") == true)
            }
            let reopened = try DiskCache(directory: directory, configuration: otherConfiguration)
            #expect(try await reopened.data(for: "k") == Data("theirs".utf8))
            try await reopened.close()
        }
        try await withTemporaryDirectory("DiskCacheVaporTests") { directory in
            // The Vapor cache first.
            try await withApp(configure: { app in
                try app.caches.use(.disk(directory: directory))
            }) { app in
                try await app.cache.set("k", to: "ours")
            }
            let error = #expect(throws: DiskCacheError.self) {
                try DiskCache(directory: directory, configuration: otherConfiguration)
            }
            #expect(error?.code == .otherKind)
            #expect(error?.message.contains("\"\(other)\"") == true)
            #expect(error?.message.contains("\"\(DiskCacheVaporCache.cacheKind)\"") == true)
            try await withApp(configure: { app in
                try app.caches.use(.disk(directory: directory))
            }) { app in
                let value = try await app.cache.get("k", as: String.self)
                #expect(value == "ours")
            }
        }
    }

    /// What the cache logs once the app uses it goes to `app.logger` (its handler, its level).
    @Test func theCacheLogsThroughTheApplicationsLogger() async throws {
        let lines = LogLines()
        try await withTemporaryDirectory("DiskCacheVaporTests") { directory in
            try await withApp(configure: { app in
                app.logger = Logger(label: "app") { _ in CapturingLogHandler(lines: lines) }
                try app.caches.use(.disk(directory: directory))
            }) { app in
                let cache = try #require(app.cache as? DiskCacheVaporCache)
                cache.cache.configuration.logger.warning("through the app", metadata: ["from": "cache"])
            }
        }
        #expect(lines.all.contains("warning through the app from=cache"))
    }

    @Test func concurrentRequestsDoTheirIOOffTheEventLoops() async throws {
        // Where the cache removes an entry is where the driver's I/O runs: the cache reports a
        // removal on the thread that made it. The requests are handled on the app's event
        // loops; the removals must run on the cache's own I/O threads, neither there nor on the
        // task's.
        let removals = Mutex<[(onEventLoop: Bool, inTask: Bool)]>([])
        var configuration = DiskCache.Configuration()
        configuration.onEviction = { _ in
            let removal = (onEventLoop: MultiThreadedEventLoopGroup.currentEventLoop != nil,
                           inTask: withUnsafeCurrentTask { $0 != nil })
            removals.withLock { $0.append(removal) }
        }
        try await withTemporaryDirectory("DiskCacheVaporTests") { directory in
            try await withApp(configure: { app in
                try app.caches.use(.disk(directory: directory, configuration: configuration))
                routes(app)
                app.get("loop") { req async throws -> String in
                    // The request's cache completes its futures on the request's event loop.
                    let future: EventLoopFuture<String?> = req.cache.get("absent", as: String.self)
                    _ = try await future.get()
                    return future.eventLoop === req.eventLoop ? "same" : "other"
                }
            }) { app in
                let tester = try app.testing()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in 0..<16 {
                        group.addTask {
                            try await tester.test(.PUT, "values/k\(index)", body: ByteBuffer(string: "v\(index)")) { response in
                                #expect(response.status == .ok)
                            }
                            try await tester.test(.GET, "values/k\(index)") { response in
                                #expect(response.body.string == "v\(index)")
                            }
                            try await tester.test(.DELETE, "values/k\(index)") { response in
                                #expect(response.status == .noContent)
                            }
                            try await tester.test(.GET, "loop") { response in
                                #expect(response.body.string == "same")
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
        }
        let made = removals.withLock { $0 }
        #expect(made.count == 16)
        #expect(!made.contains { $0.onEventLoop })
        // Nor on the handler's task, blocking a thread of Swift's cooperative pool: the cache's
        // I/O threads run no task.
        #expect(!made.contains { $0.inTask })
    }
}

/// The lines a ``CapturingLogHandler`` kept.
final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}

/// Keeps each message as "level message key=value ...".
struct CapturingLogHandler: LogHandler {
    let lines: LogLines
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String,
             file: String, function: String, line: UInt) {
        let fields = (metadata ?? [:]).sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }.joined()
        lines.append("\(level) \(message)\(fields)")
    }
}
#endif

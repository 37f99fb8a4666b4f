#if Hummingbird
import DiskCache
import DiskCacheHummingbird
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import NIOPosix
import Synchronization
import Testing
import TestSupport

/// `DiskCachePersistDriver` in real Hummingbird applications, driven through HummingbirdTesting:
/// in-process (`.router`) and over HTTP on loopback (`.ahc`, several connections served by
/// NIO's event loops).
@Suite struct PersistDriverTests {
    /// The routes of a small app over `persist`: PUT /values/:key (`set`, with an optional
    /// `?ttl=` in seconds), POST /values/:key (`create`: 409 on a duplicate), GET /values/:key
    /// (204 when absent), GET /ttl/:key, DELETE /values/:key.
    func makeRouter(_ persist: some PersistDriver) -> Router<BasicRequestContext> {
        let router = Router()
        router.put("/values/:key") { request, context -> HTTPResponse.Status in
            let key = try context.parameters.require("key")
            let body = try await request.body.collect(upTo: 1 << 20)
            let ttl = request.uri.queryParameters.get("ttl", as: Int.self).map(Duration.seconds)
            try await persist.set(key: key, value: String(buffer: body), expires: ttl)
            return .ok
        }
        router.post("/values/:key") { request, context -> HTTPResponse.Status in
            let key = try context.parameters.require("key")
            let body = try await request.body.collect(upTo: 1 << 20)
            let ttl = request.uri.queryParameters.get("ttl", as: Int.self).map(Duration.seconds)
            do {
                try await persist.create(key: key, value: String(buffer: body), expires: ttl)
            } catch let error as PersistError where error == .duplicate {
                throw HTTPError(.conflict)
            }
            return .created
        }
        router.get("/values/:key") { _, context -> String? in
            try await persist.get(key: context.parameters.require("key"), as: String.self)
        }
        router.get("/ttl/:key") { _, context -> String? in
            guard let (_, ttl) = try await persist.getWithTTL(key: context.parameters.require("key"), as: String.self) else {
                throw HTTPError(.notFound)
            }
            return ttl.map { String($0.components.seconds) } ?? "none"
        }
        router.delete("/values/:key") { _, context -> HTTPResponse.Status in
            try await persist.remove(key: context.parameters.require("key"))
            return .noContent
        }
        return router
    }

    func makeApp(_ persist: DiskCachePersistDriver) -> some ApplicationProtocol {
        Application(router: makeRouter(persist), services: [persist])
    }

    @Test func valuesSurviveARestartOfTheApp() async throws {
        try await withTemporaryDirectory("DiskCacheHummingbirdTests") { directory in
            let first = try DiskCachePersistDriver(directory: directory)
            try await makeApp(first).test(.router) { client in
                try await client.execute(uri: "/values/greeting", method: .put, body: ByteBuffer(string: "hello")) { response in
                    #expect(response.status == .ok)
                }
                try await client.execute(uri: "/values/session", method: .post, body: ByteBuffer(string: "abc")) { response in
                    #expect(response.status == .created)
                }
                try await client.execute(uri: "/values/limited?ttl=3600", method: .put, body: ByteBuffer(string: "soon")) { _ in }
            }
            // The app's shutdown shut the driver down, which closed the cache it opened.
            await #expect(throws: DiskCacheError.self) {
                try await first.set(key: "late", value: "x")
            }

            let second = try DiskCachePersistDriver(directory: directory)
            try await makeApp(second).test(.router) { client in
                try await client.execute(uri: "/values/greeting", method: .get) { response in
                    #expect(response.status == .ok)
                    #expect(String(buffer: response.body) == "hello")
                }
                try await client.execute(uri: "/values/session", method: .get) { response in
                    #expect(String(buffer: response.body) == "abc")
                }
                // A create after the restart still sees the key.
                try await client.execute(uri: "/values/session", method: .post, body: ByteBuffer(string: "other")) { response in
                    #expect(response.status == .conflict)
                }
                // The expiry date survives too.
                try await client.execute(uri: "/ttl/limited", method: .get) { response in
                    let seconds = try #require(Int(String(buffer: response.body)))
                    #expect(seconds > 0 && seconds <= 3600)
                }
                try await client.execute(uri: "/values/late", method: .get) { response in
                    #expect(response.status == .noContent)
                }
            }
        }
    }

    @Test func createRefusesADuplicate() async throws {
        try await withTemporaryDirectory("DiskCacheHummingbirdTests") { directory in
            let persist = try DiskCachePersistDriver(directory: directory)
            try await makeApp(persist).test(.router) { client in
                try await client.execute(uri: "/values/user", method: .post, body: ByteBuffer(string: "first")) { response in
                    #expect(response.status == .created)
                }
                try await client.execute(uri: "/values/user", method: .post, body: ByteBuffer(string: "second")) { response in
                    #expect(response.status == .conflict)
                }
                try await client.execute(uri: "/values/user", method: .get) { response in
                    #expect(String(buffer: response.body) == "first")
                }
                // After a removal the key can be created again.
                try await client.execute(uri: "/values/user", method: .delete) { response in
                    #expect(response.status == .noContent)
                }
                try await client.execute(uri: "/values/user", method: .post, body: ByteBuffer(string: "third")) { response in
                    #expect(response.status == .created)
                }
                // The framework's own error, as the protocol says.
                await #expect(throws: PersistError.duplicate) {
                    try await persist.create(key: "user", value: "fourth", expires: nil)
                }
            }
        }
    }

    @Test func ofConcurrentCreatesOfOneKeyExactlyOneSucceeds() async throws {
        try await withTemporaryDirectory("DiskCacheHummingbirdTests") { directory in
            let persist = try DiskCachePersistDriver(directory: directory)
            // Eight requests at once, each in its own task, through the application in process:
            // over loopback the test client gives each request 15 s, which a loaded machine's
            // disk can exceed, and a timed out request says nothing about the driver.
            try await makeApp(persist).test(.router) { client in
                let statuses = try await withThrowingTaskGroup(of: (Int, HTTPResponse.Status).self) { group in
                    for index in 0..<8 {
                        group.addTask {
                            let response = try await client.execute(uri: "/values/lock", method: .post,
                                                                    body: ByteBuffer(string: "owner-\(index)"))
                            return (index, response.status)
                        }
                    }
                    return try await group.reduce(into: [Int: HTTPResponse.Status]()) { $0[$1.0] = $1.1 }
                }
                let winners = statuses.filter { $0.value == .created }.map(\.key)
                #expect(winners.count == 1)
                #expect(statuses.values.filter { $0 == .conflict }.count == 7)
                let winner = try #require(winners.first)
                try await client.execute(uri: "/values/lock", method: .get) { response in
                    #expect(String(buffer: response.body) == "owner-\(winner)")
                }
            }
        }
    }

    @Test func expiryFollowsThePersistProtocol() async throws {
        try await withTemporaryDirectory("DiskCacheHummingbirdTests") { directory in
            let persist = try DiskCachePersistDriver(directory: directory)
            try await makeApp(persist).test(.router) { client in
                // A lifetime of zero has already run out: the key reads as absent...
                try await client.execute(uri: "/values/gone?ttl=0", method: .put, body: ByteBuffer(string: "x")) { _ in }
                try await client.execute(uri: "/values/gone", method: .get) { response in
                    #expect(response.status == .noContent)
                }
                // ...and can be created again.
                try await client.execute(uri: "/values/gone", method: .post, body: ByteBuffer(string: "y")) { response in
                    #expect(response.status == .created)
                }
                try await client.execute(uri: "/values/gone", method: .get) { response in
                    #expect(String(buffer: response.body) == "y")
                }
                // No expiry: no time to live.
                try await client.execute(uri: "/ttl/gone", method: .get) { response in
                    #expect(String(buffer: response.body) == "none")
                }

                // A set without `expires` keeps the expiry of the value it replaces.
                try await client.execute(uri: "/values/session?ttl=3600", method: .put, body: ByteBuffer(string: "v1")) { _ in }
                try await client.execute(uri: "/values/session", method: .put, body: ByteBuffer(string: "v2")) { _ in }
                try await client.execute(uri: "/ttl/session", method: .get) { response in
                    let seconds = try #require(Int(String(buffer: response.body)))
                    #expect(seconds > 0 && seconds <= 3600)
                }
                try await client.execute(uri: "/values/session", method: .get) { response in
                    #expect(String(buffer: response.body) == "v2")
                }
                // A set with `expires` replaces it.
                try await client.execute(uri: "/values/session?ttl=60", method: .put, body: ByteBuffer(string: "v3")) { _ in }
                try await client.execute(uri: "/ttl/session", method: .get) { response in
                    let seconds = try #require(Int(String(buffer: response.body)))
                    #expect(seconds >= 0 && seconds <= 60)
                }

                // A lifetime that runs out while the value is stored: it reads as absent afterwards.
                try await persist.set(key: "short", value: "x", expires: .milliseconds(100))
                try await Task.sleep(for: .milliseconds(300))
                #expect(try await persist.get(key: "short", as: String.self) == nil)
                #expect(try await persist.getWithTTL(key: "short", as: String.self) == nil)
            }
        }
    }

    @Test func codableValuesAndAWrongType() async throws {
        struct Profile: Codable, Sendable, Equatable {
            var name: String
            var visits: Int
        }
        try await withTemporaryDirectory("DiskCacheHummingbirdTests") { directory in
            let persist = try DiskCachePersistDriver(directory: directory)
            try await persist.set(key: "profile", value: Profile(name: "Ada", visits: 3), expires: nil)
            #expect(try await persist.get(key: "profile", as: Profile.self) == Profile(name: "Ada", visits: 3))
            // Another type than the one stored: the framework's own error, and the entry stays.
            await #expect(throws: PersistError.invalidConversion) {
                _ = try await persist.get(key: "profile", as: [Int].self)
            }
            await #expect(throws: PersistError.invalidConversion) {
                _ = try await persist.getWithTTL(key: "profile", as: Int.self)
            }
            #expect(try await persist.get(key: "profile", as: Profile.self)?.visits == 3)
            #expect(try await persist.get(key: "missing", as: Profile.self) == nil)
            try await persist.remove(key: "profile")
            #expect(try await persist.get(key: "profile", as: Profile.self) == nil)
            try await persist.shutdown()
        }
    }

    @Test func aDriverOverACacheOfTheCallersLeavesItOpen() async throws {
        try await withTemporaryDirectory("DiskCacheHummingbirdTests") { directory in
            let cache = try DiskCache(directory: directory)
            let persist = DiskCachePersistDriver(cache: cache)
            try await makeApp(persist).test(.router) { client in
                try await client.execute(uri: "/values/k", method: .put, body: ByteBuffer(string: "v")) { _ in }
            }
            // Shut down with the app, but not closed: the caller still uses it.
            #expect(try await cache.value(String.self, for: "k") == "v")
            try await cache.close()
        }
    }

    @Test func diskIOHappensOffTheEventLoops() async throws {
        // Where the cache removes an entry is where the driver's I/O runs: the cache reports a
        // removal on the thread that made it. The requests come in on NIO's event loops; the
        // removals must run on the cache's own I/O threads, neither there nor on the task's.
        let removals = Mutex<[(onEventLoop: Bool, inTask: Bool)]>([])
        var configuration = DiskCache.Configuration()
        configuration.onEviction = { _ in
            let removal = (onEventLoop: MultiThreadedEventLoopGroup.currentEventLoop != nil,
                           inTask: withUnsafeCurrentTask { $0 != nil })
            removals.withLock { $0.append(removal) }
        }
        try await withTemporaryDirectory("DiskCacheHummingbirdTests") { directory in
            let persist = try DiskCachePersistDriver(directory: directory, configuration: configuration)
            try await makeApp(persist).test(.ahc(.http)) { client in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in 0..<8 {
                        group.addTask {
                            try await client.execute(uri: "/values/k\(index)", method: .put, body: ByteBuffer(string: "v")) { _ in }
                            try await client.execute(uri: "/values/k\(index)", method: .delete) { response in
                                #expect(response.status == .noContent)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
        }
        let made = removals.withLock { $0 }
        #expect(made.count == 8)
        #expect(!made.contains { $0.onEventLoop })
        // Nor on the handler's task, blocking a thread of Swift's cooperative pool: the cache's
        // I/O threads run no task.
        #expect(!made.contains { $0.inTask })
    }
}
#endif

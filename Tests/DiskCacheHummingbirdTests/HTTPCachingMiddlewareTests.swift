#if Hummingbird
import DiskCacheHummingbird
import Foundation
import HTTPCache
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Synchronization
import Testing
import TestSupport

/// `HTTPCachingMiddleware` in a real Hummingbird app, driven in-process through
/// HummingbirdTesting: each route counts the times it runs, so a test sees whether an answer
/// came from the app or from the cache.
@Suite struct HTTPCachingMiddlewareTests {
    /// How many times each route ran.
    final class Runs: Sendable {
        private let counts = Mutex([String: Int]())

        /// Counts one more run of `route`; returns how many there were.
        func next(_ route: String) -> Int {
            counts.withLock { counts in
                counts[route, default: 0] += 1
                return counts[route]!
            }
        }

        func count(_ route: String) -> Int { counts.withLock { $0[route] ?? 0 } }
    }

    /// The body size limit of the test app's middleware.
    static let limit = 1024

    /// A shared cache in `directory`.
    func makeCache(_ directory: URL) throws -> HTTPURLCache {
        try HTTPURLCache(directory: directory, engine: CachePolicyEngine(mode: .shared))
    }

    /// An app behind the middleware whose routes answer with the `Cache-Control` their names say,
    /// each body naming the run that made it.
    func makeApp(_ cache: HTTPURLCache, runs: Runs) throws -> some ApplicationProtocol {
        let router = Router()
        router.add(middleware: try HTTPCachingMiddleware(cache: cache, bodySizeLimit: Self.limit))
        @Sendable func text(_ route: String, _ fields: HTTPFields) -> Response {
            Response(status: .ok, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(string: "\(route) \(runs.next(route))")))
        }
        router.get("/max-age") { _, _ in text("max-age", [.cacheControl: "max-age=60", .eTag: "\"v1\""]) }
        router.post("/max-age") { _, _ in Response(status: .noContent) }
        router.get("/greeting") { request, _ in
            let language = request.headers[.acceptLanguage] ?? "en"
            return Response(status: .ok, headers: [.cacheControl: "max-age=60", .vary: "Accept-Language"],
                            body: ResponseBody(byteBuffer: ByteBuffer(string: "\(language == "fr" ? "bonjour" : "hello") \(runs.next("greeting"))")))
        }
        // Stale at once, with a validator: each use is revalidated, and answered 304 when it matches.
        router.get("/validated") { request, _ in
            guard request.headers[.ifNoneMatch] != "\"v1\"" else {
                _ = runs.next("validated 304")
                return Response(status: .notModified, headers: [.cacheControl: "max-age=0", .eTag: "\"v1\"", .setCookie: "seen=1"])
            }
            return text("validated", [.cacheControl: "max-age=0", .eTag: "\"v1\""])
        }
        router.get("/no-store") { _, _ in text("no-store", [.cacheControl: "no-store, max-age=60"]) }
        router.get("/unmarked") { _, _ in text("unmarked", [.lastModified: "Tue, 01 Jan 2030 00:00:00 GMT"]) }
        router.get("/private") { _, _ in text("private", [.cacheControl: "private, max-age=60"]) }
        router.get("/s-maxage") { _, _ in text("s-maxage", [.cacheControl: "max-age=0, s-maxage=60"]) }
        router.get("/cookie") { _, _ in text("cookie", [.cacheControl: "max-age=60", .setCookie: "session=1"]) }
        // Over the limit, written in pieces without a length: collected, then given up.
        router.get("/large") { _, _ in
            let run = runs.next("large")
            return Response(status: .ok, headers: [.cacheControl: "max-age=60"], body: ResponseBody { writer in
                for _ in 0..<4 { try await writer.write(ByteBuffer(repeating: UInt8(ascii: "a"), count: Self.limit / 2)) }
                try await writer.write(ByteBuffer(string: " \(run)"))
                try await writer.finish(nil)
            })
        }
        return Application(router: router)
    }

    /// Two GETs of `uri`; returns the two responses.
    func twice(_ uri: String, _ client: some TestClientProtocol) async throws -> (TestResponse, TestResponse) {
        (try await client.execute(uri: uri, method: .get), try await client.execute(uri: uri, method: .get))
    }

    @Test func aFreshResponseIsComputedOnceAndServedWithItsAge() async throws {
        try await withTemporaryDirectory("HTTPCachingMiddlewareTests") { directory in
            let runs = Runs()
            try await makeApp(makeCache(directory), runs: runs).test(.router) { client in
                let (first, second) = try await twice("/max-age", client)
                #expect(String(buffer: first.body) == "max-age 1")
                #expect(first.headers[.age] == nil)
                #expect(second.status == .ok)
                #expect(String(buffer: second.body) == "max-age 1")
                #expect(second.headers[.age] != nil)
                #expect(second.headers[.eTag] == "\"v1\"")
                #expect(runs.count("max-age") == 1)
                // HEAD is answered from the stored GET.
                let head = try await client.execute(uri: "/max-age", method: .head)
                #expect(head.status == .ok)
                #expect(head.body.readableBytes == 0)
                #expect(runs.count("max-age") == 1)
            }
        }
    }

    @Test func varyKeepsTheVariantsApart() async throws {
        try await withTemporaryDirectory("HTTPCachingMiddlewareTests") { directory in
            let runs = Runs()
            try await makeApp(makeCache(directory), runs: runs).test(.router) { client in
                func get(_ language: String) async throws -> String {
                    String(buffer: try await client.execute(uri: "/greeting", method: .get, headers: [.acceptLanguage: language]).body)
                }
                var answers: [String] = []
                for language in ["fr", "en", "fr", "en"] { answers.append(try await get(language)) }
                #expect(answers == ["bonjour 1", "hello 2", "bonjour 1", "hello 2"])
                #expect(runs.count("greeting") == 2)
            }
        }
    }

    @Test func aMatchingIfNoneMatchIsAnswered304WithoutABody() async throws {
        try await withTemporaryDirectory("HTTPCachingMiddlewareTests") { directory in
            let runs = Runs()
            try await makeApp(makeCache(directory), runs: runs).test(.router) { client in
                _ = try await client.execute(uri: "/max-age", method: .get)
                let matching = try await client.execute(uri: "/max-age", method: .get, headers: [.ifNoneMatch: "\"v0\", \"v1\""])
                #expect(matching.status == .notModified)
                #expect(matching.body.readableBytes == 0)
                #expect(matching.headers[.eTag] == "\"v1\"")
                #expect(matching.headers[.age] != nil)
                let other = try await client.execute(uri: "/max-age", method: .get, headers: [.ifNoneMatch: "\"v2\""])
                #expect(other.status == .ok)
                #expect(String(buffer: other.body) == "max-age 1")
                #expect(runs.count("max-age") == 1)
            }
        }
    }

    @Test func noStorePrivateAndCookieResponsesAreNotStored() async throws {
        try await withTemporaryDirectory("HTTPCachingMiddlewareTests") { directory in
            let runs = Runs()
            try await makeApp(makeCache(directory), runs: runs).test(.router) { client in
                for route in ["no-store", "private", "cookie"] {
                    let (first, second) = try await twice("/\(route)", client)
                    #expect(String(buffer: first.body) == "\(route) 1")
                    #expect(String(buffer: second.body) == "\(route) 2")
                    #expect(second.headers[.age] == nil)
                }
            }
        }
    }

    /// A 200 with `Last-Modified` and nothing else could be kept with a heuristic lifetime
    /// (RFC 9111 §4.2.2); the middleware keeps only what the app marked, so not even a client
    /// that accepts any staleness is answered from the cache.
    @Test func aResponseTheAppDidNotMarkIsNotKept() async throws {
        try await withTemporaryDirectory("HTTPCachingMiddlewareTests") { directory in
            let runs = Runs()
            try await makeApp(makeCache(directory), runs: runs).test(.router) { client in
                let (first, second) = try await twice("/unmarked", client)
                #expect(String(buffer: first.body) == "unmarked 1")
                #expect(String(buffer: second.body) == "unmarked 2")
                let stale = try await client.execute(uri: "/unmarked", method: .get, headers: [.cacheControl: "max-stale"])
                #expect(String(buffer: stale.body) == "unmarked 3")
                #expect(stale.headers[.age] == nil)
            }
        }
    }

    @Test func sMaxageIsHonoured() async throws {
        try await withTemporaryDirectory("HTTPCachingMiddlewareTests") { directory in
            let runs = Runs()
            try await makeApp(makeCache(directory), runs: runs).test(.router) { client in
                // `max-age=0` alone would make it stale at once; a shared cache reads `s-maxage`.
                let (first, second) = try await twice("/s-maxage", client)
                #expect(String(buffer: first.body) == "s-maxage 1")
                #expect(String(buffer: second.body) == "s-maxage 1")
                #expect(second.headers[.age] != nil)
                #expect(runs.count("s-maxage") == 1)
            }
        }
    }

    @Test func aPOSTToTheURIInvalidatesIt() async throws {
        try await withTemporaryDirectory("HTTPCachingMiddlewareTests") { directory in
            let runs = Runs()
            try await makeApp(makeCache(directory), runs: runs).test(.router) { client in
                _ = try await twice("/max-age", client)
                #expect(runs.count("max-age") == 1)
                let post = try await client.execute(uri: "/max-age", method: .post)
                #expect(post.status == .noContent)
                let after = try await client.execute(uri: "/max-age", method: .get)
                #expect(String(buffer: after.body) == "max-age 2")
                #expect(after.headers[.age] == nil)
            }
        }
    }

    @Test func aResponseOverTheLimitPassesThroughUnstored() async throws {
        try await withTemporaryDirectory("HTTPCachingMiddlewareTests") { directory in
            let runs = Runs()
            try await makeApp(makeCache(directory), runs: runs).test(.router) { client in
                let (first, second) = try await twice("/large", client)
                #expect(first.body.readableBytes == 2 * Self.limit + 2)
                #expect(String(buffer: first.body).hasSuffix(" 1"))
                #expect(String(buffer: second.body).hasSuffix(" 2"))
                #expect(second.body.readableBytes == 2 * Self.limit + 2)
                #expect(runs.count("large") == 2)
            }
        }
    }

    @Test func aStaleResponseIsRevalidatedWithTheApp() async throws {
        try await withTemporaryDirectory("HTTPCachingMiddlewareTests") { directory in
            let runs = Runs()
            try await makeApp(makeCache(directory), runs: runs).test(.router) { client in
                let (first, second) = try await twice("/validated", client)
                #expect(String(buffer: first.body) == "validated 1")
                // The app saw the stored ETag and answered 304; the stored body answers the client.
                #expect(second.status == .ok)
                #expect(String(buffer: second.body) == "validated 1")
                #expect(second.headers[.age] != nil)
                #expect(runs.count("validated") == 1)
                #expect(runs.count("validated 304") == 1)
                // The cookie the app set with its 304 is this client's: sent on, not stored.
                #expect(second.headers[.setCookie] == "seen=1")
                #expect(first.headers[.setCookie] == nil)
                // A client's `no-cache` has a fresh response revalidated too: this route
                // ignores the validator and answers anew, which replaces the stored response.
                _ = try await client.execute(uri: "/max-age", method: .get)
                let reload = try await client.execute(uri: "/max-age", method: .get, headers: [.cacheControl: "no-cache"])
                #expect(String(buffer: reload.body) == "max-age 2")
                let after = try await client.execute(uri: "/max-age", method: .get)
                #expect(String(buffer: after.body) == "max-age 2")
                #expect(runs.count("max-age") == 2)
            }
        }
    }

    @Test func storedResponsesSurviveARestartOfTheApp() async throws {
        try await withTemporaryDirectory("HTTPCachingMiddlewareTests") { directory in
            let runs = Runs()
            let first = try makeCache(directory)
            try await makeApp(first, runs: runs).test(.router) { client in
                _ = try await client.execute(uri: "/max-age", method: .get)
            }
            try first.responseStore.closeStore()
            // A new app, over a new cache on the same directory.
            try await makeApp(makeCache(directory), runs: runs).test(.router) { client in
                let response = try await client.execute(uri: "/max-age", method: .get)
                #expect(String(buffer: response.body) == "max-age 1")
                #expect(response.headers[.age] != nil)
                #expect(runs.count("max-age") == 1)
            }
        }
    }

    @Test func aPrivateCacheIsRefused() async throws {
        try await withTemporaryDirectory("HTTPCachingMiddlewareTests") { directory in
            let cache = try HTTPURLCache(directory: directory)
            #expect(throws: HTTPCachingMiddlewareError.privateCache) {
                try HTTPCachingMiddleware<BasicRequestContext>(cache: cache)
            }
        }
    }
}
#endif

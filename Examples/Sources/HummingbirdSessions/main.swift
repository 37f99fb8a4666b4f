// A Hummingbird 2 app that keeps its sessions in a disk cache through `DiskCachePersistDriver`,
// Hummingbird's `PersistDriver` protocol over `DiskCache`: they survive a restart of the app,
// with no Redis server and no database. Its GET responses go through `HTTPCachingMiddleware`,
// an RFC 9111 shared cache on disk: a response whose `Cache-Control` allows it is computed once
// and answered from the cache, with its `Age`, until it is stale.
//
// The example builds the app twice on one cache directory and sends it requests in-process
// with HummingbirdTesting (so that it finishes by itself): a session created by the first app
// is still there for the second, and so is the report the first app computed.
// `buildApplication` is the README's Hummingbird section.
import DiskCache
import DiskCacheHummingbird
import Foundation
import Hummingbird
import HummingbirdTesting

struct Session: Codable, Sendable {
    var user: String
}

func buildApplication(cacheDirectory: URL) throws -> some ApplicationProtocol {
    // Closed when the app shuts down: it is one of the app's services.
    let persist = try DiskCachePersistDriver(directory: cacheDirectory.appendingPathComponent("persist"))
    let router = Router()
    // GET responses whose Cache-Control lets a shared cache keep them, kept on disk.
    router.add(middleware: try HTTPCachingMiddleware(directory: cacheDirectory.appendingPathComponent("http")))
    router.put("/sessions/:id") { request, context -> HTTPResponse.Status in
        let id = try context.parameters.require("id")
        let user = String(buffer: try await request.body.collect(upTo: 1024))
        do {
            // Refused if the session exists (and has not expired).
            try await persist.create(key: "session:\(id)", value: Session(user: user), expires: .seconds(3600))
        } catch let error as PersistError where error == .duplicate {
            throw HTTPError(.conflict)
        }
        return .created
    }
    router.get("/sessions/:id") { _, context -> String? in
        let id = try context.parameters.require("id")
        return try await persist.get(key: "session:\(id)", as: Session.self)?.user  // nil: 204
    }
    router.delete("/sessions/:id") { _, context -> HTTPResponse.Status in
        try await persist.remove(key: "session:\(context.parameters.require("id"))")
        return .noContent
    }
    // Computed at most once a minute: the middleware answers the requests in between.
    router.get("/report") { _, _ -> Response in
        let report = "report computed at \(Date().timeIntervalSince1970)"
        return Response(status: .ok, headers: [.cacheControl: "public, max-age=60"],
                        body: ResponseBody(byteBuffer: ByteBuffer(string: report)))
    }
    return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 8080)),
                       services: [persist])
}

func runExample() async throws {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("HummingbirdSessions-\(UUID().uuidString)", isDirectory: true)
    defer { try? FileManager.default.removeItem(at: directory) }

    // The first run of the app creates a session; creating it again is refused. Its report is
    // computed once for two requests.
    let firstReport = try await buildApplication(cacheDirectory: directory).test(.router) { client in
        let created = try await client.execute(uri: "/sessions/42", method: .put, body: ByteBuffer(string: "ada"))
        print("first app:  PUT /sessions/42 -> \(created.status.code)")
        let again = try await client.execute(uri: "/sessions/42", method: .put, body: ByteBuffer(string: "bob"))
        print("first app:  PUT /sessions/42 -> \(again.status.code) (duplicate)")
        let report = try await client.execute(uri: "/report", method: .get)
        let cached = try await client.execute(uri: "/report", method: .get)
        print("first app:  GET /report -> \(String(buffer: report.body))")
        print("first app:  GET /report -> \(String(buffer: cached.body)), Age \(cached.headers[.age] ?? "none")")
        guard String(buffer: cached.body) == String(buffer: report.body), cached.headers[.age] != nil else {
            throw ExampleError(message: "the second GET /report was not answered from the cache")
        }
        return String(buffer: report.body)
    }
    // A restart: a new app on the same directory still has the session, and the report.
    let user = try await buildApplication(cacheDirectory: directory).test(.router) { client in
        let response = try await client.execute(uri: "/sessions/42", method: .get)
        print("second app: GET /sessions/42 -> \(response.status.code) \(String(buffer: response.body))")
        _ = try await client.execute(uri: "/sessions/42", method: .delete)
        let removed = try await client.execute(uri: "/sessions/42", method: .get)
        print("second app: after DELETE, GET /sessions/42 -> \(removed.status.code)")
        let report = try await client.execute(uri: "/report", method: .get)
        print("second app: GET /report -> \(String(buffer: report.body)), Age \(report.headers[.age] ?? "none")")
        guard String(buffer: report.body) == firstReport else {
            throw ExampleError(message: "the report did not survive the restart")
        }
        return String(buffer: response.body)
    }
    guard user == "ada" else {
        throw ExampleError(message: "the session did not survive the restart (got \(user.debugDescription))")
    }
}

struct ExampleError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

try await runExample()

// A Hummingbird 2 app that keeps its sessions in a disk cache through `DiskCachePersistDriver`,
// Hummingbird's `PersistDriver` protocol over `DiskCache`: they survive a restart of the app,
// with no Redis server and no database.
//
// The example builds the app twice on one cache directory and sends it requests in-process
// with HummingbirdTesting (so that it finishes by itself): a session created by the first app
// is still there for the second. `buildApplication` is the README's Hummingbird section.
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
    let persist = try DiskCachePersistDriver(directory: cacheDirectory)
    let router = Router()
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
    return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 8080)),
                       services: [persist])
}

func runExample() async throws {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("HummingbirdSessions-\(UUID().uuidString)", isDirectory: true)
    defer { try? FileManager.default.removeItem(at: directory) }

    // The first run of the app creates a session; creating it again is refused.
    try await buildApplication(cacheDirectory: directory).test(.router) { client in
        let created = try await client.execute(uri: "/sessions/42", method: .put, body: ByteBuffer(string: "ada"))
        print("first app:  PUT /sessions/42 -> \(created.status.code)")
        let again = try await client.execute(uri: "/sessions/42", method: .put, body: ByteBuffer(string: "bob"))
        print("first app:  PUT /sessions/42 -> \(again.status.code) (duplicate)")
    }
    // A restart: a new app on the same directory still has it.
    let user = try await buildApplication(cacheDirectory: directory).test(.router) { client in
        let response = try await client.execute(uri: "/sessions/42", method: .get)
        print("second app: GET /sessions/42 -> \(response.status.code) \(String(buffer: response.body))")
        _ = try await client.execute(uri: "/sessions/42", method: .delete)
        let removed = try await client.execute(uri: "/sessions/42", method: .get)
        print("second app: after DELETE, GET /sessions/42 -> \(removed.status.code)")
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

#if Hummingbird
import DiskCache
import DiskCacheHummingbird
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import HTTPCache
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
import TestSupport

/// The middleware's promises that outlive a request: a response a client has whole is stored,
/// even when the app's process is killed at once (`kill -9` of a real child process serving a
/// Hummingbird app); and the app's lifecycle closes the cache it opened.
@Suite struct MiddlewareLifecycleTests {
    // MARK: - A kill right after the client has the response

    /// A child process serving `/item/<name>` behind the middleware (the test worker's
    /// `hummingbird` command): its pid and port.
    struct App {
        let process: Process
        let port: Int
    }

    func startApp(_ directory: URL, size: Int, chunked: Bool) async throws -> App {
        let process = Process()
        process.executableURL = workerURL
        process.arguments = ["hummingbird", directory.path, String(size)] + (chunked ? ["chunked"] : [])
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let port = try await onOwnThread { () throws -> Int in
            var text = ""
            while !text.contains("\n") {
                let data = output.fileHandleForReading.availableData
                if data.isEmpty { break }
                text += String(decoding: data, as: UTF8.self)
            }
            guard let line = text.split(separator: "\n").first, line.hasPrefix("LISTENING "), let port = Int(line.dropFirst(10)), port > 0 else {
                throw POSIXError(.EIO)
            }
            return port
        }
        return App(process: process, port: port)
    }

    /// Sends `GET path` to 127.0.0.1:`port`, reads until the response is whole (its
    /// `Content-Length` of body, or the chunked body's last chunk), then kills `pid` with
    /// SIGKILL before anything else happens: returns the body the client had.
    static func fetchThenKill(port: Int, path: String, pid: pid_t) throws -> [UInt8] {
        let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socketDescriptor >= 0 else { throw POSIXError(.EMFILE) }
        defer { close(socketDescriptor) }
        var wait = timeval(tv_sec: 60, tv_usec: 0)
        setsockopt(socketDescriptor, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socketDescriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(socketDescriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else {
            throw POSIXError(.EPIPE)
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            if let body = Self.wholeBody(received) {
                kill(pid, SIGKILL)
                return body
            }
            let count = buffer.withUnsafeMutableBytes { recv(socketDescriptor, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw POSIXError(.ECONNRESET) }
            received += buffer[0..<count]
        }
    }

    /// The body of the HTTP/1.1 response in `bytes` once it is whole, else nil.
    static func wholeBody(_ bytes: [UInt8]) -> [UInt8]? {
        let separator = Array("\r\n\r\n".utf8)
        guard let end = bytes.firstRange(of: separator)?.upperBound else { return nil }
        let head = String(decoding: bytes[..<end], as: UTF8.self).lowercased()
        let rest = Array(bytes[end...])
        if let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
           let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) {
            return rest.count >= length ? Array(rest.prefix(length)) : nil
        }
        // Chunked: sizes in hex, each chunk followed by CRLF, a zero-size chunk last.
        var body: [UInt8] = []
        var offset = 0
        while let lineEnd = rest[offset...].firstRange(of: Array("\r\n".utf8)) {
            let sizeText = String(decoding: rest[offset..<lineEnd.lowerBound], as: UTF8.self)
            guard let size = Int(sizeText.split(separator: ";").first ?? "", radix: 16) else { return nil }
            let start = lineEnd.upperBound
            if size == 0 { return rest.count >= start + 2 ? body : nil }
            guard rest.count >= start + size + 2 else { return nil }
            body += rest[start..<(start + size)]
            offset = start + size + 2
        }
        return nil
    }

    /// Three times per way of ending a body: a fresh app process answers a GET, is killed with
    /// SIGKILL as soon as the client has the last byte, and the cache, opened again, holds that
    /// response, byte for byte. (Storing after the last part went out lost it each time.)
    @Test(arguments: [false, true])
    func aResponseTheClientHasWholeSurvivesAKillOfTheApp(chunked: Bool) async throws {
        try await withTemporaryDirectory("MiddlewareLifecycleTests") { directory in
            let size = 100_000
            var ports: [String: Int] = [:]
            var bodies: [String: [UInt8]] = [:]
            for round in 0..<3 {
                let name = "item-\(round)"
                let app = try await startApp(directory, size: size, chunked: chunked)
                let pid = app.process.processIdentifier
                let body = try await onOwnThread { try Self.fetchThenKill(port: app.port, path: "/item/\(name)", pid: pid) }
                app.process.waitUntilExit()
                #expect(app.process.terminationReason == .uncaughtSignal && app.process.terminationStatus == SIGKILL)
                #expect(body.count == size)
                ports[name] = app.port
                bodies[name] = body
            }
            let cache = try HTTPURLCache(directory: directory, engine: CachePolicyEngine(mode: .shared))
            defer { try? cache.responseStore.closeStore() }
            for (name, body) in bodies {
                let request = URLRequest(url: URL(string: "http://127.0.0.1:\(ports[name]!)/item/\(name)")!)
                let stored = cache.storedResponse(for: request)
                #expect(stored != nil, "\(name) was not stored")
                #expect(stored.map { Array($0.body) == body } ?? false)
            }
        }
    }

    // MARK: - The app's lifecycle

    func makeApp(_ middleware: HTTPCachingMiddleware<BasicRequestContext>) -> some ApplicationProtocol {
        let router = Router()
        router.add(middleware: middleware)
        router.get("/page") { _, _ in
            Response(status: .ok, headers: [.cacheControl: "max-age=60"], body: ResponseBody(byteBuffer: ByteBuffer(string: "page")))
        }
        return Application(router: router, services: [middleware])
    }

    /// As a service of the app, the middleware closes the cache it opened when the app shuts
    /// down: the directory then opens exclusively (no instance has it open) after a clean
    /// shutdown, with the stored response in it.
    @Test func theAppsShutdownClosesTheCacheTheMiddlewareOpened() async throws {
        try await withTemporaryDirectory("MiddlewareLifecycleTests") { directory in
            let middleware = try HTTPCachingMiddleware<BasicRequestContext>(directory: directory)
            try await makeApp(middleware).test(.live) { client in
                try await client.execute(uri: "/page", method: .get) { response in
                    #expect(String(buffer: response.body) == "page")
                }
            }
            var configuration = DiskCache.Configuration(sharing: .exclusive)
            configuration.kind = "HTTPURLCache.shared"
            let cache = try DiskCache(directory: directory, configuration: configuration)
            #expect(cache.statistics.recovery.wasUncleanShutdown == false)
            #expect(cache.count == 1)
            try await cache.close()
        }
    }

    /// A cache given to the middleware is its owner's: the app's shutdown leaves it open.
    @Test func theAppsShutdownLeavesAGivenCacheOpen() async throws {
        try await withTemporaryDirectory("MiddlewareLifecycleTests") { directory in
            let cache = try HTTPURLCache(directory: directory, engine: CachePolicyEngine(mode: .shared))
            try await makeApp(try HTTPCachingMiddleware(cache: cache)).test(.live) { client in
                try await client.execute(uri: "/page", method: .get) { _ in }
            }
            #expect(cache.responseStore.storeStatistics().entries == 1)
            try cache.responseStore.closeStore()
        }
    }
}
#endif

#if Server
import Foundation
import HTTPTestOrigin
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
@testable import CacheServer

/// An origin, a server in front of it on a temporary cache directory, and a client of the server.
struct ServerFixture {
    let origin: OriginServer
    let directory: URL
    let server: CacheServer
    let running: Task<Void, any Error>
    let client: OriginClient

    init(configure: (inout ServerConfiguration) -> Void = { _ in }) async throws {
        origin = try await OriginServer()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("CacheServerTests-\(UUID().uuidString)", isDirectory: true)
        var configuration = ServerConfiguration(origin: .init(host: "127.0.0.1", port: origin.baseURL.port!),
                                                cacheDirectory: directory.appendingPathComponent("cache", isDirectory: true))
        configuration.port = 0
        configuration.diskCapacity = 256 << 20
        configuration.memoryCapacity = 1 << 20
        configuration.purgeToken = "token"
        configuration.originReadTimeout = .seconds(20)
        configuration.timeouts = Self.patientTimeouts
        configure(&configuration)
        var logger = Logger(label: "test")
        logger.logLevel = ProcessInfo.processInfo.environment["SERVER_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .warning
        let server = try await CacheServer.start(configuration, logger: logger)
        self.server = server
        running = Task { try await server.run() }
        client = OriginClient(origin: .init(host: "127.0.0.1", port: server.port), group: MultiThreadedEventLoopGroup.singleton,
                              connectTimeout: .seconds(5), readTimeout: .seconds(120))
    }

    /// Client timeouts far past the defaults. On a loaded runner a test's task can wait minutes
    /// between connecting and writing its request, and the server would close the connection
    /// under it. Tests of the timeouts set their own.
    static let patientTimeouts = {
        var timeouts = ServerConfiguration.Timeouts()
        (timeouts.header, timeouts.body, timeouts.send, timeouts.idle) = (.seconds(600), .seconds(600), .seconds(600), .seconds(600))
        return timeouts
    }()

    /// A response as the client received it.
    struct Reply {
        var status: Int
        var headers: HTTPHeaders
        var body: Data
        var text: String { String(decoding: body, as: UTF8.self) }
        func header(_ name: String) -> String? { headers.first(name: name) }
    }

    /// Sends one request on a connection of its own and reads the whole answer.
    func send(_ method: HTTPMethod = .GET, _ path: String, headers: [(String, String)] = [], body: Data? = nil) async throws -> Reply {
        var fields = HTTPHeaders(headers)
        fields.replaceOrAdd(name: "Host", value: "127.0.0.1")
        if let body { fields.replaceOrAdd(name: "Content-Length", value: String(body.count)) }
        let head = HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: fields)
        return try await client.exchange(head, sendBody: { writer in
            if let body, !body.isEmpty { try await writer.write(.body(.byteBuffer(ByteBuffer(bytes: body)))) }
        }) { responseHead, reader in
            var data = Data()
            while let buffer = try await reader.next() { data.append(contentsOf: buffer.readableBytesView) }
            return Reply(status: Int(responseHead.status.code), headers: responseHead.headers, body: data)
        }
    }

    func get(_ path: String, headers: [(String, String)] = []) async throws -> Reply {
        try await send(.GET, path, headers: headers)
    }

    /// Shuts the server down (waiting for `run()` to return) and removes everything.
    func finish() async throws {
        await server.shutdown()
        try await running.value
        try? await origin.stop()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// A plain TCP connection to the server on `port`, for tests that write requests and read
/// answers byte by byte (pipelining, slow readers, clients that leave part way).
func rawConnection(to port: Int) async throws -> NIOAsyncChannel<ByteBuffer, ByteBuffer> {
    try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .connect(host: "127.0.0.1", port: port) { channel in
            channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
        }
}

/// Deterministic bytes for bodies.
func pattern(count: Int, seed: UInt64) -> Data {
    var state = seed &+ 0x9E37_79B9_7F4A_7C15
    var data = Data(capacity: count)
    for _ in 0..<count {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        data.append(UInt8(truncatingIfNeeded: state >> 33))
    }
    return data
}

/// Whether two bodies are the same bytes. Large bodies are compared with this rather than `==`
/// inside `#expect`: a failed `==` of two `Data` makes the testing library compute their
/// difference element by element, which for megabytes takes longer than any test may.
func sameBytes(_ a: Data?, _ b: Data) -> Bool { a == b }

/// Closes `socket` after `delay`, ending a read that waits for an answer that never comes
/// (cancel it once the exchange is over).
func closing(_ socket: NIOAsyncChannel<ByteBuffer, ByteBuffer>, after delay: Duration) -> Task<Void, any Error> {
    let channel = socket.channel
    return Task {
        try await Task.sleep(for: delay)
        try await channel.close()
    }
}

/// Takes whole HTTP/1.1 answers (head, then `Content-Length` bytes) off a connection's bytes;
/// a connection that ends first fails the read.
struct ResponseReader {
    private var inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
    private var received = Data()

    init(_ inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator) { self.inbound = inbound }

    struct Answer {
        /// The answer as it came, head and body.
        var bytes: Data
        /// The status line, then the field lines.
        var lines: [String]
        var body: String
        /// The status code.
        var status: String { lines[0].split(separator: " ").dropFirst().first.map(String.init) ?? "" }

        /// The first value of the field `name`.
        func field(_ name: String) -> String? {
            lines.dropFirst().first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
                .map { String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces) }
        }
    }

    struct Ended: Error {}

    mutating func next(head isHEAD: Bool) async throws -> Answer {
        while true {
            if let end = received.range(of: Data("\r\n\r\n".utf8)) {
                let lines = String(decoding: received[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
                let length = isHEAD ? 0 : lines.dropFirst().first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                let total = end.upperBound - received.startIndex + length
                if received.count >= total {
                    let bytes = Data(received.prefix(total))
                    received = Data(received.dropFirst(total))
                    return Answer(bytes: bytes, lines: lines, body: String(decoding: bytes.suffix(length), as: UTF8.self))
                }
            }
            guard var buffer = try await inbound.next() else { throw Ended() }
            received.append(contentsOf: buffer.readBytes(length: buffer.readableBytes) ?? [])
        }
    }
}
#endif

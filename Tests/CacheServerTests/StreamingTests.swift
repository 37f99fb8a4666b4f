import DiskCache
import Foundation
import HTTPTestOrigin
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing
@testable import CacheServer

/// Bodies far larger than memory pass through and are stored; damaged bodies are never served.
@Suite(.serialized)
struct StreamingTests {
    /// Resident memory of this process (origin, server and client all run in it), in bytes.
    static func residentBytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
        return kilobytes * 1024
    }

    @Test func aOneGigabyteResponsePassesThroughAndIsStoredInBoundedMemory() async throws {
        let origin = try await StreamingOrigin()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("CacheServerTests-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = ServerConfiguration(origin: .init(host: "127.0.0.1", port: origin.port), cacheDirectory: directory)
        configuration.port = 0
        configuration.diskCapacity = 3 << 30
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let server = try await CacheServer.start(configuration, logger: logger)
        let running = Task { try await server.run() }
        let client = OriginClient(origin: .init(host: "127.0.0.1", port: server.port), group: MultiThreadedEventLoopGroup.singleton,
                                  connectTimeout: .seconds(5), readTimeout: .seconds(60))
        // 1 GiB, stored too; on a volume with less than 3 GiB free, 256 MiB (still four times the bound).
        let free = (try? FileManager.default.attributesOfFileSystem(forPath: NSTemporaryDirectory())[.systemFreeSize] as? Int) ?? 0
        let size = Int(ProcessInfo.processInfo.environment["SERVER_TEST_STREAM_BYTES"] ?? "") ?? (free > 3 << 30 ? 1 << 30 : 256 << 20)
        // Reads the whole body, checking every byte and the growth of resident memory on the way.
        func fetch() async throws -> (count: Int, intact: Bool, peakGrowth: Int, cacheStatus: String?) {
            let before = Self.residentBytes()
            let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/bytes/\(size)", headers: ["Host": "x"])
            return try await client.exchange(head, sendBody: { _ in }) { responseHead, body in
                var count = 0, intact = true, peak = 0
                while let buffer = try await body.next() {
                    let expected = StreamingOrigin.bytes(at: count, count: buffer.readableBytes)
                    let same = buffer.withUnsafeReadableBytes { got in
                        expected.withUnsafeBytes { memcmp(got.baseAddress!, $0.baseAddress!, got.count) == 0 }
                    }
                    if !same { intact = false }
                    count += buffer.readableBytes
                    if count % (64 << 20) < buffer.readableBytes { peak = max(peak, Self.residentBytes() - before) }
                }
                return (count, intact, peak, responseHead.headers.first(name: "X-Cache"))
            }
        }
        let miss = try await fetch()
        #expect(miss.count == size && miss.intact && miss.cacheStatus == "MISS")
        #expect(miss.peakGrowth < 64 << 20, "resident memory grew by \(miss.peakGrowth >> 20) MiB while streaming")
        let hit = try await fetch()
        #expect(hit.count == size && hit.intact && hit.cacheStatus == "HIT")
        #expect(hit.peakGrowth < 64 << 20, "resident memory grew by \(hit.peakGrowth >> 20) MiB while serving from the store")
        await server.shutdown()
        try await running.value
        try await origin.stop()
    }

    @Test func aDamagedBodyIsNeverServedWhole() async throws {
        let fixture = try await ServerFixture()
        let small = pattern(count: 100_000, seed: 3)
        let large = pattern(count: 3 << 20, seed: 4)
        fixture.origin.respond { request in
            var response = ScriptedResponse(status: 200, [("Cache-Control", "max-age=600")])
            response.body = request.path == "/small" ? small : large
            return response
        }
        _ = try await fixture.get("/small")
        _ = try await fixture.get("/large")
        // Flip one byte in the middle of every body file the store holds.
        #expect(fixture.server.statistics.stores == 2)
        let files = FileManager.default.enumerator(at: fixture.server.configuration.cacheDirectory, includingPropertiesForKeys: [.fileSizeKey])!
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "body" }
        #expect(files.count == 2)
        for file in files {
            let handle = try FileHandle(forUpdating: file)
            let size = try handle.seekToEnd()
            try handle.seek(toOffset: size / 2)
            let byte = try handle.read(upToCount: 1)!
            try handle.seek(toOffset: size / 2)
            handle.write(Data([byte[0] ^ 0xFF]))
            try handle.close()
        }
        // A body read in one piece is checked before anything is sent: the origin answers instead.
        let again = try await fixture.get("/small")
        #expect(again.body == small && again.header("X-Cache") == "MISS")
        // A body read in pieces fails at its last: the connection closes short of its length.
        do {
            let reply = try await fixture.get("/large")
            #expect(reply.body == large, "a whole response with damaged bytes was served")
        } catch {
            // The expected end: cut short.
        }
        #expect(try await fixture.get("/large").body == large)
        try await fixture.finish()
    }
}

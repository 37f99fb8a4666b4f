#if Server
import DiskCache
import DiskCacheLocking
import Foundation
import HTTPTestOrigin
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing
import TestSupport
@testable import CacheServer

/// Bodies far larger than memory pass through and are stored; damaged bodies are never served.
@Suite(.serialized)
struct StreamingTests {
    /// A `VmRSS` or `VmHWM` (peak) line of a process's status, in bytes.
    static func memory(_ field: String, of pid: Int32) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }),
              let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
        return kilobytes * 1024
    }

    /// The server as users run it (the `diskcache-server` executable, its own process, so that
    /// its memory is its own), a streaming origin and a client: 1 GiB passes as a miss and is
    /// stored, then is served as a hit, and the server's peak resident memory stays within
    /// 64 MiB of what it used before; SIGTERM then stops it cleanly.
    @Test func aOneGigabyteResponsePassesThroughAndIsStoredInBoundedMemory() async throws {
        let origin = try await StreamingOrigin()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("CacheServerTests-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try #require(await ServerProcess.starting(["--origin", "http://127.0.0.1:\(origin.port)", "--cache-dir", directory.path,
                                        "--listen", "127.0.0.1:0", "--disk-capacity", "3G", "--log-level", "notice"]))
        defer { server.kill() }
        let port = try #require(server.port)
        let client = OriginClient(origin: .init(host: "127.0.0.1", port: port), group: MultiThreadedEventLoopGroup.singleton,
                                  connectTimeout: .seconds(5), readTimeout: .seconds(60))
        // 1 GiB, stored too; on a volume with less than 3 GiB free, 256 MiB (still four times the bound).
        let free = (try? FileManager.default.attributesOfFileSystem(forPath: NSTemporaryDirectory())[.systemFreeSize] as? Int) ?? 0
        let size = Int(ProcessInfo.processInfo.environment["SERVER_TEST_STREAM_BYTES"] ?? "") ?? (free > 3 << 30 ? 1 << 30 : 256 << 20)
        /// Reads a whole body, checking every byte.
        func fetch(_ count: Int) async throws -> (count: Int, intact: Bool, cacheStatus: String?) {
            let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/bytes/\(count)", headers: ["Host": "x"])
            return try await client.exchange(head, sendBody: { _ in }) { responseHead, body in
                var received = 0, intact = true
                while let buffer = try await body.next() {
                    let expected = StreamingOrigin.bytes(at: received, count: buffer.readableBytes)
                    let same = buffer.withUnsafeReadableBytes { got in
                        expected.withUnsafeBytes { memcmp(got.baseAddress!, $0.baseAddress!, got.count) == 0 }
                    }
                    if !same { intact = false }
                    received += buffer.readableBytes
                }
                return (received, intact, responseHead.headers.first(name: "X-Cache"))
            }
        }
        // Warm: a small response through every path first, then the baseline.
        _ = try await fetch(100_000)
        _ = try await fetch(100_000)
        let baseline = Self.memory("VmRSS", of: server.pid)
        let miss = try await fetch(size)
        #expect(miss.count == size && miss.intact && miss.cacheStatus == "MISS")
        let hit = try await fetch(size)
        #expect(hit.count == size && hit.intact && hit.cacheStatus == "HIT")
        let growth = Self.memory("VmHWM", of: server.pid) - baseline
        #expect(baseline > 0 && growth < 64 << 20, "the server's peak resident memory grew by \(growth >> 20) MiB")
        #expect(server.terminate() == 0)
        #expect(server.output.contains("Stopped; the store is closed"))
        try await origin.stop()
    }

    @Test func interimResponsesArePassedOnAndNeverStored() async throws {
        let origin = try await StreamingOrigin()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("CacheServerTests-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = ServerConfiguration(origin: .init(host: "127.0.0.1", port: origin.port), cacheDirectory: directory)
        configuration.port = 0
        configuration.timeouts = ServerFixture.patientTimeouts
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let server = try await CacheServer.start(configuration, logger: logger)
        let running = Task { try await server.run() }
        let client = OriginClient(origin: .init(host: "127.0.0.1", port: server.port), group: MultiThreadedEventLoopGroup.singleton,
                                  connectTimeout: .seconds(5), readTimeout: .seconds(120))
        func get() async throws -> (interim: [HTTPResponseHead], status: UInt, cacheStatus: String?, count: Int) {
            let interim = PthreadMutex([HTTPResponseHead]())
            let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/early/5000", headers: ["Host": "x"])
            return try await client.exchange(head, sendBody: { _ in }, informational: { head in interim.withLock { $0.append(head) } }) {
                responseHead, body in
                var count = 0
                while let buffer = try await body.next() { count += buffer.readableBytes }
                return (interim.withLock { $0 }, responseHead.status.code, responseHead.headers.first(name: "X-Cache"), count)
            }
        }
        let first = try await get()
        #expect(first.interim.map(\.status.code) == [103])
        #expect(first.interim.first?.headers.first(name: "Link") == "</style.css>; rel=preload; as=style")
        #expect(first.status == 200 && first.cacheStatus == "MISS" && first.count == 5000)
        // Answered from the store: the final response alone.
        let second = try await get()
        #expect(second.interim.isEmpty && second.status == 200 && second.cacheStatus == "HIT" && second.count == 5000)
        await server.shutdown()
        try await running.value
        try await origin.stop()
    }

    /// A large body read from disk is sent by the kernel from its file (`sendfile`) after the
    /// whole file matched its checksum: every byte, ranges, HEAD, and no file left open.
    @Test func aLargeStoredBodyIsSentFromItsCheckedFile() async throws {
        let (fixture, large, first) = try await fixtureWithStoredBody(count: 3 << 20, seed: 5)
        #expect(first.header("X-Cache") == "MISS")
        let hit = try await fixture.get("/big")
        #expect(hit.header("X-Cache") == "HIT" && hit.header("Content-Length") == String(large.count))
        #expect(fixture.server.filesSent == 1)  // from its file, not in chunks
        #expect(sameBytes(hit.body, large))
        let head = try await fixture.send(.HEAD, "/big")
        #expect(head.status == 200 && head.body.isEmpty && head.header("Content-Length") == String(large.count))
        let cases: [(range: String, status: Int, bytes: Range<Int>?)] = [
            ("bytes=1000-1999", 206, 1000..<2000),
            ("bytes=-5", 206, large.count - 5..<large.count),
            ("bytes=\(large.count - 10)-", 206, large.count - 10..<large.count),
            ("bytes=\(large.count)-", 416, nil),
        ]
        for (range, status, bytes) in cases {
            let reply = try await fixture.get("/big", headers: [("Range", range)])
            #expect(reply.status == status, "\(range)")
            #expect(reply.body == bytes.map { large.subdata(in: $0) } ?? Data(), "\(range)")
        }
        #expect(fixture.origin.requests.count == 1)
        try await expectNoFileLeftOpen(fixture.server)
        try await fixture.finish()
    }

    /// A hit whose files the page cache holds is answered on the event loop, its body checked
    /// whole and sent from its file: every byte, HEAD, ranges, a 304, and no file left open. Once
    /// the files are dropped from the page cache, hits go to the connection's task (whose reads
    /// may wait for the disk) instead of blocking the event loop, and come back the same.
    ///
    /// The files dropped are those of a second response, `/cold`, whose body no `sendfile` has
    /// sent yet: in CI the body file of `/page`, sent from its file five times, twice kept all
    /// its pages in the page cache through 10 s of asking the kernel to drop them. A read that
    /// refuses to wait for the disk (`RWF_NOWAIT`) still starts the disk read (readahead), and
    /// a server thread descheduled on a loaded machine can find it done: so each kind of file
    /// is dropped again, up to five times, until a hit goes to the task (in CI once, the
    /// `.meta` file's hit was answered on the event loop right after its drop).
    @Test(.enabled(if: PageCache.canDrop, "the temporary directory's pages cannot be dropped"))
    func aHitThePageCacheHoldsIsAnsweredOnTheEventLoop() async throws {
        let fixture = try await ServerFixture { $0.memoryCapacity = 0 }
        let body = pattern(count: 1 << 20, seed: 8)
        fixture.origin.respond { _ in
            var response = ScriptedResponse(status: 200, [("Cache-Control", "max-age=600"), ("ETag", "\"e1\"")])
            response.body = body
            return response
        }
        #expect(try await fixture.get("/page").header("X-Cache") == "MISS")
        var onEventLoop: Int { fixture.server.statistics.hitsOnEventLoop }

        let hit = try await fixture.get("/page")
        #expect(hit.header("X-Cache") == "HIT" && hit.header("Content-Length") == String(body.count))
        #expect(sameBytes(hit.body, body))
        #expect(onEventLoop == 1)
        let head = try await fixture.send(.HEAD, "/page")
        #expect(head.status == 200 && head.body.isEmpty && head.header("Content-Length") == String(body.count))
        let range = try await fixture.get("/page", headers: [("Range", "bytes=1000-1999")])
        #expect(range.status == 206 && range.body == body.subdata(in: 1000..<2000))
        let beyond = try await fixture.get("/page", headers: [("Range", "bytes=\(body.count)-")])
        #expect(beyond.status == 416 && beyond.body.isEmpty)
        let unchanged = try await fixture.get("/page", headers: [("If-None-Match", "\"e1\"")])
        #expect(unchanged.status == 304 && unchanged.body.isEmpty)
        #expect(onEventLoop == 5)
        try await expectNoFileLeftOpen(fixture.server)

        // The body file, then the metadata file (the stored response's fields) out of the page cache.
        let directory = fixture.server.configuration.cacheDirectory
        let others = Set(PageCache.entryFiles(under: directory))
        #expect(try await fixture.get("/cold").header("X-Cache") == "MISS")
        let cold = PageCache.entryFiles(under: directory).filter { !others.contains($0) }
        var hits = 5
        for kind in ["body", "meta"] {
            // Up to 20 tries: a read without waiting starts the disk read (readahead), which on a
            // fast disk, or a loaded machine that pauses the reader, can finish before the
            // kernel looks again, and the hit is then answered on the event loop after all.
            var wentToTheTask = false
            for _ in 0..<20 where !wentToTheTask {
                #expect(PageCache.drop(cold.filter { $0.pathExtension == kind }), "\(kind)")
                let before = onEventLoop
                let reply = try await fixture.get("/cold")
                #expect(reply.header("X-Cache") == "HIT" && sameBytes(reply.body, body), "\(kind)")
                hits += 1
                wentToTheTask = onEventLoop == before
            }
            #expect(wentToTheTask, "\(kind): 20 hits, each right after a drop, were all answered on the event loop")
            // The task's read brought the file back into the page cache.
            let before = onEventLoop
            #expect(sameBytes(try await fixture.get("/cold").body, body))
            hits += 1
            #expect(onEventLoop == before + 1, "\(kind)")
        }
        #expect(fixture.origin.requests.count == 2)
        #expect(fixture.server.statistics.hits == hits)
        try await expectNoFileLeftOpen(fixture.server)
        try await fixture.finish()
    }

    /// A server with no memory tier whose cache holds `/big`, a body of `count` bytes stored
    /// on disk (fetched once), that body, and the reply to the request that fetched it.
    private func fixtureWithStoredBody(count: Int, seed: UInt64, configure: (inout ServerConfiguration) -> Void = { _ in })
        async throws -> (ServerFixture, Data, ServerFixture.Reply) {
        let fixture = try await ServerFixture {
            $0.memoryCapacity = 0
            configure(&$0)
        }
        let large = pattern(count: count, seed: seed)
        fixture.origin.respond { _ in
            var response = ScriptedResponse(status: 200, [("Cache-Control", "max-age=600")])
            response.body = large
            return response
        }
        let first = try await fixture.get("/big")
        return (fixture, large, first)
    }

    /// `times` clients that each ask for /big, read a little of the answer and close the socket
    /// with the rest unread.
    private func leaveMidBody(_ port: Int, times: Int) async throws {
        for _ in 0..<times {
            let socket = try await rawConnection(to: port)
            try await socket.executeThenClose { inbound, outbound in
                try await outbound.write(ByteBuffer(string: "GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
                var received = 0
                for try await buffer in inbound {
                    received += buffer.readableBytes
                    if received > 64 << 10 { break }
                }
            }
        }
    }

    /// A client that goes away part way through a body sent from its file leaves no file open.
    @Test func aClientThatLeavesMidBodyLeavesNoFileOpen() async throws {
        let (fixture, large, _) = try await fixtureWithStoredBody(count: 8 << 20, seed: 6)
        try await leaveMidBody(fixture.server.port, times: 5)
        #expect(fixture.server.filesSent == 5)  // each from its file, not in chunks
        try await expectNoFileLeftOpen(fixture.server)
        #expect(sameBytes(try await fixture.get("/big").body, large))
        try await fixture.finish()
    }

    /// With `copyLimit`, a body checked through its mapping is copied as it is hashed and
    /// written from the copy, not sent from its file: whole, as a range, to a reader slower than
    /// the socket's buffers while the entry is purged, and to clients that leave part way; every
    /// copy is freed once written, and the purged file is unmapped. Over the copies' budget, the
    /// file is sent. A byte changed in place is caught before a copy goes out.
    @Test func aBodyCopiedAsItIsCheckedArrivesWholeAndIsFreed() async throws {
        let (fixture, large, first) = try await fixtureWithStoredBody(count: (16 << 20) + 17, seed: 9) {
            $0.copyLimit = 32 << 20
            $0.purgeToken = "token"
        }
        #expect(first.header("X-Cache") == "MISS" && sameBytes(first.body, large))
        let hit = try await fixture.get("/big")
        #expect(hit.header("X-Cache") == "HIT" && sameBytes(hit.body, large))
        let range = try await fixture.send(.GET, "/big", headers: [("Range", "bytes=1000-200999")])
        #expect(range.status == 206 && range.body == large[1000..<201_000])
        #expect(try await fixture.send(.HEAD, "/big").header("Content-Length") == "\(large.count)")
        try await leaveMidBody(fixture.server.port, times: 3)
        let bodyFile = try #require(FileManager.default.enumerator(at: fixture.server.configuration.cacheDirectory, includingPropertiesForKeys: nil)?
            .compactMap { $0 as? URL }.first { $0.pathExtension == "body" })
        // 16 MiB is more than loopback's socket buffers hold: the write is still under way
        // when the purge removes the entry and its file.
        let reading = Task { try await rawExchange(fixture.server.port, "GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", pauseAfter: 64 << 10) }
        try await Task.sleep(for: .milliseconds(100))
        #expect(try await fixture.send(.RAW(value: "PURGE"), "/big", headers: [("Authorization", "Bearer token")]).status == 200)
        #expect(!FileManager.default.fileExists(atPath: bodyFile.path))
        let received = try await reading.value
        #expect(received.head.lowercased().contains("x-cache: hit") && sameBytes(received.body, large),
                "\(received.body.count) of \(large.count) bytes")
        #expect(fixture.server.filesSent == 0, "a body was sent from its file")
        let deadline = ContinuousClock.now + .seconds(10)
        func stillMapped() -> Bool {
            ((try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8)) ?? "").contains(bodyFile.lastPathComponent)
        }
        while BodyCopies.inFlight > 0 || stillMapped(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(BodyCopies.inFlight == 0)
        #expect(!stillMapped(), "the purged body file is still mapped")

        // Stored again and copied once; then a byte changed in place: the check catches it
        // before a copy goes out, and the origin answers.
        #expect(try await fixture.get("/big").header("X-Cache") == "MISS")
        #expect(sameBytes(try await fixture.get("/big").body, large))
        #expect(fixture.server.filesSent == 0)
        let again = try #require(FileManager.default.enumerator(at: fixture.server.configuration.cacheDirectory, includingPropertiesForKeys: nil)?
            .compactMap { $0 as? URL }.first { $0.pathExtension == "body" })
        let handle = try FileHandle(forUpdating: again)
        try handle.seek(toOffset: 5 << 20)
        handle.write(Data([large[5 << 20] ^ 0x01]))
        try handle.close()
        let reply = try await fixture.get("/big")
        #expect(reply.header("X-Cache") == "MISS" && sameBytes(reply.body, large))
        #expect(fixture.server.filesSent == 0)
        try await fixture.finish()

        // A budget smaller than the body: sent from its file.
        let (small, body, _) = try await fixtureWithStoredBody(count: 1 << 20, seed: 10) {
            $0.copyLimit = 32 << 20
            $0.copyBudget = 512 << 10
        }
        #expect(sameBytes(try await small.get("/big").body, body))
        #expect(small.server.filesSent == 1)
        try await small.finish()
    }

    /// A body sent from its file reaches the client whole when the connection closes after it
    /// (`Connection: close`, HTTP/1.0) and when the server shuts down while the client is still
    /// reading it: the close waits for the write, which a close would otherwise cut short.
    @Test func aBodySentFromItsFileIsWholeWhenTheConnectionClosesAfterIt() async throws {
        let (fixture, large, _) = try await fixtureWithStoredBody(count: 16 << 20, seed: 7)
        for request in ["GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", "GET /big HTTP/1.0\r\n\r\n"] {
            let received = try await rawExchange(fixture.server.port, request, pauseAfter: 0)
            #expect(sameBytes(received.body, large), "\(request.prefix(20)): \(received.body.count) of \(large.count) bytes")
        }
        // A shutdown while the client is part way through reading: it waits for the body to go.
        let reading = Task { try await rawExchange(fixture.server.port, "GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", pauseAfter: 64 << 10) }
        // Once the body is being sent (a fixed pause could pass, on a loaded machine, before the
        // request even arrived, and a shutdown then rightly answers nothing).
        let deadline = ContinuousClock.now + .seconds(30)
        while fixture.server.filesBeingSent == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(fixture.server.filesBeingSent > 0)
        await fixture.server.shutdown()
        let received = try await reading.value
        #expect(sameBytes(received.body, large), "\(received.body.count) of \(large.count) bytes")
        try await fixture.running.value
        try? await fixture.origin.stop()
        try? FileManager.default.removeItem(at: fixture.directory)
    }

    /// Sends `request` on a connection of its own and reads the answer to its end (the
    /// `Content-Length` or the connection's end), pausing 300 ms once `pauseAfter` bytes came.
    private func rawExchange(_ port: Int, _ request: String, pauseAfter: Int) async throws -> (head: String, body: Data) {
        let socket = try await rawConnection(to: port)
        // Bounded: a server that never finishes the answer ends the read after 30 s.
        let watchdog = closing(socket, after: .seconds(30))
        defer { watchdog.cancel() }
        return try await socket.executeThenClose { inbound, outbound in
            try await outbound.write(ByteBuffer(string: request))
            var received = Data()
            var paused = pauseAfter == 0
            var expected: Int?
            var headLength = 0
            for try await buffer in inbound {
                received.append(contentsOf: buffer.readableBytesView)
                if !paused, received.count >= pauseAfter {
                    paused = true
                    try await Task.sleep(for: .milliseconds(300))
                }
                if expected == nil, let end = received.range(of: Data("\r\n\r\n".utf8)) {
                    headLength = end.upperBound
                    let head = String(decoding: received[..<end.lowerBound], as: UTF8.self)
                    expected = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                        .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) }
                }
                if let expected, received.count >= headLength + expected { break }
            }
            let head = String(decoding: received.prefix(max(0, headLength - 4)), as: UTF8.self)
            return (head, received.count >= headLength ? Data(received[headLength...]) : Data())
        }
    }

    /// Waits (up to 10 s) for every file opened to send a body to be closed.
    private func expectNoFileLeftOpen(_ server: CacheServer) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while server.filesBeingSent > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(server.filesBeingSent == 0)
    }

    @Test(arguments: [false, true])
    func aDamagedBodyIsNeverServedWhole(streamed: Bool) async throws {
        // No memory tier: every hit reads the disk. Streamed: the large body is above the
        // limit up to which a body is checked whole before it is sent.
        let fixture = try await ServerFixture {
            $0.memoryCapacity = 0
            if streamed { $0.wholeCheckLimit = 1 << 20 }
        }
        let small = pattern(count: 100_000, seed: 3)
        let large = pattern(count: 3 << 20, seed: 4)
        fixture.origin.respond { request in
            var response = ScriptedResponse(status: 200, [("Cache-Control", "max-age=600")])
            response.body = request.path == "/small" ? small : large
            return response
        }
        _ = try await fixture.get("/small")
        _ = try await fixture.get("/large")
        if !streamed {
            // A hit first: the body file is checked through a mapping kept for the next check
            // (`mappedCapacity`), which then sees the byte changed in place below.
            let hit = try await fixture.get("/large")
            #expect(sameBytes(hit.body, large) && hit.header("X-Cache") == "HIT")
        }
        // Flip one byte in the middle of the body of each: the small one lives inside its metadata
        // file, the large one in a body file.
        #expect(fixture.server.statistics.stores == 2)
        let files = FileManager.default.enumerator(at: fixture.server.configuration.cacheDirectory, includingPropertiesForKeys: [.fileSizeKey])!
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "body" || $0.pathExtension == "meta" }
        let bodies = files.filter { $0.pathExtension == "body" }
        let bodyStems = Set(bodies.map { $0.deletingPathExtension().path })
        let inline = files.filter { $0.pathExtension == "meta" && !bodyStems.contains($0.deletingPathExtension().path) }
        #expect(bodies.count == 1 && inline.count == 1)
        for file in bodies + inline {
            let handle = try FileHandle(forUpdating: file)
            let size = try handle.seekToEnd()
            try handle.seek(toOffset: size / 2)
            let byte = try handle.read(upToCount: 1)!
            try handle.seek(toOffset: size / 2)
            handle.write(Data([byte[0] ^ 0xFF]))
            try handle.close()
        }
        // A body checked whole before anything is sent: the origin answers instead.
        let again = try await fixture.get("/small")
        #expect(again.body == small && again.header("X-Cache") == "MISS")
        if streamed {
            // A body read in pieces fails at its last: the connection closes short of its length.
            do {
                let reply = try await fixture.get("/large")
                #expect(sameBytes(reply.body, large), "a whole response with damaged bytes was served")
            } catch {
                // The expected end: cut short.
            }
        } else {
            let reply = try await fixture.get("/large")
            #expect(sameBytes(reply.body, large) && reply.header("X-Cache") == "MISS")
        }
        #expect(sameBytes(try await fixture.get("/large").body, large))
        try await expectNoFileLeftOpen(fixture.server)
        try await fixture.finish()
    }
}
#endif

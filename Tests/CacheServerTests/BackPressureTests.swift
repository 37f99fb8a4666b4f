#if Server
import Foundation
import Testing
import TestSupport

/// A client that sends requests and never reads the answers holds no more of the server's
/// memory than its connection's bounds: the server stops reading from it while its unsent
/// answers are over the channel's high watermark. The server runs as a child process, so that
/// its resident memory is its own.
@Suite(.serialized)
struct BackPressureTests {
    /// Resident memory of process `pid`, in bytes.
    static func residentBytes(_ pid: Int32) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return 0 }
        return kilobytes * 1024
    }

    /// 20 connections pipeline GETs of a prepared 1 KB hit (the bytes path) as fast as the
    /// kernel takes them and never read. A server that holds back stops reading from each of
    /// them once its answers are over the high watermark, so the kernel soon takes nothing
    /// more from any client (a server that does not keeps reading, and queueing answers, for
    /// as long as they send); then its resident memory has grown by a bounded amount.
    @Test func clientsThatNeverReadHoldBoundedMemory() async throws {
        let origin = try await RawOrigin(padding: 1000)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("BackPressure-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let started = await ServerProcess.starting([
            "--origin", "http://127.0.0.1:\(origin.port)", "--cache-dir", directory.path, "--listen", "127.0.0.1:0",
            "--log-level", "notice",
        ])
        let server = try #require(started)
        defer { server.kill() }
        let port = try #require(server.port)
        let request = "GET /hit HTTP/1.1\r\nHost: x\r\n\r\n"
        // Stored, then prepared: the third answer is a prepared one.
        for _ in 0..<3 {
            let answer = try await onOwnThread {
                let warm = try PlainSocket(port: port)
                warm.send(request)
                return warm.answer()
            }
            #expect(answer?.hasPrefix("HTTP/1.1 200") == true)
        }
        try await Task.sleep(for: .milliseconds(500))
        let before = Self.residentBytes(server.pid)
        let sockets = try await onOwnThread { try (0..<20).map { _ in try PlainSocket(port: port, kernelBuffers: 8192) } }
        let batch = Array(String(repeating: request, count: 64).utf8)
        // Each socket writes an endless pipeline of the request, whatever the kernel takes,
        // until no socket has taken a byte for two seconds (or five minutes have passed: the
        // server on a loaded machine may take long to reach its bound, and this is no speed test).
        let (sent, saturated) = try await onOwnThread {
            var offsets = [Int](repeating: 0, count: sockets.count)
            var sent = 0
            let deadline = Date().addingTimeInterval(300)
            var lastProgress = Date()
            while Date() < deadline {
                for (index, socket) in sockets.enumerated() {
                    let written = socket.sendSome(batch, from: offsets[index])
                    if written > 0 { lastProgress = Date() }
                    sent += written
                    offsets[index] = (offsets[index] + written) % batch.count
                }
                if Date().timeIntervalSince(lastProgress) > 2 { return (sent, true) }
                usleep(1_000)
            }
            return (sent, false)
        }
        let after = Self.residentBytes(server.pid)
        #expect(before > 0)
        #expect(saturated, "the server kept reading from clients that never read: \(sent >> 20) MiB of requests taken")
        #expect(after - before < 32 << 20, "resident memory grew from \(before >> 20) to \(after >> 20) MiB")
        try await origin.stop()
    }
}
#endif

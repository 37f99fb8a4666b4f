import Foundation
import Testing

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

    /// 50 connections pipeline GETs of a prepared 1 KB hit (the bytes path) as fast as the
    /// kernel takes them and never read: the server's resident memory grows by less than 16 MiB.
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
            let answer = try await offPool {
                let warm = try PlainSocket(port: port)
                warm.send(request)
                return warm.answer()
            }
            #expect(answer?.hasPrefix("HTTP/1.1 200") == true)
        }
        try await Task.sleep(for: .milliseconds(500))
        let before = Self.residentBytes(server.pid)
        let sockets = try await offPool { try (0..<50).map { _ in try PlainSocket(port: port) } }
        let batch = String(repeating: request, count: 64)
        // Round after round, each socket takes what the kernel will, for three seconds.
        let accepted = try await offPool {
            let deadline = Date().addingTimeInterval(3)
            var accepted = 0
            while Date() < deadline {
                for socket in sockets where socket.send(batch, nonBlocking: true) { accepted += 64 }
            }
            return accepted
        }
        try await Task.sleep(for: .seconds(1))
        let after = Self.residentBytes(server.pid)
        #expect(before > 0)
        #expect(accepted > 50 * 64, "every client sent more than one batch")
        #expect(after - before < 16 << 20, "resident memory grew from \(before >> 20) to \(after >> 20) MiB")
        try await origin.stop()
    }
}

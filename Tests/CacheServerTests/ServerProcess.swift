#if Server
import DiskCacheLocking
import Foundation

/// The `diskcache-server` executable running as a child process, its output collected.
final class ServerProcess: Sendable {
    private let process: Process
    private let collected = PthreadMutex("")
    /// The port it reported listening on (nil if it did not within 30 s).
    let port: Int?
    var pid: Int32 { process.processIdentifier }

    /// Starts it with `arguments` (which should include `--log-level notice` or lower and `--listen HOST:0`
    /// for ``port`` to be learnt) and waits until it listens.
    init(_ arguments: [String]) throws {
        process = Process()
        process.executableURL = Self.executable
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        let collected = self.collected
        pipe.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            collected.withLock { $0 += String(decoding: data, as: UTF8.self) }
        }
        try process.run()
        var found: Int?
        let deadline = Date().addingTimeInterval(30)
        while found == nil, Date() < deadline, process.isRunning {
            found = collected.withLock { text in
                text.range(of: "address=127.0.0.1:").flatMap { range in Int(text[range.upperBound...].prefix { $0.isNumber }) }
            }
            if found == nil { Thread.sleep(forTimeInterval: 0.02) }
        }
        port = found
    }

    /// ``init(_:)`` on a thread of its own, so that waiting for the server does not hold one of
    /// the few threads async tests share; nil when it could not be started.
    static func starting(_ arguments: [String]) async -> ServerProcess? {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: try? ServerProcess(arguments)) }.start()
        }
    }

    var output: String { collected.withLock { $0 } }

    /// SIGTERM, then waits for the exit; returns the exit status.
    func terminate() -> Int32 {
        process.terminate()
        process.waitUntilExit()
        return process.terminationStatus
    }

    func kill() {
        if process.isRunning {
            Foundation.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Next to the test bundle, where the package's products are built.
    static var executable: URL {
        let candidates = [Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent()]
        for directory in candidates {
            let url = directory.appendingPathComponent("diskcache-server")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        return candidates[0].appendingPathComponent("diskcache-server")
    }
}
#endif

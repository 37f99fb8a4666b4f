public import Foundation

/// The executable `name` of this package (the test worker, the `diskcache` tool), built beside
/// the test bundle by the test targets that depend on it.
public func builtExecutable(_ name: String) -> URL {
    let candidates = [
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
        Bundle.main.bundleURL,
        Bundle.main.bundleURL.deletingLastPathComponent(),
    ]
    for directory in candidates {
        let url = directory.appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: url.path) { return url }
    }
    return candidates[0].appendingPathComponent(name)
}

/// The test worker executable (`DiskCacheTestWorker`).
public var workerURL: URL { builtExecutable("DiskCacheTestWorker") }

/// Runs `body` with a fresh directory's URL (named `prefix` and a UUID, under the system's
/// temporary directory, not created), and removes the directory when `body` returns or throws.
public func withTemporaryDirectory<T>(_ prefix: String, _ body: (URL) async throws -> T) async throws -> T {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}

/// Runs `body` on a thread of its own (8 MiB of stack) and waits for it without holding a thread
/// of the test runner's pool, which is as wide as the cores: a long synchronous test run on the
/// pool leaves every other test fewer threads, and with two cores none once two such run.
/// An issue recorded on that thread fails the run, reported against no test ("«unknown»") at
/// its source line.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.stackSize = 8 << 20
        thread.start()
    }
}

/// Runs the test worker with `arguments` to its end, on a thread of its own (the wait blocks
/// no task), and gives its standard output's lines.
public func runWorker(_ arguments: [String]) async throws -> [String] {
    let process = Process()
    process.executableURL = workerURL
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    try process.run()
    let output = try await onOwnThread {
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return data
    }
    return String(decoding: output, as: UTF8.self).split(separator: "\n").map(String.init)
}

public import Foundation

/// The test worker executable (`DiskCacheTestWorker`), built beside the test bundle by the test
/// targets that depend on it.
public var workerURL: URL {
    let candidates = [
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
        Bundle.main.bundleURL,
        Bundle.main.bundleURL.deletingLastPathComponent(),
    ]
    for directory in candidates {
        let url = directory.appendingPathComponent("DiskCacheTestWorker")
        if FileManager.default.isExecutableFile(atPath: url.path) { return url }
    }
    return candidates[0].appendingPathComponent("DiskCacheTestWorker")
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
    let output: Data = await withCheckedContinuation { continuation in
        Thread.detachNewThread {
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            continuation.resume(returning: data)
        }
    }
    return String(decoding: output, as: UTF8.self).split(separator: "\n").map(String.init)
}

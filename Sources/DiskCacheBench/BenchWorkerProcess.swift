import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A `diskcache bench-worker` child, spoken to in lines on its standard input and output.
final class BenchWorkerProcess {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private var buffer: [UInt8] = []

    init(arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: Bundle.main.executablePath ?? CommandLine.arguments[0])
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        try process.run()
    }

    func send(_ line: String) throws {
        try input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    /// The next line, which must start with `word` (a worker that failed says why instead).
    @discardableResult
    func expect(_ word: String) throws -> String {
        let line = try readLine()
        guard line == word || line.hasPrefix(word + " ") else {
            throw BenchError("bench-worker: expected \(word), got: \(line)")
        }
        return line
    }

    private func readLine() throws -> String {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            // read(2) itself: FileHandle's read(upToCount:) waits for the whole count.
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes { read(output.fileHandleForReading.fileDescriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw BenchError("bench-worker: ended without answering") }
            buffer += chunk[..<count]
        }
    }

    func stop() {
        try? input.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

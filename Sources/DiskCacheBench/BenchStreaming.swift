import CDiskCacheSupport
import DiskCache
import DiskCacheLocking
import Foundation
import ToolSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// MARK: - Large bodies: the streaming API against plain file I/O, with peak memory

/// One body of the phase's size (1G, say) stored and read each streaming way, beside the
/// cheapest plain-file way to move the same bytes, with the process's peak resident memory
/// growth for each. Not run by default (`--operations streaming --sizes 1G`).
///
/// Memory: `/proc/self/clear_refs` (5) resets the peak before each phase; the note gives the
/// peak (VmHWM) minus the resident set (VmRSS) before it. The page cache is not part of it.
extension BenchRunner {
    static let streamingPiece = 1 << 20

    func runStreaming(size: Int) throws -> [BenchRow] {
        let label = BenchSize.label(size)
        let dir = plan.root + "/streaming-\(label)"
        defer { if !isKept { removeTree(dir) } }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let cache = try DiskCache(directory: URL(fileURLWithPath: dir + "/cache"), configuration: configuration(sweepInterval: nil))
        defer { try? cache.close() }
        let source = dir + "/source.bin"
        let pieces = Self.pieces(seed: plan.seed)
        progress.phase("\(label): streaming: a \(label) source file")
        try Self.writePieces(pieces, size: size, to: source)
        settle()
        var rows: [BenchRow] = []
        func row(_ operation: String, _ subject: String, _ measured: (BenchMeasurement, Int64), base: (BenchMeasurement, Int64)? = nil,
                 note: String? = nil) {
            var row = BenchRow(size: size, operation: operation, subject: subject, entries: 1, threads: 1, measurement: measured.0,
                               note: "peak RSS +\(Self.mebibytes(measured.1))" + (note.map { "; " + $0 } ?? ""))
            if let base, base.0.megabytesPerSecond > 0 { row.ratioToBaseline = measured.0.megabytesPerSecond / base.0.megabytesPerSecond }
            rows.append(row)
            report.figures["\(label).streaming.\(operation).\(subject).peakGrowthBytes"] = Double(measured.1)
        }

        progress.phase("\(label): streaming: write in 1 MiB pieces")
        let plainWrite = Self.measured(bytes: size) { try Self.writePieces(pieces, size: size, to: dir + "/plain-write.bin") }
        settle()
        let writer = Self.measured(bytes: size) {
            let writer = try cache.makeWriter(for: "writer")
            try Self.forEachPiece(pieces, size: size) { try writer.append($0) }
            try writer.commit()
        }
        settle()
        row("write", "plain pwrite", plainWrite, note: "1 MiB pieces into a new file")
        row("write", "Writer", writer, base: plainWrite)

        progress.phase("\(label): streaming: copy a file in")
        let kernelCopy = Self.measured(bytes: size) { try Self.plainCopy(source, to: dir + "/plain-copy-kernel.bin", kernel: true) }
        settle()
        let userCopy = Self.measured(bytes: size) { try Self.plainCopy(source, to: dir + "/plain-copy-user.bin", kernel: false) }
        settle()
        let copied = Self.measured(bytes: size) { try cache.store(contentsOf: URL(fileURLWithPath: source), for: "copied") }
        settle()
        let kernelFaster = kernelCopy.0.megabytesPerSecond >= userCopy.0.megabytesPerSecond
        let plainCopy = kernelFaster ? kernelCopy : userCopy
        row("copy in", kernelFaster ? "plain copy_file_range" : "plain pread/pwrite", plainCopy,
            note: String(format: "the faster of copy_file_range (%.0f MB/s) and pread/pwrite in 1 MiB pieces (%.0f MB/s)",
                         kernelCopy.0.megabytesPerSecond, userCopy.0.megabytesPerSecond))
        row("copy in", "store(contentsOf:)", copied, base: plainCopy)

        progress.phase("\(label): streaming: read in 1 MiB pieces")
        let plainRead = Self.measured(bytes: size) { _ = try Self.readPieces(source) }
        let chunks = Self.measured(bytes: size) {
            let total = try Self.waiting {
                var total: Int64 = 0
                guard let chunks = try await cache.chunks(for: "copied") else { throw BenchStreamingError.missing }
                for try await chunk in chunks { total += Int64(chunk.count) }
                return total
            }
            guard total == Int64(size) else { throw BenchStreamingError.short }
        }
        let withFile = Self.measured(bytes: size) {
            let total = try cache.withFile(for: "copied") { file in try Self.readPieces(fd: file.fileDescriptor) }
            guard total == Int64(size) else { throw BenchStreamingError.short }
        }
        let whole = Self.measured(bytes: size) { guard cache.data(for: "copied")?.count == size else { throw BenchStreamingError.short } }
        row("read", "plain pread", plainRead, note: "1 MiB pieces")
        row("read", "chunks(for:)", chunks, base: plainRead)
        row("read", "withFile(for:)", withFile, base: plainRead, note: "includes the checksum check before the closure")
        row("read", "data(for:)", whole, base: plainRead, note: "the whole body in memory, for comparison")

        progress.phase("\(label): streaming: move a file in")
        let moved = Self.measured(bytes: size) {
            try cache.store(contentsOf: URL(fileURLWithPath: source), for: "moved", transfer: .move)
        }
        row("move in", "store(contentsOf:) .move", moved, note: "a link, the checksum read, then an unlink")
        return rows
    }

    /// Runs `body` once and returns its time as a one-operation measurement of `bytes`, with the
    /// peak resident memory growth it caused.
    static func measured(bytes: Int, _ body: () throws -> Void) -> (BenchMeasurement, Int64) {
        try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
        let before = residentMemory().current
        let start = benchNanoseconds()
        var measurement = BenchMeasurement()
        do {
            try body()
            measurement.operations = 1
            measurement.bytes = Int64(bytes)
        } catch {
            FileHandle.standardError.write(Data("bench: streaming phase failed: \(error)\n".utf8))
        }
        let elapsed = benchNanoseconds() - start
        measurement.latencies = [elapsed]
        measurement.seconds = Double(elapsed) / 1e9
        return (measurement, max(0, residentMemory().peak - before))
    }

    static func mebibytes(_ bytes: Int64) -> String { String(format: "%.1f MiB", Double(bytes) / 1_048_576) }

    /// 16 different 1 MiB pieces; piece `i` of a body is `pieces[i % 16]`.
    static func pieces(seed: UInt64) -> [Data] {
        var random = SplitMix64(seed: seed)
        return (0..<16).map { _ in
            var data = Data(count: streamingPiece)
            data.withUnsafeMutableBytes { raw in
                for i in 0..<(streamingPiece / 8) { raw.storeBytes(of: random.next(), toByteOffset: i * 8, as: UInt64.self) }
            }
            return data
        }
    }

    static func forEachPiece(_ pieces: [Data], size: Int, _ body: (Data) throws -> Void) rethrows {
        var offset = 0, index = 0
        while offset < size {
            let piece = pieces[index % pieces.count]
            let count = min(piece.count, size - offset)
            try body(count == piece.count ? piece : piece.prefix(count))
            offset += count
            index += 1
        }
    }

    /// The plain way to write a body from memory: `pwrite` of each piece into a new file.
    static func writePieces(_ pieces: [Data], size: Int, to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw BenchStreamingError.io(path, errno) }
        defer { close(fd) }
        var offset: off_t = 0
        try forEachPiece(pieces, size: size) { piece in
            let written = piece.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, offset) }
            guard written == piece.count else { throw BenchStreamingError.io(path, errno) }
            offset += off_t(written)
        }
    }

    /// The plain copy, with `copy_file_range(2)` (falling back to `pread`/`pwrite` if the kernel
    /// refuses) or with `pread`/`pwrite` alone.
    static func plainCopy(_ source: String, to destination: String, kernel: Bool) throws {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw BenchStreamingError.io(source, errno) }
        defer { close(input) }
        let output = open(destination, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw BenchStreamingError.io(destination, errno) }
        defer { close(output) }
        var inOffset: Int64 = 0, outOffset: Int64 = 0
        if kernel {
            while true {
                let copied = cdiskcache_copy_range(input, &inOffset, output, &outOffset, 1 << 30)
                if copied > 0 { continue }
                if copied == 0 { return }
                break
            }
        }
        var buffer = [UInt8](repeating: 0, count: streamingPiece)
        while true {
            let read = buffer.withUnsafeMutableBytes { pread(input, $0.baseAddress, $0.count, off_t(inOffset)) }
            if read == 0 { return }
            guard read > 0 else { throw BenchStreamingError.io(source, errno) }
            guard buffer.withUnsafeBytes({ pwrite(output, $0.baseAddress, read, off_t(outOffset)) }) == read else {
                throw BenchStreamingError.io(destination, errno)
            }
            inOffset += Int64(read)
            outOffset += Int64(read)
        }
    }

    static func readPieces(_ path: String) throws -> Int64 {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw BenchStreamingError.io(path, errno) }
        defer { close(fd) }
        return try readPieces(fd: fd)
    }

    /// Reads a file to its end in 1 MiB `pread`s; returns how many bytes.
    static func readPieces(fd: Int32) throws -> Int64 {
        var buffer = [UInt8](repeating: 0, count: streamingPiece)
        var offset: Int64 = 0
        while true {
            let read = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(offset)) }
            if read == 0 { return offset }
            guard read > 0 else { throw BenchStreamingError.io("fd \(fd)", errno) }
            offset += Int64(read)
        }
    }

    /// Runs `body` in a task and waits for it on this thread (not one of the cooperative pool's).
    static func waiting<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let result = PthreadMutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            let outcome: Result<T, any Error>
            do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
            result.withLock { $0 = outcome }
            done.signal()
        }
        done.wait()
        return try result.withLock { $0 }!.get()
    }
}

enum BenchStreamingError: Error, CustomStringConvertible {
    case missing, short
    case io(String, Int32)

    var description: String {
        switch self {
        case .missing: "the stored body was not found"
        case .short: "the body read back was not the size stored"
        case .io(let path, let code): "\(path): \(String(cString: strerror(code)))"
        }
    }
}

@testable import DiskCache
import Foundation
import Logging
import DiskCacheLocking
import Testing
import TestSupport

/// A fresh directory under the system's temporary directory, removed when the test ends.
final class TemporaryDirectory {
    let url: URL
    var path: String { url.path }

    /// `inMemory`: under `/dev/shm` where it exists (tmpfs: an fsync costs nothing), for tests
    /// that call fsync thousands of times without needing a real disk, such as the power-loss
    /// tests, which model the disk themselves.
    init(_ name: String = #function, inMemory: Bool = false) {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        var isDirectory: ObjCBool = false
        let parent = inMemory && FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &isDirectory)
            && isDirectory.boolValue && access("/dev/shm", W_OK) == 0
            ? URL(fileURLWithPath: "/dev/shm") : FileManager.default.temporaryDirectory
        url = parent
            .appendingPathComponent("DiskCacheTests-\(safe.prefix(40))-\(UUID().uuidString.prefix(8))")
    }

    /// The cache directory inside it (not created: opening creates it).
    var cache: URL { url.appendingPathComponent("cache") }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}

extension DiskCache.Configuration {
    static func testing(
        durability: DiskCache.Durability = .none,
        inlineThreshold: Int = 8 << 10,
        clock: ManualClock? = nil,
        hasher: KeyHasher? = nil
    ) -> DiskCache.Configuration {
        var configuration = DiskCache.Configuration(durability: durability, inlineThreshold: inlineThreshold)
        configuration.logger.logLevel = .critical
        // No free-space floor: with the default one (2 % of the volume), a test cache on a
        // nearly full volume evicts what the test just stored. The floor's own tests set theirs.
        configuration.minimumFreeSpace = 0
        configuration.minimumFreeFraction = 0
        // Zeros written ahead of the journal 4 KiB at a time, not a megabyte: test
        // files stay small (the power-loss model copies each write), and appends cross chunk
        // boundaries often.
        configuration.journalWriteAhead = 4 << 10
        if let clock { configuration.clock = { clock.milliseconds } }
        if let hasher { configuration.keyHasher = hasher }
        return configuration
    }
}

func bytes(_ text: String) -> Data { Data(text.utf8) }

/// A cache in `dir.cache` holding "k" = "v", closed cleanly.
func makeClosedCache(_ dir: TemporaryDirectory) throws {
    let cache = try DiskCache(directory: dir.cache, configuration: .testing())
    try cache.store(bytes("v"), for: "k")
    try cache.close()
}

/// Deterministic pseudo-random bytes.
func randomData(count: Int, seed: UInt64) -> Data {
    var state = seed &+ 0x9E37_79B9_7F4A_7C15
    var out = Data(count: count)
    out.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) in
        for i in 0..<count {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            buffer[i] = UInt8(truncatingIfNeeded: state >> 33)
        }
    }
    return out
}

/// The files of one entry (in the slot the index says), found through the cache's own layout.
struct EntryFiles {
    let meta: String
    let body: String
    init(_ cache: DiskCache, key: String) {
        let hash = cache.configuration.keyHasher.hash(key)
        let slot = cache.state.withLock { $0.index[hash]?.slot } ?? 0
        meta = cache.layout.metaFile(hash, slot: slot)
        body = cache.layout.bodyFile(hash, slot: slot)
    }
}

func fileExists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

func readFile(_ path: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) }

func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

// MARK: - Child processes

/// A running worker whose standard output is collected line by line by a reader thread.
final class Worker: @unchecked Sendable {  // unchecked: `collected` and `buffer` are guarded by `lock`
    let process = Process()
    private let pipe = Pipe()
    private let lock = NSLock()
    private var buffer = Data()
    private var collected: [String] = []
    private let finished = DispatchSemaphore(value: 0)

    init(_ arguments: [String]) throws {
        process.executableURL = workerURL
        process.arguments = arguments
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let handle = pipe.fileHandleForReading
        Thread.detachNewThread { [self] in
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                lock.withLock {
                    buffer.append(data)
                    while let newline = buffer.firstIndex(of: 0x0A) {
                        collected.append(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                        buffer.removeSubrange(buffer.startIndex...newline)
                    }
                }
            }
            finished.signal()
        }
    }

    var lines: [String] { lock.withLock { collected } }

    /// Waits until a line satisfying `predicate` appears, the worker exits, or the timeout passes.
    @discardableResult
    func waitFor(timeout: Double = 30, _ predicate: (String) -> Bool) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let line = lines.first(where: predicate) { return line }
            if hasExited {
                _ = finished.wait(timeout: .now() + 5)
                return lines.first(where: predicate)
            }
            Thread.sleep(forTimeInterval: 0.002)
        }
        return nil
    }

    /// Whether the worker has exited. Foundation's `isRunning` alone can lag: with several
    /// workers running, a killed one stayed a zombie for over a minute while it said the worker
    /// ran. On Linux a zombie (`Z` in /proc/PID/stat) has exited.
    var hasExited: Bool {
        guard process.isRunning else { return true }
        #if os(Linux)
        guard let stat = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8),
              let name = stat.lastIndex(of: ")") else { return true }
        // The state is the field after the parenthesised name.
        return stat[name...].dropFirst().first(where: { $0 != " " }) == "Z"
        #else
        return false
        #endif
    }

    /// SIGKILL, then waits for the process (for at most a minute) and for the rest of its output.
    /// Not `waitUntilExit()`: that once waited forever here for a worker already killed, holding
    /// one of the test process's few threads; a test that goes on reports what it then finds.
    func kill() {
        Foundation.kill(process.processIdentifier, SIGKILL)
        let deadline = Date().addingTimeInterval(60)
        while !hasExited && Date() < deadline { usleep(2_000) }
        _ = finished.wait(timeout: .now() + 5)
    }

    /// Runs to completion and returns its output lines.
    static func run(_ arguments: [String]) throws -> [String] {
        let worker = try Worker(arguments)
        worker.process.waitUntilExit()
        _ = worker.finished.wait(timeout: .now() + 5)
        return worker.lines
    }
}

/// Every file below `url` with its bytes, and every directory (named with a trailing "/"):
/// what "left byte for byte" compares.
func snapshot(_ url: URL) throws -> [String: [UInt8]] {
    var result: [String: [UInt8]] = [:]
    let enumerator = FileManager.default.enumerator(atPath: url.path)
    while let name = enumerator?.nextObject() as? String {
        var isDirectory: ObjCBool = false
        let path = url.appendingPathComponent(name).path
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue {
            result[name] = try readFile(path)
        } else {
            result[name + "/"] = []
        }
    }
    return result
}

extension DiskCache {
    /// Whether `key` has a checked body (``checkedBody(for:copying:pageCacheOnly:)``), which
    /// is let go at once.
    func hasCheckedBody(for key: String, copying: BodyCopying? = nil) throws -> Bool {
        try checkedBody(for: key, copying: copying) != nil
    }
}

@testable import DiskCache
import Foundation
import DiskCacheLocking
import Testing
import TestSupport

/// A fresh directory under the system's temporary directory, removed when the test ends.
final class TemporaryDirectory {
    let url: URL
    var path: String { url.path }

    init(_ name: String = #function) {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("DiskCacheToolTests-\(safe.prefix(40))-\(UUID().uuidString.prefix(8))")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The cache directory inside it (not created: opening creates it).
    var cache: URL { url.appendingPathComponent("cache") }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}

/// Opens a cache for building test fixtures, with a manual clock so dates are exact.
/// Without a clock, the real one; either way no background sweeper, so nothing is evicted
/// behind the test's back.
func openCache(_ url: URL, clock: ManualClock? = nil, sharing: DiskCache.Sharing = .shared) throws -> DiskCache {
    // An 8 KiB inline threshold, so that the fixtures have both kinds of entry: inline and with a `.body` file.
    var configuration = DiskCache.Configuration(durability: .none, inlineThreshold: 8 << 10, sweepInterval: nil, sharing: sharing)
    if let clock { configuration.clock = { clock.milliseconds } }
    return try DiskCache(directory: url, configuration: configuration)
}

/// Held while this process spawns a child and while it closes a cache.
///
/// A child spawned while a cache is open shares the open file description of the cache's
/// `LOCK` (and so its `flock`) from fork until exec closes it (`O_CLOEXEC`). Tests run in
/// parallel, so without this a cache closed by one test could still be locked, for that
/// instant, by a child another test is starting, and the next open would fail as "locked".
/// Spawning returns only after the child has exec'd, so closing under the same lock
/// guarantees no child holds a copy once `closeCache` returns.
let spawnLock = NSLock()

func closeCache(_ cache: DiskCache) throws {
    try spawnLock.withLock { try cache.close() }
}

/// Bytes 0...255 repeated: binary, with NULs and newlines, to prove output is byte-exact.
func binaryData(count: Int) -> Data {
    Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 / 256) })
}

/// The small cache most tests start from, closed:
///
/// | key   | size   | created (UTC)        | last access          | expires              | metadata                 |
/// |-------|--------|----------------------|----------------------|----------------------|--------------------------|
/// | alpha | 5      | 2026-01-01T00:00:00Z | 2026-01-01T00:05:00Z | -                    | -                        |
/// | beta  | 20,000 | 2026-01-01T00:01:00Z | 2026-01-01T00:01:00Z | 2099-01-01T00:00:00Z | content-type: text/plain |
/// | gamma | 100    | 2026-01-01T00:02:00Z | 2026-01-01T00:02:00Z | 2026-01-02T00:00:00Z | -                        |
///
/// beta's body has its own file; the others are inline. gamma has expired (by the real clock).
struct SmallCache {
    static let alpha = Data("hello".utf8)
    static let beta = binaryData(count: 20_000)
    static let gamma = Data(repeating: 0x67, count: 100)
    static let betaExpires = ISO8601DateFormatter().date(from: "2099-01-01T00:00:00Z")!
    static let gammaExpires = ISO8601DateFormatter().date(from: "2026-01-02T00:00:00Z")!

    /// Where beta's body lives (it is not inline).
    let betaBody: String

    init(at url: URL) throws {
        let clock = ManualClock("2026-01-01T00:00:00Z")
        let cache = try openCache(url, clock: clock)
        try cache.store(Self.alpha, for: "alpha")
        clock.advance(seconds: 60)
        try cache.store(Self.beta, for: "beta", metadata: ["content-type": "text/plain"], expires: Self.betaExpires)
        clock.advance(seconds: 60)
        try cache.store(Self.gamma, for: "gamma", expires: Self.gammaExpires)
        clock.advance(seconds: 180)
        // Read twice: the default eviction order (S3-FIFO) then keeps it over beta, as LRU would.
        #expect(cache.data(for: "alpha") == Self.alpha)
        #expect(cache.data(for: "alpha") == Self.alpha)
        let hash = cache.configuration.keyHasher.hash("beta")
        let slot = cache.state.withLock { $0.index[hash]?.slot } ?? 0
        betaBody = cache.layout.bodyFile(hash, slot: slot)
        try closeCache(cache)
    }
}

// MARK: - Running the tool

/// The `diskcache` executable, built beside the test bundle.
var toolURL: URL { builtExecutable("diskcache") }

struct ToolResult {
    var status: Int32
    var stdout: Data
    var stderr: String
    var output: String { String(decoding: stdout, as: UTF8.self) }
    var lines: [String] { output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty } }

    /// "Label:   value" lines of `stats`, by label.
    var fields: [String: String] {
        var fields: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[String(line[..<colon])] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return fields
    }

    func json() throws -> Any { try JSONSerialization.jsonObject(with: stdout) }
}

/// Runs `diskcache arguments...` to completion, with `input` on its standard input.
func runTool(_ arguments: [String], input: Data? = nil) throws -> ToolResult {
    let process = Process()
    process.executableURL = toolURL
    process.arguments = arguments
    let output = Pipe()
    let error = Pipe()
    let inputPipe = Pipe()
    process.standardOutput = output
    process.standardError = error
    process.standardInput = input == nil ? FileHandle.nullDevice : inputPipe
    try spawnLock.withLock { try process.run() }
    // Read both pipes while the process runs, so neither can fill up and block it.
    let collected = Collected()
    let group = DispatchGroup()
    for (pipe, isError) in [(output, false), (error, true)] {
        group.enter()
        Thread.detachNewThread {
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            collected.set(data, isError: isError)
            group.leave()
        }
    }
    if let input {
        // A refused command exits without reading its input; writing to its closed pipe must fail
        // with EPIPE rather than kill this process with SIGPIPE (seen in a Thread Sanitizer run).
        signal(SIGPIPE, SIG_IGN)
        try? inputPipe.fileHandleForWriting.write(contentsOf: input)
        try inputPipe.fileHandleForWriting.close()
    }
    process.waitUntilExit()
    group.wait()
    return ToolResult(status: process.terminationStatus, stdout: collected.stdout,
                      stderr: String(decoding: collected.stderr, as: UTF8.self))
}

private final class Collected: @unchecked Sendable {  // unchecked: the lock guards both buffers
    private let lock = NSLock()
    private var out = Data()
    private var err = Data()
    func set(_ data: Data, isError: Bool) { lock.withLock { if isError { err = data } else { out = data } } }
    var stdout: Data { lock.withLock { out } }
    var stderr: Data { lock.withLock { err } }
}

/// Every file under `directory` with its bytes, to show that a command changed nothing.
func snapshot(_ directory: URL) -> [String: Data] {
    var files: [String: Data] = [:]
    let root = directory.path
    guard let enumerator = FileManager.default.enumerator(atPath: root) else { return files }
    while let relative = enumerator.nextObject() as? String {
        let path = root + "/" + relative
        var isDirectory: ObjCBool = false
        _ = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
        files[relative] = isDirectory.boolValue ? Data("<dir>".utf8) : (FileManager.default.contents(atPath: path) ?? Data())
    }
    return files
}

func exists(_ url: URL) -> Bool { FileManager.default.fileExists(atPath: url.path) }

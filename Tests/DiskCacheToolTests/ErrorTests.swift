@testable import DiskCache
import Foundation
import Testing

/// Directories that cannot be used: one line on stderr, exit status 3, and nothing created
/// or changed, for every subcommand.
struct ErrorTests {
    static let readOnly: [[String]] = [["stats"], ["ls"], ["show", "k"], ["get", "k"], ["verify"]]
    static let modifying: [[String]] = [["put", "k", "-"], ["rm", "k"], ["rm", "--since", "1h"], ["clear"],
                                        ["compact"], ["sweep"], ["verify", "--repair"]]
    static let all = readOnly + modifying

    /// `diskcache SUBCOMMAND DIR REST...`
    func run(_ command: [String], _ directory: URL) throws -> ToolResult {
        try runTool([command[0], directory.path] + command.dropFirst(), input: Data("v".utf8))
    }

    func expectOneLineError(_ result: ToolResult, status: Int32 = 3, containing text: String,
                            sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.status == status, sourceLocation: sourceLocation)
        #expect(result.stdout.isEmpty, sourceLocation: sourceLocation)
        #expect(result.stderr.hasPrefix("diskcache: error: "), "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.filter { $0 == "\n" }.count == 1, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains(text), "\(result.stderr)", sourceLocation: sourceLocation)
    }

    @Test(arguments: all)
    func aMissingDirectoryIsAnErrorAndIsNotCreated(command: [String]) throws {
        let directory = TemporaryDirectory()
        let result = try run(command, directory.cache)
        expectOneLineError(result, containing: directory.cache.path)
        #expect(!exists(directory.cache))
    }

    @Test(arguments: all)
    func aFileIsNotACache(command: [String]) throws {
        let directory = TemporaryDirectory()
        let file = directory.url.appendingPathComponent("file")
        try Data("not a cache".utf8).write(to: file)
        let result = try run(command, file)
        expectOneLineError(result, containing: "not a directory")
        #expect(try Data(contentsOf: file) == Data("not a cache".utf8))
    }

    @Test(arguments: all)
    func aDirectoryOfOtherFilesIsNotACache(command: [String]) throws {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(at: directory.cache, withIntermediateDirectories: true)
        try Data("hello".utf8).write(to: directory.cache.appendingPathComponent("notes.txt"))
        let result = try run(command, directory.cache)
        expectOneLineError(result, containing: "not a cache")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.cache.path) == ["notes.txt"])
    }

    @Test(arguments: all)
    func anEmptyDirectoryIsNotACacheAndStaysEmpty(command: [String]) throws {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(at: directory.cache, withIntermediateDirectories: true)
        let result = try run(command, directory.cache)
        expectOneLineError(result, containing: "not a cache")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.cache.path) == [])
    }

    /// Every command that writes (after waiting for it) refuses a cache a process has open
    /// exclusively; `stats`, `ls`, `show`, `get` and `verify` read it (`SnapshotTests`), and so
    /// does `verify --repair`, which has nothing to write in this healthy cache.
    @Test(arguments: modifying.filter { $0 != ["verify", "--repair"] })
    func aCacheOpenExclusivelyInAnotherProcessIsRefused(command: [String]) throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        // This test process holds the cache's lock while the tool runs.
        let cache = try openCache(directory.cache, sharing: .exclusive)
        defer { try? closeCache(cache) }
        let before = snapshot(directory.cache)
        // Commands that write wait for the cache (10 s unless told): a short wait here.
        let writes = Self.modifying.contains(command)
        let started = Date()
        let result = try run(writes ? command + ["--wait", "0.3"] : command, directory.cache)
        expectOneLineError(result, containing: "process \(getpid())")
        if writes {
            #expect(Date().timeIntervalSince(started) >= 0.3)
            #expect(result.stderr.contains("waited 0.3 s"), "\(result.stderr)")
        }
        #expect(snapshot(directory.cache) == before)
        #expect(cache.data(for: "alpha") == SmallCache.alpha)
    }

    @Test func aNewerFormatIsRefused() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        try Data("swift-disk-cache\n99\n".utf8).write(to: directory.cache.appendingPathComponent("VERSION"))
        for command in [["stats"], ["clear"]] {
            expectOneLineError(try run(command, directory.cache), containing: "format version 99")
        }
        #expect(try runTool(["ls", directory.cache.path]).status == 3)
    }

    @Test(arguments: [["show", "nope"], ["get", "nope"], ["rm", "nope"]])
    func aMissingKeyExitsWithStatus4(command: [String]) throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let result = try run(command, directory.cache)
        #expect(result.status == 4)
        #expect(result.stderr == "diskcache: error: No entry for key \"nope\"\n")
    }

    @Test func aKeyWithControlCharactersPrintsOnOneLine() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let result = try runTool(["get", directory.cache.path, "two\nlines"])
        #expect(result.status == 4)
        #expect(result.stderr == "diskcache: error: No entry for key \"two\\nlines\"\n")
    }

    /// While an application has the cache open (shared, the default), `put` and `rm` from a
    /// shell work at once, and the application sees what they did on its next call.
    @Test func writesFromTheToolReachAnApplicationSharingTheCache() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let cache = try openCache(directory.cache)
        defer { try? closeCache(cache) }
        let path = directory.cache.path
        let put = try runTool(["put", path, "from-shell", "-", "--wait", "0"], input: Data("hello".utf8))
        #expect(put.status == 0, "\(put.stderr)")
        #expect(cache.data(for: "from-shell") == Data("hello".utf8))
        let rm = try runTool(["rm", path, "alpha", "--wait", "0"])
        #expect(rm.status == 0, "\(rm.stderr)")
        #expect(cache.data(for: "alpha") == nil)
        try cache.store(Data("app".utf8), for: "from-app")
        let get = try runTool(["get", path, "from-app"])
        #expect(get.output == "app")
    }

    /// Twenty `put`s started at once on one cache all succeed: they share it (and would wait
    /// their turn for one that an application holds exclusively).
    @Test func commandsStartedTogetherTakeTurns() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let statuses = LockedStatuses()
        let group = DispatchGroup()
        let path = directory.cache.path
        for i in 0..<20 {
            DispatchQueue.global().async(group: group) {
                let result = try? runTool(["put", path, "key-\(i)", "-"], input: Data("value \(i)".utf8))
                statuses.append(result?.status ?? -1)
            }
        }
        group.wait()
        #expect(statuses.values == Array(repeating: 0, count: 20))
        let cache = try openCache(directory.cache)
        defer { try? closeCache(cache) }
        for i in 0..<20 { #expect(cache.data(for: "key-\(i)") == Data("value \(i)".utf8)) }
    }
}

/// The read-only commands on a cache a running process has open: they read it as it was, say so
/// on standard error, and never return bytes that were not stored.
struct SnapshotTests {
    @Test func readOnlyCommandsReadAnOpenCacheAsASnapshot() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let cache = try openCache(directory.cache, sharing: .exclusive)  // held open by this process
        defer { try? closeCache(cache) }
        let path = directory.cache.path
        let stats = try runTool(["stats", path])
        #expect(stats.status == 0)
        #expect(stats.output.contains("yes, in process \(getpid())"), "\(stats.output)")
        #expect(stats.stderr.contains("open in process \(getpid())"))
        let list = try runTool(["ls", path, "--json"])
        #expect(list.status == 0)
        #expect(try JSONSerialization.jsonObject(with: list.stdout) as? [Any] != nil)  // stdout is only the JSON
        #expect(try runTool(["show", path, "alpha"]).status == 0)
        #expect(try runTool(["get", path, "beta"]).stdout == SmallCache.beta)

        // Written by the open cache after the command started: the next command sees it.
        try cache.store(Data("later".utf8), for: "later")
        #expect(try runTool(["get", path, "later"]).stdout == Data("later".utf8))

    }

    /// `verify`, and `verify --repair`, while the process that has the cache open (this one)
    /// keeps replacing, removing and compacting: what changes while it reads is no finding.
    @Test func verifyDuringWritesFindsNothing() throws {
        let directory = TemporaryDirectory()
        let writer = try BackgroundWriter(directory.cache)
        defer { writer.stop() }
        for _ in 0..<5 {
            let result = try runTool(["verify", directory.cache.path])
            #expect(result.status == 0, "\(result.output)")
            #expect(result.output.contains("no problems"), "\(result.output)")
        }
        let repair = try runTool(["verify", directory.cache.path, "--repair"])
        #expect(repair.status == 0, "\(repair.output)")
    }

    /// How the write the next test holds up ends.
    enum HeldUpWrite: CaseIterable, Sendable {
        /// Without the file: it was the writer's, and the verify must not report it.
        case endsWithoutTheFile
        /// With the file left in place: an orphan, reported.
        case leavesTheFile
        /// Not before the verify gives up waiting: a note names the file, which is no problem.
        case outlastsTheVerify
    }

    /// `verify` of a cache its instances share while a writer of one key is held up between
    /// writing a file and committing it, for longer than the verify's snapshots are apart (as a
    /// writer descheduled there, or waiting for the filesystem, would be): the key's stripe is
    /// held over a file no record vouches for until the verify is seen trying to take it (it
    /// holds `SHARED`'s opening lock while it tries).
    @Test(arguments: HeldUpWrite.allCases)
    func verifyWaitsForAWriterHeldUpInASharedCache(write: HeldUpWrite) throws {
        let directory = TemporaryDirectory()
        let cache = try openCache(directory.cache)
        defer { try? closeCache(cache) }
        try cache.store(Data("committed".utf8), for: "k")
        let hash = cache.configuration.keyHasher.hash("k")
        let committedSlot = try #require(cache.state.withLock { $0.index[hash]?.slot })
        let pending = cache.layout.metaFile(hash, slot: 1 - committedSlot)
        let shared = open(directory.cache.path + "/" + SharedRegion.fileName, O_RDWR | O_CLOEXEC)
        try #require(shared >= 0)
        defer { close(shared) }
        let verified = LockedResult()
        let path = directory.cache.path
        var result: ToolResult?
        var failure: (any Error)?
        try cache.withStripe(hash) { () throws(DiskCacheError) in
            do {
                _ = FileManager.default.createFile(atPath: pending, contents: Data("not committed yet".utf8))
                Thread.detachNewThread { verified.set(Result { try runTool(["verify", path]) }) }
                // The verify holds the opening lock only while it tries the stripe: look for it.
                var seen = false
                let deadline = Date().addingTimeInterval(60)
                while !seen && Date() < deadline && !verified.isSet {
                    switch SharedRegion.range(shared, start: SharedRegion.Lock.opening.rawValue, length: 1, .exclusive, wait: false) {
                    case .success: _ = SharedRegion.range(shared, start: SharedRegion.Lock.opening.rawValue, length: 1, .unlock, wait: false)
                    case .failure: seen = true
                    }
                    usleep(100)
                }
                #expect(seen && !verified.isSet, "the verify never tried the key's stripe")
                switch write {
                case .endsWithoutTheFile: unlink(pending)
                case .leavesTheFile: break
                case .outlastsTheVerify: result = try verified.wait(seconds: 60)?.get()
                }
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        result = try result ?? verified.wait(seconds: 60)?.get()
        let output = try #require(result, "the verify did not finish").output
        switch write {
        case .endsWithoutTheFile:
            #expect(result?.status == 0 && output.contains("no problems") && !output.contains("could not be settled"), "\(output)")
        case .leavesTheFile:
            #expect(result?.status != 0 && output.contains("orphanFile") && output.contains(pending), "\(output)")
        case .outlastsTheVerify:
            #expect(result?.status == 0 && !output.contains("orphanFile"), "\(output)")
            #expect(output.contains("1 file no journal record vouched for could not be settled") && output.contains(pending), "\(output)")
        }
    }

    /// `get` while the process that has the cache open (this one) keeps replacing and removing
    /// values, one a millisecond: every output is a whole value stored for its key; otherwise
    /// the command says there is no entry, or that the entry kept changing while it was read (a
    /// snapshot reader can lose that race to a busy writer); never other bytes. Runs until 21
    /// whole values were read (at most 20 s), and asks for more than 5.
    @Test func getDuringWritesReturnsWholeValuesOnly() throws {
        let directory = TemporaryDirectory()
        // Paced: unpaced, each key is rewritten every few dozen microseconds, and a snapshot
        // reader (a new process that replays the journal, then reads the files) nearly always
        // finds its entry replaced (1 whole value in 3 s, run alone).
        // A reader that keeps being overtaken (a slow machine, a sanitizer) slows the writer
        // down, so that the verdict never depends on how fast the reads happen to run.
        let writer = try BackgroundWriter(directory.cache, pause: 1_000)
        defer { writer.stop() }
        var values = 0
        for _ in 0..<400 {
            if values > 20 { break }
            let k = Int.random(in: 0..<5)
            let result = try runTool(["get", directory.cache.path, "key-\(k)"])
            if result.status == 4 { continue }
            if result.status == 5 {
                #expect(result.stderr.contains("kept changing while it was read"), "\(result.stderr)")
                writer.slowDown()
                continue
            }
            #expect(result.status == 0, "\(result.stderr)")
            guard result.status == 0 else { break }
            let text = String(decoding: result.stdout.prefix(40), as: UTF8.self)
            let fields = text.split(separator: "|")
            #expect(fields.first == "key-\(k)", "\(text)")
            if let version = fields.dropFirst().first.flatMap({ Int($0) }) {
                #expect(result.stdout == BackgroundWriter.payload(k: k, version: version))
                values += 1
            }
        }
        #expect(values > 5)
    }
}

/// A tool run's result, set by one thread and waited for by another.
final class LockedResult: @unchecked Sendable {  // unchecked: `result` is guarded by `lock`
    private let lock = NSLock()
    private let done = DispatchSemaphore(value: 0)
    private var result: Result<ToolResult, any Error>?
    var isSet: Bool { lock.withLock { result != nil } }
    func set(_ value: Result<ToolResult, any Error>) {
        lock.withLock { result = value }
        done.signal()
    }
    /// The result, once set within `seconds`; nil if it was not.
    func wait(seconds: Int) -> Result<ToolResult, any Error>? {
        guard done.wait(timeout: .now() + .seconds(seconds)) == .success else { return nil }
        done.signal()  // for the next wait
        return lock.withLock { result }
    }
}

final class LockedStatuses: @unchecked Sendable {  // unchecked: `statuses` is guarded by `lock`
    private let lock = NSLock()
    private var statuses: [Int32] = []
    func append(_ status: Int32) { lock.withLock { statuses.append(status) } }
    var values: [Int32] { lock.withLock { statuses } }
}

/// A thread of this process that keeps a cache open and, until stopped, stores and sometimes
/// removes versions of "key-0" … "key-4": "key-k|version|" then bytes that follow from the two.
final class BackgroundWriter: @unchecked Sendable {  // unchecked: `running` is guarded by `lock`
    private let lock = NSLock()
    private var running = true
    /// Microseconds between two operations.
    private var pause: useconds_t
    private let done = DispatchSemaphore(value: 0)

    static func payload(k: Int, version: Int) -> Data {
        var bytes = Array("key-\(k)|\(version)|".utf8)
        for i in 0..<(10_000 + version % 5_000) { bytes.append(UInt8(truncatingIfNeeded: i &* version &+ k)) }
        return Data(bytes)
    }

    /// `pause`: microseconds between two operations (none by default: as fast as it can).
    init(_ url: URL, pause: useconds_t = 0) throws {
        self.pause = pause
        let cache = try openCache(url)
        for k in 0..<5 { try cache.store(Self.payload(k: k, version: 0), for: "key-\(k)") }
        Thread.detachNewThread { [self] in
            var version = 0
            while lock.withLock({ running }) {
                version += 1
                let k = version % 5
                if version % 7 == 0 {
                    try? cache.removeValue(for: "key-\(k)")
                } else {
                    _ = try? cache.store(Self.payload(k: k, version: version), for: "key-\(k)")
                }
                if version % 500 == 0 { try? cache.compact() }
                let pause = lock.withLock { self.pause }
                if pause > 0 { usleep(pause) }
            }
            try? closeCache(cache)
            done.signal()
        }
    }

    /// Doubles the pause between operations (1 ms at least, 250 ms at most).
    func slowDown() {
        lock.withLock { pause = min(250_000, max(1_000, pause * 2)) }
    }

    func stop() {
        lock.withLock { running = false }
        done.wait()
    }
}

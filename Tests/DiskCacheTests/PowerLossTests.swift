// The file system's test hooks (FileSystemObservers) exist in debug builds only.
#if DEBUG
@testable import DiskCache
import DiskCacheLocking
import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Power cuts under the strict persistence model (see `PowerLossModel.swift`): a seeded random
/// sequence of operations is run on a real cache while every file-system call is recorded; then,
/// for every event index (identical states checked once), the state a power cut there would
/// leave is written to a fresh directory, a cache is opened on it, and every key is read.
///
/// Checked at every cut, in every mode:
/// - the cache opens, a new value can be stored and read back, and it closes;
/// - every read returns nil or bytes stored for that key (never another key's, never garbage),
///   by `data(for:)` and by `dataAndEntry(for:)`, and both agree;
/// - after the reads, `verify()` finds nothing (the damage a cut leaves is repaired by the open
///   and the reads), apart from the journal repairs the open reports;
/// - `.immediate`: every operation acknowledged before the cut is reflected: a key holds the
///   value of its last acknowledged operation (absent after a removal), or that of an operation
///   in flight at the cut;
/// - `.none` and `.batched` (a one-hour interval, so only explicit syncs happen): after a
///   `flush()` (or, in `.batched`, a `close()`) that returned, every key holds the value it had
///   then, unless a later operation touched it (then: that value, a later one, or nothing).
///
/// Each cut is checked in the strict model (nothing unsynced survives) and in variants that keep
/// some of what was not synced: every unsynced directory change but no unsynced data ("names
/// first"), the reverse ("data first"), and, at every other cut, for each file and directory a
/// random prefix of its unsynced changes (torn journal tails, partly written files, some
/// renames and unlinks but not others). Identical states with identical expectations are
/// checked once.
///
/// A failure names the seed, the cut and the variant: `POWERLOSS_SEED=<seed>` runs that seed
/// alone, `POWERLOSS_SEEDS=<n>` runs n seeds per test instead of the default.
///
/// Serialized, and each scenario on a thread of its own (`onOwnThread`): these checks are long
/// and synchronous, and on the test runner's pool they would hold its threads (two on a 2-core
/// machine) for minutes, starving the HTTP tests (whose timeouts and `Age` checks then fail).
/// A scenario checks its states on one thread per core (`POWERLOSS_WORKERS=<n>` to change): the
/// suite runs longest of all, and one check at a time left a core idle once the others ended.
@Suite(.serialized)
struct PowerLossTests {
    static let defaultSeeds: [UInt64] = [1, 2, 3]

    static var seeds: [UInt64] {
        let environment = ProcessInfo.processInfo.environment
        if let seed = environment["POWERLOSS_SEED"].flatMap(UInt64.init) { return [seed] }
        if let count = environment["POWERLOSS_SEEDS"].flatMap(Int.init) { return (1...UInt64(max(1, count))).map { $0 } }
        return defaultSeeds
    }

    /// The cache directory and its missing parents are made by the library (base/a/b/cache,
    /// where only base exists).
    @Test(arguments: PowerLossScenario.Mode.allCases, PowerLossScenario.Sharing.allCases)
    func randomSequencesInADirectoryTheLibraryCreates(mode: PowerLossScenario.Mode, sharing: PowerLossScenario.Sharing) async throws {
        try await runSeeds(mode, sharing, cachePath: "a/b/cache", cacheDirectoryExists: false)
    }

    /// The cache directory exists (and is durable) before the cache first opens it; the
    /// operations differ from those of the test above for the same seed.
    @Test(arguments: PowerLossScenario.Mode.allCases, PowerLossScenario.Sharing.allCases)
    func randomSequencesInAnExistingDirectory(mode: PowerLossScenario.Mode, sharing: PowerLossScenario.Sharing) async throws {
        try await runSeeds(mode, sharing, cachePath: "cache", cacheDirectoryExists: true)
    }

    /// The scenario of every seed, on a thread of its own (see the suite's comment).
    private func runSeeds(_ mode: PowerLossScenario.Mode, _ sharing: PowerLossScenario.Sharing, cachePath: String,
                          cacheDirectoryExists: Bool) async throws {
        try await onOwnThread {
            for seed in Self.seeds {
                try PowerLossScenario(mode: mode, sharing: sharing, seed: seed, cachePath: cachePath,
                                      cacheDirectoryExists: cacheDirectoryExists).runAndCheck()
            }
        }
    }

    /// The smallest case of the directory the library creates: in `.immediate` mode, a store
    /// that returned must survive, and so must the directory it went to.
    @Test func acknowledgedStoreSurvivesInADirectoryTheLibraryCreated() throws {
        let scenario = PowerLossScenario(mode: .immediate, sharing: .shared, seed: 0, cachePath: "a/b/cache", cacheDirectoryExists: false,
                                         operations: [.open, .store(key: 0, size: 10)], randomPrefixEvery: 0)
        try scenario.runAndCheck()
    }

    /// `flush()` in `.none` mode: what was acknowledged before it survives a cut anywhere after it.
    @Test func flushMakesEverythingBeforeItDurable() throws {
        let scenario = PowerLossScenario(mode: .none, sharing: .shared, seed: 0, cachePath: "cache", cacheDirectoryExists: true,
                                         operations: [.open, .store(key: 0, size: 10), .store(key: 1, size: 3000),
                                                      .store(key: 2, size: 20), .remove(key: 2), .flush,
                                                      .store(key: 0, size: 4000), .store(key: 3, size: 5), .remove(key: 1)],
                                         randomPrefixEvery: 1)
        try scenario.runAndCheck()
    }

    /// The model itself: unsynced data and names are lost, synced ones kept, a rename between
    /// directories can leave both names or neither, hard links share an inode.
    @Test func modelKeepsOnlyWhatWasSynced() throws {
        let dir = TemporaryDirectory(inMemory: true)
        let base = dir.path + "/base"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        let recorder = try FileSystemRecorder(base: base)
        func ok(_ result: Result<some Any, SyscallError>) throws { _ = try result.get() }
        try ok(Syscall.mkdir(base + "/d"))
        let fd = try Syscall.open(base + "/d/f", O_WRONLY | O_CREAT | O_EXCL).get()
        _ = [UInt8]("hello".utf8).withUnsafeBytes { Syscall.pwriteAll(fd, $0, at: 0) }
        try ok(Syscall.fsync(fd))
        _ = [UInt8](" world".utf8).withUnsafeBytes { Syscall.pwriteAll(fd, $0, at: 5) }
        Syscall.close(fd)
        let afterWrites = recorder.count
        try ok(Syscall.fsyncDirectory(base))  // d's name is durable; f's name is not yet
        let afterBaseSync = recorder.count
        try ok(Syscall.fsyncDirectory(base + "/d"))
        let afterDirectorySync = recorder.count
        try ok(Syscall.link(base + "/d/f", base + "/g"))
        try ok(Syscall.rename(base + "/d/f", base + "/h"))
        try ok(Syscall.fsyncDirectory(base))  // g and h durable, d/f still there in d
        let afterRename = recorder.count
        try ok(Syscall.unlink(base + "/g"))
        try ok(Syscall.unlink(base + "/h"))
        try ok(Syscall.rmdir(base + "/d"))
        let events = recorder.stop()

        var model = try FileSystemModel(snapshotOf: base)
        func image(at cut: Int) -> CrashImage {
            var copy = model
            copy.apply(events[copy.applied..<cut])
            return copy.crashImage()
        }
        #expect(image(at: afterWrites).summary == "")
        #expect(image(at: afterBaseSync).summary == "d/")
        #expect(image(at: afterDirectorySync).summary == "d/, d/f (5 bytes)")
        let renamed = image(at: afterRename)
        #expect(renamed.summary == "d/, d/f (5 bytes), g (5 bytes), h (5 bytes)")
        #expect(Set(renamed.files.map(\.inode)).count == 1)
        #expect(image(at: events.count).summary == "d/, d/f (5 bytes), g (5 bytes), h (5 bytes)")
        model.apply(events)
        #expect(model.anomalies.isEmpty, "\(model.anomalies)")
        #expect(model.currentImage().summary == "")
    }
}

// MARK: - Scenarios

/// One run: operations on a real cache under a recorder, then a check at every cut.
struct PowerLossScenario {
    enum Mode: String, CaseIterable, CustomStringConvertible, Sendable {
        case none, batched, immediate
        var description: String { rawValue }
        var durability: DiskCache.Durability {
            switch self {
            case .none: return .none
            // Long enough that no timer fires: only flush, close and compaction sync.
            case .batched: return .batched(interval: .seconds(3600))
            case .immediate: return .immediate
            }
        }
    }

    /// How the cache is opened while recording, and after each cut.
    enum Sharing: String, CaseIterable, CustomStringConvertible, Sendable {
        /// `.exclusive`: one instance.
        case exclusive
        /// `.shared` (the default): two instances on the one directory, each operation made by
        /// one of them (chosen by the seed; a `flush()` too), every open and close made by both.
        /// After a cut, the instance that recovers is joined by a second, and each read is
        /// made through both.
        case shared
        var description: String { rawValue }
        var configurationValue: DiskCache.Sharing { self == .exclusive ? .exclusive : .shared }
        var instances: Int { self == .exclusive ? 1 : 2 }
    }

    enum Operation: CustomStringConvertible {
        case open
        case close
        case store(key: Int, size: Int)
        /// The same value written through a `Writer` in two appends, then committed.
        case storeStreamed(key: Int, size: Int)
        /// The same value copied in from a file outside the cache (`store(contentsOf:)`).
        case storeFile(key: Int, size: Int)
        case remove(key: Int)
        case removeAll
        case updateMetadata(key: Int)
        case compact
        /// Lowers the disk capacity under what the cache holds, sweeps, raises it again.
        case sweep
        case verifyRepair
        case flush

        var description: String {
            switch self {
            case .open: return "open"
            case .close: return "close"
            case .store(let key, let size): return "store(\(PowerLossScenario.key(key)), \(size) bytes)"
            case .storeStreamed(let key, let size): return "Writer(\(PowerLossScenario.key(key)), \(size) bytes)"
            case .storeFile(let key, let size): return "store(contentsOf:, \(PowerLossScenario.key(key)), \(size) bytes)"
            case .remove(let key): return "removeValue(\(PowerLossScenario.key(key)))"
            case .removeAll: return "removeAll"
            case .updateMetadata(let key): return "updateMetadata(\(PowerLossScenario.key(key)))"
            case .compact: return "compact"
            case .sweep: return "sweep"
            case .verifyRepair: return "verify(repair: true)"
            case .flush: return "flush"
            }
        }
    }

    static let keyCount = 5
    static func key(_ number: Int) -> String { "key-\(number)" }

    let mode: Mode
    let sharing: Sharing
    let seed: UInt64
    /// Relative to the base directory.
    let cachePath: String
    /// Whether the test makes the cache directory before recording (so that it is durable);
    /// otherwise the library makes it and its missing parents.
    let cacheDirectoryExists: Bool
    let operations: [Operation]
    let inlineThreshold: Int
    /// Cuts are checked strictly and, unless this is 0, with names first and data first; every
    /// n-th cut also with a random prefix of the unsynced changes.
    let randomPrefixEvery: Int

    init(mode: Mode, sharing: Sharing, seed: UInt64, cachePath: String, cacheDirectoryExists: Bool,
         operations: [Operation]? = nil, inlineThreshold: Int? = nil, randomPrefixEvery: Int = 2) {
        self.mode = mode
        self.sharing = sharing
        self.seed = seed
        self.cachePath = cachePath
        self.cacheDirectoryExists = cacheDirectoryExists
        var random = SplitMix64(seed: seed ^ (cacheDirectoryExists ? 0xE715_7ED0 : 0))
        // All inline, a mix (small bodies inline, larger ones in files), none inline.
        self.inlineThreshold = inlineThreshold ?? [1 << 16, 100, 0][Int(random.next() % 3)]
        self.operations = operations ?? Self.randomOperations(&random, mode: mode)
        self.randomPrefixEvery = randomPrefixEvery
    }

    static func randomOperations(_ random: inout SplitMix64, mode: Mode, count: Int = 16) -> [Operation] {
        var operations: [Operation] = [.open]
        func key() -> Int { Int(random.next() % UInt64(keyCount)) }
        for index in 0..<count {
            if index == count / 2 {
                operations.append(.flush)
                continue
            }
            switch random.next() % 100 {
            case 0..<30: operations.append(.store(key: key(), size: 1 + Int(random.next() % 60)))
            case 30..<40: operations.append(.store(key: key(), size: 200 + Int(random.next() % 3000)))
            case 40..<45: operations.append(.storeStreamed(key: key(), size: 1 + Int(random.next() % 3000)))
            case 45..<50: operations.append(.storeFile(key: key(), size: 1 + Int(random.next() % 3000)))
            case 50..<62: operations.append(.remove(key: key()))
            case 62..<67: operations.append(.updateMetadata(key: key()))
            case 67..<71: operations.append(.removeAll)
            case 71..<77: operations.append(.compact)
            case 77..<83: operations.append(.sweep)
            case 83..<87: operations.append(.verifyRepair)
            case 87..<93: operations.append(.flush)
            default: operations.append(contentsOf: [.close, .open])
            }
        }
        operations.append(.close)
        return operations
    }

    /// What one operation did, as the checks see it.
    struct Acknowledgement {
        var operation: String
        /// The index of its first event, and of the first event after it returned (nil: it threw).
        var start: Int
        var end: Int?
        /// key number → the version it stored (nil: the key was removed).
        var effects: [Int: Int?]
        /// Everything acknowledged before it is durable once it returns.
        var isBarrier: Bool
    }

    var label: String {
        "mode \(mode), sharing \(sharing) (\(sharing.instances) instance\(sharing.instances == 1 ? "" : "s")), seed \(seed), inlineThreshold \(inlineThreshold), cache at base/\(cachePath)"
            + (cacheDirectoryExists ? " (made before recording)" : " (made by the library)")
    }

    // MARK: Recording

    struct Recording {
        var events: [FileSystemEvent]
        var initial: FileSystemModel
        var acknowledgements: [Acknowledgement]
        /// version → (key number, bytes).
        var values: [Int: (key: Int, data: Data)]
        var problems: [String]
    }

    func configuration(durability: DiskCache.Durability, clock: ManualClock?,
                       evictions: Locked<[String]>? = nil) -> DiskCache.Configuration {
        var configuration = DiskCache.Configuration.testing(durability: durability, inlineThreshold: inlineThreshold, clock: clock)
        configuration.sharing = sharing.configurationValue
        configuration.sweepInterval = nil
        configuration.maintenanceInterval = .seconds(3600)
        configuration.minimumFreeSpace = 0
        configuration.minimumFreeFraction = 0
        configuration.diskCapacity = 1 << 40
        if let evictions {
            configuration.onEviction = { eviction in
                if let key = eviction.key { evictions.withLock { $0.append(key) } }
            }
        }
        return configuration
    }

    func record(base: String) throws -> Recording {
        let cacheURL = URL(fileURLWithPath: base + "/" + cachePath)
        let sourceDirectory = URL(fileURLWithPath: base + "-sources")
        try FileManager.default.createDirectory(at: sourceDirectory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: sourceDirectory) }
        if cacheDirectoryExists {
            try FileManager.default.createDirectory(at: cacheURL, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
        let clock = ManualClock()
        let evictions = Locked<[String]>([])
        let configuration = configuration(durability: mode.durability, clock: clock, evictions: evictions)
        let recorder = try FileSystemRecorder(base: base)
        defer { recorder.stop() }
        /// Open instances (none, or `sharing.instances`); each operation is made by one of them.
        var caches: [DiskCache] = []
        var chooser = SplitMix64(seed: seed ^ 0x5_4A2E)
        var acknowledgements: [Acknowledgement] = []
        var values: [Int: (key: Int, data: Data)] = [:]
        var problems: [String] = []
        var nextVersion = 1
        var metadataVersion = 0
        /// The version each key holds now (absent: no value).
        var holds: [Int: Int] = [:]
        for operation in operations {
            clock.advance(seconds: 1)
            evictions.withLock { $0.removeAll() }
            var effects: [Int: Int?] = [:]
            var isBarrier = false
            let start = recorder.count
            var end: Int?
            let cache = caches.isEmpty ? nil : caches[Int(chooser.next() % UInt64(caches.count))]
            do {
                switch operation {
                case .open:
                    for _ in 0..<sharing.instances { caches.append(try DiskCache(directory: cacheURL, configuration: configuration)) }
                case .close:
                    defer { caches = [] }
                    for cache in caches { try cache.close() }
                    isBarrier = mode != .none
                case .store(let key, let size), .storeStreamed(let key, let size), .storeFile(let key, let size):
                    let version = nextVersion
                    nextVersion += 1
                    var data = Data("\(Self.key(key))|\(version)|".utf8)
                    data.append(randomData(count: size, seed: seed &* 1_000_003 &+ UInt64(version)))
                    values[version] = (key, data)
                    effects[key] = version
                    switch operation {
                    case .storeStreamed:
                        let writer = try cache?.makeWriter(for: Self.key(key))
                        try writer?.append(data.prefix(data.count / 2))
                        try writer?.append(data.dropFirst(data.count / 2))
                        try writer?.commit()
                    case .storeFile:
                        // Outside the recorded base directory: only the cache's own files are modelled.
                        let source = sourceDirectory.appendingPathComponent("source-\(version)")
                        try data.write(to: source)
                        try cache?.store(contentsOf: source, for: Self.key(key))
                    default:
                        try cache?.store(data, for: Self.key(key))
                    }
                case .remove(let key):
                    effects[key] = .some(nil)
                    try cache?.removeValue(for: Self.key(key))
                case .removeAll:
                    for key in 0..<Self.keyCount { effects[key] = .some(nil) }
                    try cache?.removeAll()
                case .updateMetadata(let key):
                    metadataVersion += 1
                    // A write of the key that keeps its value (the body is linked, not copied).
                    if let version = holds[key] { effects[key] = version }
                    try cache?.updateMetadata(["revision": "\(metadataVersion)"], for: Self.key(key))
                case .compact:
                    try cache?.compact()
                case .sweep:
                    if let cache {
                        cache.diskCapacity = cache.totalSize * 6 / 10
                        cache.sweep()
                        cache.diskCapacity = 1 << 40
                    }
                case .verifyRepair:
                    if let report = try cache?.verify(repair: true), !report.isHealthy {
                        problems.append("\(operation) found problems in a cache nothing happened to: \(report.problems)")
                    }
                case .flush:
                    // One instance's flush (a syncfs and the journal's fdatasync) makes what
                    // every instance acknowledged before it durable.
                    try cache?.flush()
                    isBarrier = true
                }
                end = recorder.count
            } catch {
                problems.append("\(operation) threw \(error)")
            }
            if case .removeAll = operation {
                // Wait for the background removal of the trash, so that it does not interleave
                // with the next operation (a sweep with nothing to do runs on the same queue).
                cache?.sweep()
            }
            for key in evictions.withLock({ $0 }) {
                if let number = (0..<Self.keyCount).first(where: { Self.key($0) == key }) { effects[number] = .some(nil) }
            }
            for (key, version) in effects { holds[key] = version }
            acknowledgements.append(Acknowledgement(operation: "\(operation)", start: start, end: end,
                                                    effects: effects, isBarrier: isBarrier))
        }
        for cache in caches { try cache.close() }
        caches = []
        let events = recorder.stop()
        // The model must follow the real files exactly, or what it says about a cut means nothing.
        var model = recorder.initial
        model.apply(events)
        problems += model.anomalies.map { "model: \($0)" }
        let real = try FileSystemModel(snapshotOf: base).currentImage()
        let modelled = model.currentImage()
        if real.fingerprint != modelled.fingerprint {
            problems.append("the model does not match the real files after the run:\n  real:  \(real.summary)\n  model: \(modelled.summary)")
        }
        return Recording(events: events, initial: recorder.initial, acknowledgements: acknowledgements,
                         values: values, problems: problems)
    }

    // MARK: Checking

    /// The states a key may be in after a cut at `cut`: versions, nil for "no value".
    func allowedStates(key: Int, cut: Int, _ acknowledgements: [Acknowledgement]) -> Set<Int?> {
        let touching = acknowledgements.filter { $0.effects[key] != nil && $0.start < cut }
        func state(_ acknowledgement: Acknowledgement?) -> Int? { acknowledgement.flatMap { $0.effects[key]! } }
        if mode == .immediate {
            let lastIndex = touching.lastIndex { $0.end.map { $0 <= cut } ?? false }
            var allowed: Set<Int?> = [state(lastIndex.map { touching[$0] })]
            for later in touching[(lastIndex.map { $0 + 1 } ?? 0)...] { allowed.insert(state(later)) }
            return allowed
        }
        guard let barrier = acknowledgements.last(where: { $0.isBarrier && ($0.end.map { $0 <= cut } ?? false) }) else {
            return Set(touching.map(state)).union([nil])
        }
        let before = touching.last { ($0.end.map { $0 <= barrier.start } ?? false) }
        let after = touching.filter { $0.start >= barrier.start }
        var allowed: Set<Int?> = [state(before)]
        if !after.isEmpty {
            allowed.insert(nil)
            for acknowledgement in after { allowed.insert(state(acknowledgement)) }
        }
        // An operation before the barrier that threw may or may not have happened.
        for failed in touching where failed.end == nil && failed.start < barrier.start { allowed.insert(state(failed)) }
        return allowed
    }

    func describe(_ version: Int?) -> String { version.map { "version \($0)" } ?? "no value" }

    /// Opens a cache on a materialised cut and checks it; returns what is wrong.
    func check(image: CrashImage, at root: String, cut: Int, variant: FileSystemModel.CrashVariant,
               recording: Recording, readEntryFirst: Bool) -> [String] {
        var failures: [String] = []
        let context = "cut \(cut) (\(variant))"
        do {
            try image.materialise(at: root)
        } catch {
            return ["\(context): could not materialise: \(error)"]
        }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let cache: DiskCache
        do {
            cache = try DiskCache(directory: URL(fileURLWithPath: root + "/" + cachePath),
                                  configuration: configuration(durability: DiskCache.Durability.none, clock: nil))
        } catch {
            return ["\(context): the cache does not open: \(error)"]
        }
        // Shared: a second instance joins the one that recovered, and reads through it too.
        var joined: DiskCache?
        if sharing == .shared {
            do {
                joined = try DiskCache(directory: URL(fileURLWithPath: root + "/" + cachePath),
                                       configuration: configuration(durability: DiskCache.Durability.none, clock: nil))
            } catch {
                failures.append("\(context): a second instance does not join the first: \(error)")
            }
        }
        let other = joined ?? cache
        for key in 0..<Self.keyCount {
            let name = Self.key(key)
            let first = readEntryFirst ? cache.dataAndEntry(for: name)?.data : cache.data(for: name)
            let second = readEntryFirst ? other.data(for: name) : other.dataAndEntry(for: name)?.data
            if first != second {
                failures.append("\(context): \(name): data(for:) and dataAndEntry(for:) disagree"
                                + (joined == nil ? "" : " (the second through the joined instance)"))
            }
            var found: Int?
            if let first {
                guard let version = recording.values.first(where: { $0.value.data == first })?.key else {
                    failures.append("\(context): \(name) read \(first.count) bytes that were never stored")
                    continue
                }
                guard recording.values[version]!.key == key else {
                    failures.append("\(context): \(name) read the bytes of \(Self.key(recording.values[version]!.key))")
                    continue
                }
                found = version
            }
            let allowed = allowedStates(key: key, cut: cut, recording.acknowledgements)
            if !allowed.contains(found) {
                let expected = allowed.map(describe).sorted().joined(separator: " or ")
                failures.append("\(context): \(name) holds \(describe(found)), expected \(expected)")
            }
        }
        let probe = Data("probe after cut \(cut)".utf8)
        do {
            try cache.store(probe, for: "probe")
            if cache.data(for: "probe") != probe { failures.append("\(context): a value stored after the cut does not read back") }
        } catch {
            failures.append("\(context): storing after the cut failed: \(error)")
        }
        do {
            let report = try cache.verify()
            // What the open repaired is reported, not left. In `.none` mode `close()` appends
            // its clean-shutdown record without syncing the session's renames and unlinks first
            // (docs/durability.md), so a cut can keep the record and lose an unlink: the next
            // open sees a clean shutdown and skips the orphan scan. Such files are never served.
            let left = report.problems.filter { problem in
                problem.kind != .journalTornTail && problem.kind != .journalCorruptRegion
                    && !(mode == .none && problem.kind == .orphanFile)
            }
            if !left.isEmpty {
                let leak = left.allSatisfy { $0.kind == .orphanFile }
                    ? " (files no journal record vouches for outlived the open: the orphan scan did not run)" : ""
                failures.append("\(context): verify after the reads found \(left)\(leak)")
            }
        } catch {
            failures.append("\(context): verify failed: \(error)")
        }
        for instance in [joined, cache].compactMap({ $0 }) {
            do {
                try instance.close()
            } catch {
                failures.append("\(context): close failed: \(error)")
            }
        }
        return failures
    }

    /// What was going on at `cut`, for failure messages.
    func timeline(_ acknowledgements: [Acknowledgement], around cut: Int) -> String {
        acknowledgements.map { acknowledgement in
            let end = acknowledgement.end.map(String.init) ?? "threw"
            let marker = acknowledgement.start < cut && (acknowledgement.end.map { $0 > cut } ?? true) ? "  <- in flight"
                : acknowledgement.end.map { $0 <= cut } ?? false ? "" : "  (after the cut)"
            return "    [\(acknowledgement.start)..<\(end)] \(acknowledgement.operation)\(marker)"
        }.joined(separator: "\n")
    }

    struct Outcome {
        var events = 0
        var checks = 0
        var failures: [String] = []
        var failedCuts: [Int] = []
    }

    /// One distinct state to check: the crash image a cut leaves in one variant.
    private struct Job {
        var image: CrashImage
        var cut: Int
        var number: Int
        var variant: FileSystemModel.CrashVariant
    }

    /// How many states are checked at once: one per core (`POWERLOSS_WORKERS` to change). The
    /// checks are independent (each opens a cache on a directory of its own) and most of the
    /// suite's time; one at a time, they left a core idle for most of the test run.
    static var workers: Int {
        ProcessInfo.processInfo.environment["POWERLOSS_WORKERS"].flatMap(Int.init).map { max(1, $0) }
            ?? max(1, ProcessInfo.processInfo.activeProcessorCount)
    }

    func run() throws -> Outcome {
        let dir = TemporaryDirectory("PowerLoss-\(mode)-\(seed)", inMemory: true)
        let base = dir.path + "/base"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        let recording = try record(base: base)
        var outcome = Outcome(events: recording.events.count)
        outcome.failures += recording.problems.map { "recording: \($0)" }
        var model = recording.initial
        var seen = Set<[Int]>()
        let skipped = Self.cutsInsideDirectoryRuns(recording.events)
        // The states are found in order (the model applies one event per cut), then checked a
        // batch at a time on `workers` threads; failures are reported in the order of the cuts.
        var batch: [Job] = []
        func checkBatch() {
            let results = Self.inParallel(batch.count) { index in
                let job = batch[index]
                return check(image: job.image, at: dir.path + "/cut-\(job.cut)-\(job.number)", cut: job.cut, variant: job.variant,
                             recording: recording, readEntryFirst: (job.cut + job.number) % 2 == 0)
            }
            for (job, failures) in zip(batch, results) where !failures.isEmpty {
                if outcome.failedCuts.isEmpty {
                    outcome.failures.append("first failing cut \(job.cut) (\(job.variant)); operations by event index:\n"
                                            + timeline(recording.acknowledgements, around: job.cut)
                                            + "\n    files after the cut: \(job.image.summary)")
                }
                outcome.failedCuts.append(job.cut)
                outcome.failures += failures
            }
            batch.removeAll()
        }
        for cut in 0...recording.events.count {
            if cut > 0 { model.apply(recording.events[cut - 1]) }
            if skipped.contains(cut) { continue }
            // Operations acknowledged and started by the cut: what the expectations depend on.
            let acknowledged = recording.acknowledgements.filter { $0.end.map { $0 <= cut } ?? false }.count
            let started = recording.acknowledgements.filter { $0.start < cut }.count
            var variants: [FileSystemModel.CrashVariant] = [.strict]
            if randomPrefixEvery > 0 {
                variants += [.namesFirst, .dataFirst]
                if cut % randomPrefixEvery == 0 { variants.append(.prefix(seed: seed &* 7919 &+ UInt64(cut))) }
            }
            for (number, variant) in variants.enumerated() {
                let image = model.crashImage(variant)
                guard seen.insert([image.fingerprint, acknowledged, started]).inserted else { continue }
                outcome.checks += 1
                batch.append(Job(image: image, cut: cut, number: number, variant: variant))
                if batch.count == 64 { checkBatch() }
            }
        }
        checkBatch()
        return outcome
    }

    private struct UncheckedSendable<Value>: @unchecked Sendable {
        let value: Value
        init(_ value: Value) { self.value = value }
    }

    /// `body(0..<count)` on `workers` threads at once, the results in index order.
    static func inParallel(_ count: Int, _ body: (Int) -> [String]) -> [[String]] {
        guard count > 0 else { return [] }
        let state = PthreadMutex((next: 0, results: [[String]](repeating: [], count: count)))
        withoutActuallyEscaping(body) { body in
            // Each check reads the recording and writes a directory of its own: nothing shared is written.
            let work = UncheckedSendable(body)
            DispatchQueue.concurrentPerform(iterations: min(workers, count)) { _ in
                while true {
                    let index = state.withLock { state -> Int? in
                        guard state.next < count else { return nil }
                        defer { state.next += 1 }
                        return state.next
                    }
                    guard let index else { return }
                    let failures = work.value(index)
                    state.withLock { $0.results[index] = failures }
                }
            }
        }
        return state.withLock { $0.results }
    }

    /// Cuts strictly inside a run of consecutive `mkdir`s (the 256 shard directories an open or
    /// `removeAll` makes) that are checked no more: a cut after the first and one halfway stay.
    /// The states in between differ only in how many empty shards exist, and each costs an open.
    static func cutsInsideDirectoryRuns(_ events: [FileSystemEvent]) -> Set<Int> {
        var skipped = Set<Int>()
        var index = 0
        while index < events.count {
            guard case .mkdir = events[index] else { index += 1; continue }
            var end = index
            while end < events.count, case .mkdir = events[end] { end += 1 }
            // Events index..<end are mkdirs; cuts index+1 ..< end fall inside the run.
            if end - index > 3 {
                let keep: Set<Int> = [index + 1, (index + end) / 2]
                for cut in (index + 1)..<end where !keep.contains(cut) { skipped.insert(cut) }
            }
            index = end
        }
        return skipped
    }

    /// Runs the scenario and records one issue with the seed and the first failures, if any.
    func runAndCheck(sourceLocation: SourceLocation = #_sourceLocation) throws {
        let outcome = try run()
        guard !outcome.failures.isEmpty else { return }
        let cuts = Set(outcome.failedCuts).sorted()
        let shown = outcome.failures.prefix(12).joined(separator: "\n  ")
        Issue.record("""
            Power loss: \(label): \(outcome.failures.count) failures at \(cuts.count) of \(outcome.events + 1) cuts \
            (\(outcome.checks) distinct states checked); failing cuts \(cuts.prefix(20))\(cuts.count > 20 ? "…" : "")
              \(shown)
            Reproduce with POWERLOSS_SEED=\(seed) (operations: \(operations.map(\.description).joined(separator: ", ")))
            """, sourceLocation: sourceLocation)
    }
}

extension FileSystemModel {
    /// The current tree (what a clean shutdown leaves), in the form of a crash image.
    func currentImage() -> CrashImage {
        var image = CrashImage()
        func walk(_ id: Int, _ path: String) {
            for (name, node) in directories[id].current.sorted(by: { $0.key < $1.key }) {
                let child = path.isEmpty ? name : path + "/" + name
                switch node {
                case .directory(let sub):
                    image.directories.append((child, directories[sub].mode))
                    walk(sub, child)
                case .file(let file):
                    image.files.append((child, files[file].current, files[file].mode, 0))
                }
            }
        }
        walk(Self.root, "")
        return image
    }
}
#endif

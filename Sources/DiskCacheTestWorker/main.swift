// A child process for the crash and lock tests of DiskCache. Not part of the library.
//
//   DiskCacheTestWorker write DIR MODE KEYS SEED BASE   stores (and sometimes removes) values until killed,
//                                                   printing "ACK PUT key version" / "ACK DEL key version"
//                                                   after each operation returns, and "BEGIN ..." before it
//   DiskCacheTestWorker sweep DIR                   evicts every entry (capacity 0), printing "SWEEPING n" first
//   DiskCacheTestWorker hold DIR [exclusive]        opens the cache, prints "OPEN", sleeps until killed
//   DiskCacheTestWorker open DIR [exclusive]        tries to open; prints "OPEN" or "ERROR <code>", exits
//   DiskCacheTestWorker share DIR ID SECONDS SEED [STOP]
//                                                   with others on one shared cache (.immediate): random
//                                                   put/get/remove/removeAll/compact/sweep on 40 keys
//                                                   for SECONDS, or until the file STOP exists; prints
//                                                   "B op key version time" before each write and
//                                                   "A op ..." after it returns (CLOCK_MONOTONIC
//                                                   ns), "GET key version" / "MISS key" for reads, "BAD ..."
//                                                   for a value that is not one stored for its key, "DONE"
//   DiskCacheTestWorker open-as-nobody DIR          the same as user nobody (run as root)
//   DiskCacheTestWorker hostile DIR ID SECONDS MS   stores values under keys of its own on a shared cache
//                                                   (.immediate, lock timeout MS) for SECONDS, reading back
//                                                   earlier ones, whatever is done to SHARED meanwhile:
//                                                   "ACK k" after a store returns, "ERR op code" for a failed
//                                                   call (closing and opening again when the code says to),
//                                                   "BAD k" / "LOST k" for a wrong or missing value,
//                                                   "LONGEST ms" (the longest call) and "DONE"
//   DiskCacheTestWorker stream DIR                  stores "big" whole, prints "STORED", then appends to a
//                                                   writer for "big" without committing, printing "APPENDED n"
//   DiskCacheTestWorker large DIR BYTES             stores and reads a BYTES-long body each streaming way,
//                                                   printing "PHASE name bytes peak-growth-bytes seconds"
//   DiskCacheTestWorker populate DIR SEED clean|unclean|kill
//                                                   fills a cache for a damage trial: 48 keys (the seed picks
//                                                   the inline threshold: bodies above it are .body files,
//                                                   and the sharing mode) stored, updated and removed at random;
//                                                   prints "POPULATED", then closes it, ends the process without
//                                                   closing it, or (kill) goes on writing until it is killed
//   DiskCacheTestWorker damage DIR SEED             damages one file of the cache (zeroes a range, flips bits,
//                                                   overwrites a range, truncates or appends), chosen by SEED;
//                                                   prints "DAMAGED path what"
//   DiskCacheTestWorker exercise DIR SEED [ID]      what a fresh process does with a cache one file of which
//                                                   was damaged: reads it as the diskcache tool does, opens it,
//                                                   reads every key every way (another thread reading, writing
//                                                   and inspecting at random meanwhile), writes, verifies,
//                                                   repairs, reopens and writes; "BAD ..." for a value that is
//                                                   not one stored for its key, "ERR ..." for a thrown error
//                                                   (not a failure), "EXERCISED" at the end; ID (0 by default)
//                                                   varies the writes of processes exercising one cache at once
//   DiskCacheTestWorker download DIR ORIGIN BYTES   (AsyncHTTPClient trait) fetches BYTES from a StreamingOrigin
//                                                   through CachingHTTPClient, then from its cache: "PHASE ..."
//                                                   and "SOURCE phase source SAME|DIFFERENT" for each
//   DiskCacheTestWorker hummingbird DIR SIZE [chunked]
//                                                   (Hummingbird trait) serves GET /item/<name> (SIZE bytes,
//                                                   max-age=600) behind HTTPCachingMiddleware over DIR on a
//                                                   loopback port, printing "LISTENING port", until killed
import DiskCache
import Foundation
import MemoryCache  // EvictionPolicy, for the damage trials
import ToolSupport

/// The value version `version` of key number `k`: "key-k|version|" then bytes that follow
/// from the two numbers, so a reader can tell which write it came from and whether every byte
/// is right. The crash tests check values against the same formula.
@Sendable func payload(k: Int, version: Int) -> Data {
    var bytes = Array("key-\(k)|\(version)|".utf8)
    let length = (version &* 7919 &+ k &* 104_729) % 20_000
    for i in 0..<length { bytes.append(UInt8(truncatingIfNeeded: i &* version &+ k)) }
    return Data(bytes)
}

@Sendable func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    say("usage: DiskCacheTestWorker write|hold|open DIR ...")
    exit(2)
}
let directory = URL(fileURLWithPath: arguments[2])

switch arguments[1] {
case "write":
    let durability: DiskCache.Durability = switch arguments[3] {
    case "immediate": .immediate
    case "batched": .batched(interval: .milliseconds(20))
    default: .none
    }
    let keys = Int(arguments[4]) ?? 50
    let seed = UInt64(arguments[5]) ?? 1
    let cache = try DiskCache(directory: directory, configuration: .init(durability: durability))
    var random = SplitMix64(seed: seed)
    // Versions start at BASE so that successive runs on one cache never reuse a version.
    let base = arguments.count > 6 ? Int(arguments[6]) ?? 0 : 0
    var versions = [Int](repeating: base, count: keys)
    say("READY")
    while true {
        let k = Int(random.next() % UInt64(keys))
        let key = "key-\(k)"
        versions[k] += 1
        let version = versions[k]
        if random.next() % 10 == 0 {
            say("BEGIN DEL \(key) \(version)")
            try cache.removeValue(for: key)
            say("ACK DEL \(key) \(version)")
        } else {
            say("BEGIN PUT \(key) \(version)")
            try cache.store(payload(k: k, version: version), for: key)
            say("ACK PUT \(key) \(version)")
        }
    }
case "fill":
    // Stores COUNT distinct keys of SIZE bytes under PREFIX, flat out, in a shared cache with
    // the count limit LIMIT and the disk capacity CAPACITY; says DONE when all are stored.
    let limit = Int(arguments[3]) ?? 100
    let count = Int(arguments[4]) ?? 1000
    let prefix = arguments.count > 5 ? arguments[5] : "p"
    let size = arguments.count > 6 ? Int(arguments[6]) ?? 64 : 64
    var configuration = DiskCache.Configuration(diskCapacity: arguments.count > 7 ? Int64(arguments[7]) ?? (1 << 30) : 1 << 30,
                                                durability: .none)
    configuration.countLimit = limit
    configuration.minimumFreeSpace = 0
    configuration.minimumFreeFraction = 0
    let cache = try DiskCache(directory: directory, configuration: configuration)
    say("READY")
    for i in 0..<count { try cache.store(Data(repeating: UInt8(truncatingIfNeeded: i), count: size), for: "\(prefix)-\(i)") }
    try cache.close()
    say("DONE")
case "sweep":
    // Evicts every entry of an existing cache, one by one, until killed or done.
    var configuration = DiskCache.Configuration(durability: .none)
    configuration.sweepInterval = nil
    let cache = try DiskCache(directory: directory, configuration: configuration)
    say("SWEEPING \(cache.count)")
    cache.diskCapacity = 0
    let report = cache.sweep()
    say("SWEPT \(report.totalRemovedEntries)")
case "hold":
    let sharing: DiskCache.Sharing = arguments.count > 3 && arguments[3] == "exclusive" ? .exclusive : .shared
    let cache = try DiskCache(directory: directory, configuration: .init(sharing: sharing))
    say("OPEN")
    while true { sleep(60) }
    _ = cache
case "open", "open-as-nobody":
    if arguments[1] == "open-as-nobody" {
        // Drop root's privileges so that permission checks apply.
        guard setgid(65534) == 0, setuid(65534) == 0 else {
            say("SKIP cannot drop privileges")
            exit(0)
        }
    }
    let sharing: DiskCache.Sharing = arguments.count > 3 && arguments[3] == "exclusive" ? .exclusive : .shared
    do {
        let cache = try DiskCache(directory: directory, configuration: .init(sharing: sharing))
        say("OPEN")
        try cache.close()
    } catch let error as DiskCacheError {
        say("ERROR \(error.code) \(error)")
    }
case "stream":
    let cache = try DiskCache(directory: directory, configuration: .init(durability: .immediate))
    try cache.store(payload(k: 1, version: 1), for: "big")
    say("STORED")
    let writer = try cache.makeWriter(for: "big")
    let piece = Data(repeating: 0x5A, count: 64 << 10)
    var appended = 0
    while true {
        try writer.append(piece)
        appended += 1
        say("APPENDED \(appended)")
    }
case "populate":
    let ending: DamageTrialEnding = switch arguments.count > 4 ? arguments[4] : "" {
    case "clean": .close
    case "kill": .keepWriting
    default: .exit
    }
    populateForDamage(directory, seed: UInt64(arguments[3]) ?? 1, ending: ending)
case "damage":
    damage(directory, seed: UInt64(arguments[3]) ?? 1)
case "exercise":
    exerciseDamaged(directory, seed: UInt64(arguments[3]) ?? 1, id: arguments.count > 4 ? Int(arguments[4]) ?? 0 : 0)
case "hostile":
    hostileWork(directory, id: Int(arguments[3]) ?? 0, seconds: Double(arguments[4]) ?? 2,
                lockTimeout: .milliseconds(Int(arguments[5]) ?? 2_000))
case "share":
    try shareWork(directory, id: Int(arguments[3]) ?? 0, seconds: Double(arguments[4]) ?? 5, seed: UInt64(arguments[5]) ?? 1,
                  stop: arguments.count > 6 ? arguments[6] : nil)
case "large":
    try await measureLargeBodies(directory, bytes: Int64(arguments[3]) ?? (1 << 30))
#if AsyncHTTPClient
case "download":
    try await measureDownload(directory, origin: arguments[3], bytes: Int(arguments[4]) ?? (1 << 30))
#endif
#if Hummingbird
case "hummingbird":
    try await serveCachedApp(directory, size: Int(arguments[3]) ?? 100_000, chunked: arguments.count > 4 && arguments[4] == "chunked")
#endif
default:
    say("unknown command \(arguments[1])")
    exit(2)
}

// MARK: - Large bodies

/// Runs `body`, then says how much the peak resident set grew over the resident set before it
/// (the peak is reset first: `clear_refs` 5) and how long it took.
func phase(_ name: String, bytes: Int64, _ body: () async throws -> Void) async throws {
    try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
    let before = residentMemory().current
    let start = Date()
    try await body()
    let seconds = Date().timeIntervalSince(start)
    say("PHASE \(name) \(bytes) \(max(0, residentMemory().peak - before)) \(String(format: "%.3f", seconds))")
}

/// 1 MiB pieces of a body that differs at every offset: piece `i` of any body is the same bytes.
func piece(_ i: Int64) -> Data {
    var data = Data(count: 1 << 20)
    data.withUnsafeMutableBytes { raw in
        let words = raw.bindMemory(to: UInt64.self)
        for w in 0..<words.count { words[w] = UInt64(i) &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(w) }
    }
    return data
}

/// The pieces of a `bytes`-long body, as an async sequence.
struct Pieces: AsyncSequence, Sendable {
    let bytes: Int64
    struct AsyncIterator: AsyncIteratorProtocol {
        let bytes: Int64
        var next: Int64 = 0
        mutating func next() async throws -> Data? {
            let start = next << 20
            guard start < bytes else { return nil }
            defer { next += 1 }
            let data = piece(next)
            return start + Int64(data.count) <= bytes ? data : data.prefix(Int(bytes - start))
        }
    }
    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(bytes: bytes) }
}

func measureLargeBodies(_ directory: URL, bytes: Int64) async throws {
    var configuration = DiskCache.Configuration(diskCapacity: 4 * bytes + (64 << 20), durability: .none)
    configuration.sweepInterval = nil
    let cache = try DiskCache(directory: directory.appendingPathComponent("cache"), configuration: configuration)
    let source = directory.appendingPathComponent("source.bin")
    guard FileManager.default.createFile(atPath: source.path, contents: nil) else { throw CocoaError(.fileWriteUnknown) }
    let handle = try FileHandle(forWritingTo: source)
    for try await data in Pieces(bytes: bytes) { try handle.write(contentsOf: data) }
    try handle.close()

    try await phase("writer", bytes: bytes) {
        let writer = try await cache.makeWriter(for: "writer")
        for try await data in Pieces(bytes: bytes) { try await writer.append(data) }
        try await writer.commit()
    }
    try await phase("async-sequence", bytes: bytes) {
        try await cache.store(Pieces(bytes: bytes), for: "sequence")
    }
    try await phase("file-copy", bytes: bytes) {
        try await cache.store(contentsOf: source, for: "copy")
    }
    try await phase("chunks", bytes: bytes) {
        var expected = Pieces(bytes: bytes).makeAsyncIterator()
        var total: Int64 = 0
        guard let chunks = try await cache.chunks(for: "sequence") else { throw CocoaError(.fileNoSuchFile) }
        for try await chunk in chunks {
            guard let want = try await expected.next(), want == chunk else { throw CocoaError(.fileReadCorruptFile) }
            total += Int64(chunk.count)
        }
        guard total == bytes else { throw CocoaError(.fileReadCorruptFile) }
    }
    try await phase("with-file", bytes: bytes) {
        let read = try await cache.withFile(for: "copy") { file -> Int64 in
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            var offset: Int64 = 0
            while true {
                let count = buffer.withUnsafeMutableBytes { pread(file.fileDescriptor, $0.baseAddress, $0.count, off_t(offset)) }
                if count <= 0 { return offset }
                offset += Int64(count)
            }
        }
        guard read == bytes else { throw CocoaError(.fileReadCorruptFile) }
    }
    try await phase("file-move", bytes: bytes) {
        try await cache.store(contentsOf: source, for: "moved", transfer: .move)
    }
    try await cache.close()
}

// MARK: - Sharing

func monotonicNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

/// Whether `value` is exactly what ``payload(k:version:)`` makes for key number `k`, and which version.
@Sendable func checkPayload(_ value: Data, k: Int) -> Int? {
    let prefix = value.prefix(40)
    let fields = String(decoding: prefix, as: UTF8.self).split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)
    guard fields.count >= 2, fields[0] == "key-\(k)", let version = Int(fields[1]),
          payload(k: k, version: version) == value else { return nil }
    return version
}

/// One of several processes working on one shared cache at random (see the usage above).
func shareWork(_ directory: URL, id: Int, seconds: Double, seed: UInt64, stop: String?) throws {
    let configuration = DiskCache.Configuration(durability: .immediate, inlineThreshold: 8 << 10,
                                                sweepInterval: .milliseconds(200))
    let cache = try DiskCache(directory: directory, configuration: configuration)
    var random = SplitMix64(seed: seed)
    var counter = 0
    say("READY")
    let deadline = monotonicNanoseconds() + Int64(seconds * 1e9)
    while monotonicNanoseconds() < deadline && !(stop.map { access($0, F_OK) == 0 } ?? false) {
        let k = Int(random.next() % 40)
        let key = "key-\(k)"
        let roll = random.next() % 100
        switch roll {
        case 0..<45:
            counter += 1
            let version = id * 1_000_000 + counter
            say("B PUT \(key) \(version) \(monotonicNanoseconds())")
            try cache.store(payload(k: k, version: version), for: key)
            say("A PUT \(key) \(version) \(monotonicNanoseconds())")
        case 45..<85:
            if let value = cache.data(for: key) {
                if let version = checkPayload(value, k: k) { say("GET \(key) \(version)") } else { say("BAD \(key) \(value.count) bytes") }
            } else {
                say("MISS \(key)")
            }
        case 85..<94:
            say("B DEL \(key) 0 \(monotonicNanoseconds())")
            try cache.removeValue(for: key)
            say("A DEL \(key) 0 \(monotonicNanoseconds())")
        case 94..<95:
            say("B CLR - 0 \(monotonicNanoseconds())")
            try cache.removeAll()
            say("A CLR - 0 \(monotonicNanoseconds())")
        case 95..<97:
            try cache.compact()
        default:
            cache.sweep()
        }
    }
    try cache.close()
    say("DONE")
}

// MARK: - A hostile directory

/// One of the processes of the tests that remove, replace or damage `SHARED` while the cache is
/// used (see the usage above). Key number `k` is `id` × 100,000 + n for its n-th store, so that
/// every acknowledged value is its own and must read back whole from any later instance.
func hostileWork(_ directory: URL, id: Int, seconds: Double, lockTimeout: Duration) {
    var configuration = DiskCache.Configuration(durability: .immediate, inlineThreshold: 8 << 10, sweepInterval: nil)
    configuration.lockTimeout = lockTimeout
    var longest: Int64 = 0
    func timed<T>(_ body: () -> T) -> T {
        let start = monotonicNanoseconds()
        defer { longest = max(longest, monotonicNanoseconds() - start) }
        return body()
    }
    func open() -> DiskCache? {
        timed {
            do {
                return try DiskCache(directory: directory, configuration: configuration)
            } catch {
                say("ERR open \((error as? DiskCacheError)?.code.description ?? "\(error)")")
                return nil
            }
        }
    }
    var cache = open()
    while cache == nil { usleep(10_000); cache = open() }
    var random = SplitMix64(seed: UInt64(id))
    var acknowledged: [Int] = []
    var n = 0
    say("READY")
    let deadline = monotonicNanoseconds() + Int64(seconds * 1e9)
    while monotonicNanoseconds() < deadline {
        guard let current = cache else {
            usleep(5_000)
            cache = open()
            if cache != nil { say("REOPEN") }
            continue
        }
        n += 1
        let k = id * 100_000 + n
        let stored: Bool = timed {
            do {
                try current.store(payload(k: k, version: 1), for: "key-\(k)")
                return true
            } catch {
                let code = (error as? DiskCacheError)?.code
                say("ERR put \(code?.description ?? "\(error)")")
                if code == .sharedPageReplaced || code == .sharedPageDamaged {
                    try? current.close()
                    cache = nil
                }
                return false
            }
        }
        if stored {
            say("ACK \(k)")
            acknowledged.append(k)
        }
        guard cache != nil, !acknowledged.isEmpty else { continue }
        let check = acknowledged[Int(random.next() % UInt64(acknowledged.count))]
        if let value = current.data(for: "key-\(check)") {
            if checkPayload(value, k: check) != 1 { say("BAD \(check)") }
        } else {
            say("LOST \(check)")
        }
    }
    try? cache?.close()
    say("LONGEST \(longest / 1_000_000)")
    say("DONE")
}

// MARK: - Damage trials

/// Keys a damage trial stores: key-0 ..< key-`damageKeys`.
let damageKeys = 48

/// The configuration of a damage trial: a sweeper that runs often, and a capacity the writes go
/// over now and then. Bodies above 8 KiB in `.body` files (half the seeds), all in `.body` files,
/// or all inline; shared mode for three seeds of four; LRU for one in three, else S3-FIFO.
func damageConfiguration(seed: UInt64) -> DiskCache.Configuration {
    let durability: DiskCache.Durability = switch seed % 3 {
    case 0: .immediate
    case 1: .batched(interval: .milliseconds(5))
    default: .none
    }
    let inlineThreshold = switch seed / 7 % 4 {
    case 0: 0
    case 1: 64 << 10
    default: 8 << 10
    }
    var configuration = DiskCache.Configuration(diskCapacity: seed % 5 == 0 ? 160 << 10 : 64 << 20, durability: durability,
                                                inlineThreshold: inlineThreshold,
                                                sweepInterval: .milliseconds(seed % 2 == 0 ? 1 : 20))
    configuration.sharing = seed / 11 % 4 == 0 ? .exclusive : .shared
    configuration.evictionPolicy = seed / 13 % 3 == 0 ? .leastRecentlyUsed : .s3FIFO
    configuration.minimumFreeSpace = 0
    configuration.minimumFreeFraction = 0
    return configuration
}

/// How `populate` ends: closing the cache, ending the process without closing it, or writing on
/// until the process is killed (the script sends SIGKILL).
enum DamageTrialEnding {
    case close, exit, keepWriting
}

/// Fills a cache for a damage trial, then ends as `ending` says.
func populateForDamage(_ directory: URL, seed: UInt64, ending: DamageTrialEnding) {
    var random = SplitMix64(seed: seed)
    do {
        let cache = try DiskCache(directory: directory, configuration: damageConfiguration(seed: seed))
        func step(_ step: Int) throws {
            let k = random.below(damageKeys)
            switch random.below(10) {
            case 0: try cache.removeValue(for: "key-\(k)")
            case 1: _ = try cache.updateMetadata(["step": "\(step)"], for: "key-\(k)")
            default:
                let expires = random.below(8) == 0 ? Date(timeIntervalSinceNow: random.below(2) == 0 ? -1 : 3600) : nil
                try cache.store(payload(k: k, version: step + 1), for: "key-\(k)", metadata: ["step": "\(step)"], expires: expires)
            }
        }
        for n in 0..<(3 * damageKeys) { try step(n) }
        say("POPULATED")
        switch ending {
        case .close: try cache.close()
        case .exit: exit(0)
        case .keepWriting:
            var n = 3 * damageKeys
            while true {
                try step(n)
                n += 1
            }
        }
    } catch {
        say("ERR populate \(error)")
        exit(3)
    }
}

/// Damages one file of the cache in `directory`, chosen by `seed` (half the time among all its
/// files, else among those that are not an entry's: the journal, `SHARED`, `VERSION`, `LOCK`,
/// `tmp/` and `retired/`), one of five ways.
func damage(_ directory: URL, seed: UInt64) {
    var random = SplitMix64(seed: seed &* 0x2545_F491_4F6C_DD1D)
    var files: [String] = []
    if let walker = FileManager.default.enumerator(atPath: directory.path) {
        while let name = walker.nextObject() as? String {
            var status = stat()
            if lstat(directory.path + "/" + name, &status) == 0, status.st_mode & S_IFMT == S_IFREG { files.append(name) }
        }
    }
    files.sort()
    let others = files.filter { !$0.hasSuffix(".meta") && !$0.hasSuffix(".body") || $0.hasPrefix("tmp/") || $0.hasPrefix("retired/") }
    let pool = random.below(2) == 0 || others.isEmpty ? files : others
    guard !pool.isEmpty else {
        say("DAMAGED nothing")
        return
    }
    let name = pool[random.below(pool.count)]
    let path = directory.path + "/" + name
    guard var bytes = FileManager.default.contents(atPath: path).map({ [UInt8]($0) }) else {
        say("DAMAGED nothing (\(name) unreadable)")
        return
    }
    /// A range of the file: often short, sometimes long.
    func range() -> Range<Int> {
        let start = random.below(bytes.count)
        let longest = bytes.count - start
        let length = 1 + (random.below(4) == 0 ? random.below(longest) : random.below(min(longest, 64)))
        return start..<start + length
    }
    var what: String
    switch bytes.isEmpty ? 4 : random.below(5) {
    case 0:
        let zeroed = range()
        for i in zeroed { bytes[i] = 0 }
        what = "zeroed \(zeroed.lowerBound)..<\(zeroed.upperBound)"
    case 1:
        let flips = 1 + random.below(4)
        var at: [String] = []
        for _ in 0..<flips {
            let bit = random.below(bytes.count * 8)
            bytes[bit / 8] ^= 1 << UInt8(bit % 8)
            at.append("\(bit / 8).\(bit % 8)")
        }
        what = "flipped bits \(at.joined(separator: ","))"
    case 2:
        let overwritten = range()
        for i in overwritten { bytes[i] = UInt8(truncatingIfNeeded: random.next()) }
        what = "overwrote \(overwritten.lowerBound)..<\(overwritten.upperBound)"
    case 3:
        let length = random.below(bytes.count)
        bytes.removeSubrange(length...)
        what = "truncated to \(length)"
    default:
        let count = 1 + random.below(random.below(4) == 0 ? 8192 : 64)
        let zeros = random.below(3) == 0
        bytes += (0..<count).map { _ in zeros ? 0 : UInt8(truncatingIfNeeded: random.next()) }
        what = "appended \(count) \(zeros ? "zero" : "random") bytes"
    }
    // In place, as a disk or another program would damage it (same inode, same links).
    guard let handle = FileHandle(forUpdatingAtPath: path) else {
        say("DAMAGED nothing (\(name) not writable)")
        return
    }
    do {
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: Data(bytes))
        try handle.close()
    } catch {
        say("DAMAGED nothing (\(name): \(error))")
        return
    }
    say("DAMAGED \(name) \(what)")
}

/// Reads the cache in `directory` as the `diskcache` tool does (``DiskCacheInspector``): its
/// summary, every entry, every value two ways, and a verify; `whileOpen`, as a snapshot of a
/// cache another instance has open.
@Sendable func inspect(_ directory: URL, whileOpen: Bool, _ check: (Data?, Int, String) -> Void) {
    do {
        let inspector = try DiskCacheInspector(directory: directory, whileOpen: whileOpen)
        _ = inspector.summary
        _ = inspector.entries()
        for k in 0..<damageKeys {
            check(inspector.data(for: "key-\(k)"), k, "inspector")
            _ = inspector.entry(for: "key-\(k)")
            _ = inspector.metadataPropertyList(for: "key-\(k)")
            var read = Data()
            do {
                if try inspector.readValue(for: "key-\(k)", pieceSize: 4096, { read.append(contentsOf: $0) }) {
                    check(read, k, "inspector readValue")
                }
            } catch {
                say("ERR inspector readValue \(error)")
            }
        }
        _ = inspector.verify()
    } catch {
        say("ERR inspector \(error)")
    }
}

/// `key`'s value read with `chunks(for:)`, from a thread that may block.
func chunked(_ cache: DiskCache, _ key: String) throws -> Data? {
    let result = Locked<Result<Data?, any Error>>(.success(nil))
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        do {
            if let chunks = try await cache.chunks(for: key, chunkSize: 4096) {
                var whole = Data()
                for try await chunk in chunks { whole.append(chunk) }
                result.set(.success(whole))
            }
        } catch {
            result.set(.failure(error))
        }
        _ = done.signal()
    }
    done.wait()
    return try result.get().get()
}

/// A value behind a lock, for the thread that waits on a task.
final class Locked<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: T
    init(_ value: T) { self.value = value }
    func set(_ new: T) { lock.lock(); value = new; lock.unlock() }
    func get() -> T { lock.lock(); defer { lock.unlock() }; return value }
}

/// What a fresh process does with a damaged cache; any trap is the finding.
/// `id` tells apart processes exercising the same cache at once (their writes differ).
func exerciseDamaged(_ directory: URL, seed: UInt64, id: Int = 0) {
    var random = SplitMix64(seed: seed &* 31 &+ UInt64(id))
    let configuration = damageConfiguration(seed: seed)
    @Sendable func check(_ value: Data?, _ k: Int, _ how: String) {
        if let value, checkPayload(value, k: k) == nil { say("BAD \(how) key-\(k) \(value.count) bytes") }
    }
    func readAll(_ cache: DiskCache) {
        for k in 0..<damageKeys {
            let key = "key-\(k)"
            check(cache.data(for: key), k, "data")
            check(cache.dataAndEntry(for: key)?.data, k, "dataAndEntry")
            _ = cache.entry(for: key)
            _ = cache.contains(key)
            do {
                let read = try cache.withFile(for: key) { file -> Data in
                    try Data(contentsOf: file.url)
                }
                check(read, k, "withFile")
                check(try chunked(cache, key), k, "chunks")
            } catch {
                say("ERR read \(key) \(error)")
            }
        }
    }
    // What the tool's commands read with, first as the cache is left (closed or not).
    inspect(directory, whileOpen: false, check)
    do {
        let cache = try DiskCache(directory: directory, configuration: configuration)
        // Another thread reads (and now and then writes) at random from the open on, beside
        // this one's reads, writes, verify and repair, and the background work the open started.
        let stop = Locked(false)
        let stopped = DispatchSemaphore(value: 0)
        let besideSeed = random.next()
        Thread.detachNewThread {
            var beside = SplitMix64(seed: besideSeed)
            while !stop.get() {
                let k = beside.below(damageKeys)
                switch beside.below(64) {
                case 0: inspect(directory, whileOpen: true, check)
                case 1..<8:
                    do { try cache.store(payload(k: k, version: 3_000 + beside.below(1_000)), for: "key-\(k)") } catch { say("ERR beside \(error)") }
                case 8..<16: _ = cache.entry(for: "key-\(k)")
                case 16..<24: check(cache.dataAndEntry(for: "key-\(k)")?.data, k, "beside")
                default: check(cache.data(for: "key-\(k)"), k, "beside")
                }
            }
            stopped.signal()
        }
        readAll(cache)
        // Writes at once, beside the background work the open started.
        for _ in 0..<4 {
            let k = random.below(damageKeys)
            do { try cache.store(payload(k: k, version: 1_000 + k), for: "key-\(k)") } catch { say("ERR store \(error)") }
        }
        // A body streamed in through tmp/, in two pieces.
        do {
            let k = random.below(damageKeys)
            let value = payload(k: k, version: 1_100 + 10 * id + k % 10)
            let writer = try cache.makeWriter(for: "key-\(k)")
            try writer.append(value.prefix(value.count / 2))
            try writer.append(value.dropFirst(value.count / 2))
            try writer.commit()
        } catch {
            say("ERR writer \(error)")
        }
        do { _ = try cache.verify() } catch { say("ERR verify \(error)") }
        do { _ = try cache.verify(repair: true) } catch { say("ERR repair \(error)") }
        readAll(cache)
        stop.set(true)
        stopped.wait()
        try cache.close()
    } catch {
        say("ERR open \(error)")
    }
    do {
        let cache = try DiskCache(directory: directory, configuration: configuration)
        for step in 0..<damageKeys {
            let k = random.below(damageKeys)
            if random.below(6) == 0 {
                try cache.removeValue(for: "key-\(k)")
            } else {
                try cache.store(payload(k: k, version: 2_000 + step), for: "key-\(k)")
            }
            check(cache.data(for: "key-\(random.below(damageKeys))"), k, "reopened")
        }
        readAll(cache)
        cache.sweep()
        try cache.compact()
        try cache.close()
    } catch {
        say("ERR reopen \(error)")
    }
    say("EXERCISED")
}

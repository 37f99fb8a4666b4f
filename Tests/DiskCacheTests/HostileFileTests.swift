@testable import DiskCache
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Files that are not what the cache wrote, put where its files should be: FIFOs (which would
/// block an `open` or `read` forever) and metadata claiming absurd body sizes (which would make
/// a read allocate what a file merely claims). Each must give a miss, a rebuild or a clear
/// error, promptly, and never a crash; the other entries stay readable.
struct HostileFileTests {
    static let victim = "victim"
    static let bystander = "bystander"
    static let value = randomData(count: 3000, seed: 7)
    static let otherValue = randomData(count: 500, seed: 8)

    /// Runs `body` on a thread of its own and waits at most `seconds` for it: a hang is
    /// recorded as a failure (the stuck thread is left behind) instead of hanging the suite.
    func finishing<T: Sendable>(within seconds: Double = 10, _ what: String,
                                sourceLocation: SourceLocation = #_sourceLocation,
                                _ body: @escaping @Sendable () -> T) -> T? {
        let result = Locked<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
        guard done.wait(timeout: .now() + seconds) == .success else {
            Issue.record("\(what) did not finish within \(seconds) s", sourceLocation: sourceLocation)
            return nil
        }
        return result.withLock { $0 }
    }

    func configuration(inlineThreshold: Int) -> DiskCache.Configuration {
        var configuration = DiskCache.Configuration.testing(inlineThreshold: inlineThreshold)
        configuration.sweepInterval = nil
        return configuration
    }

    /// A closed cache holding the victim and the bystander; returns the victim's hash.
    func makeCache(_ dir: TemporaryDirectory, inlineThreshold: Int) throws -> KeyHash {
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(inlineThreshold: inlineThreshold))
        try cache.store(Self.value, for: Self.victim)
        try cache.store(Self.otherValue, for: Self.bystander)
        try cache.close()
        return KeyHasher.xxh3.hash(Self.victim)
    }

    /// Opens the cache in `dir` on a thread of its own (see ``finishing(within:_:sourceLocation:_:)``).
    func openPromptly(_ dir: TemporaryDirectory, _ what: String,
                      sourceLocation: SourceLocation = #_sourceLocation) -> Result<DiskCache, any Error>? {
        let url = dir.cache
        let config = configuration(inlineThreshold: 1 << 20)
        return finishing(what, sourceLocation: sourceLocation) { Result { try DiskCache(directory: url, configuration: config) } }
    }

    func replaceWithFIFO(_ path: String) throws {
        try FileManager.default.removeItem(atPath: path)
        #expect(mkfifo(path, 0o600) == 0, "mkfifo \(path)")
    }

    enum EntryFile: String, CaseIterable, Sendable { case inlineMeta, meta, body }

    @Test(arguments: EntryFile.allCases)
    func fifoInPlaceOfAnEntryFileIsAMiss(file: EntryFile) throws {
        let dir = TemporaryDirectory()
        let inlineThreshold = file == .inlineMeta ? 1 << 20 : 0
        let hash = try makeCache(dir, inlineThreshold: inlineThreshold)
        let layout = Layout(root: dir.cache.path, version: Layout.formatVersion)
        try replaceWithFIFO(file == .body ? layout.bodyFile(hash, slot: 0) : layout.metaFile(hash, slot: 0))
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(inlineThreshold: inlineThreshold))
        let read = finishing("data(for:) of an entry whose \(file) is a FIFO") { cache.data(for: Self.victim) }
        #expect(read == .some(nil))
        let entry = finishing("dataAndEntry(for:)") { cache.dataAndEntry(for: Self.victim)?.data }
        #expect(entry == .some(nil))
        _ = finishing("verify()") { try? cache.verify() }
        #expect(cache.data(for: Self.bystander) == Self.otherValue)
        try cache.close()
    }

    @Test func fifoInPlaceOfTheJournalRebuildsFromTheEntryFiles() throws {
        let dir = TemporaryDirectory()
        _ = try makeCache(dir, inlineThreshold: 1 << 20)
        try replaceWithFIFO(dir.cache.path + "/journal")
        let opened = openPromptly(dir, "opening a cache whose journal is a FIFO")
        let cache = try #require(try opened?.get())
        #expect(cache.data(for: Self.victim) == Self.value)
        #expect(cache.data(for: Self.bystander) == Self.otherValue)
        try cache.close()
    }

    @Test func fifoInPlaceOfVersionIsRefusedPromptly() throws {
        let dir = TemporaryDirectory()
        _ = try makeCache(dir, inlineThreshold: 1 << 20)
        try replaceWithFIFO(dir.cache.path + "/VERSION")
        let opened = openPromptly(dir, "opening a cache whose VERSION is a FIFO")
        guard case .failure(let error as DiskCacheError)? = opened else {
            Issue.record("expected a DiskCacheError, got \(String(describing: opened))")
            return
        }
        #expect(error.code == .notACache)
    }

    @Test func fifoNamedLikeAnEntryDoesNotHangTheRebuildScan() throws {
        let dir = TemporaryDirectory()
        _ = try makeCache(dir, inlineThreshold: 1 << 20)
        try FileManager.default.removeItem(atPath: dir.cache.path + "/journal")
        let fifo = dir.cache.path + "/ab/" + String(repeating: "ab", count: 16) + ".meta"
        #expect(mkfifo(fifo, 0o600) == 0)
        let opened = openPromptly(dir, "the rebuild scan past a FIFO named *.meta")
        let cache = try #require(try opened?.get())
        #expect(cache.data(for: Self.victim) == Self.value)
        #expect(cache.data(for: Self.bystander) == Self.otherValue)
        try cache.close()
    }

    /// A `.meta` claiming a body of `size` bytes beside a sparse body file of that size, the
    /// journal deleted (so the open rebuilds from the files), on tmpfs (which allows such
    /// files). The open must not trap, reads must miss without allocating the claimed size,
    /// and a second open must behave the same.
    @Test(arguments: [Int64(1) << 40, Int64(1) << 61, Int64(1) << 62, Int64.max])
    func metadataClaimingAHugeBodyIsNeverAllocated(size: Int64) throws {
        let dir = TemporaryDirectory(inMemory: true)
        let hash = try makeCache(dir, inlineThreshold: 0)
        let layout = Layout(root: dir.cache.path, version: Layout.formatVersion)
        let claimed = EntryMetadata(key: Self.victim, size: size, checksum: 1, created: 1, accessed: 1,
                                    expires: nil, metadata: [:], inlineBody: nil)
        let parts = claimed.encodedParts(inlineBodyCount: nil)
        try writeFile(layout.metaFile(hash, slot: 0), parts.head + parts.tail)
        let body = layout.bodyFile(hash, slot: 0)
        #expect(truncate(body, off_t(size)) == 0 || size == Int64.max, "truncate to \(size): errno \(errno)")
        try FileManager.default.removeItem(atPath: dir.cache.path + "/journal")
        for round in 1...2 {
            let cache = try DiskCache(directory: dir.cache, configuration: configuration(inlineThreshold: 0))
            #expect(cache.data(for: Self.victim) == nil, "round \(round)")
            #expect(cache.dataAndEntry(for: Self.victim) == nil, "round \(round)")
            #expect(cache.data(for: Self.bystander) == Self.otherValue, "round \(round)")
            try cache.close()
        }
    }

    /// The same claim arriving through the journal (a record whose size no file backs) with a
    /// sparse body of that size: a read must miss, not allocate.
    @Test func journalRecordClaimingAHugeBodyIsAMiss() throws {
        let dir = TemporaryDirectory(inMemory: true)
        let hash = try makeCache(dir, inlineThreshold: 0)
        let layout = Layout(root: dir.cache.path, version: Layout.formatVersion)
        let size = Int64(1) << 50
        let claimed = EntryMetadata(key: Self.victim, size: size, checksum: 1, created: 1, accessed: 1,
                                    expires: nil, metadata: [:], inlineBody: nil)
        let parts = claimed.encodedParts(inlineBodyCount: nil)
        let metaSize = parts.head.count + parts.tail.count
        try writeFile(layout.metaFile(hash, slot: 1), parts.head + parts.tail)
        #expect(FileManager.default.createFile(atPath: layout.bodyFile(hash, slot: 1), contents: nil))
        #expect(truncate(layout.bodyFile(hash, slot: 1), off_t(size)) == 0)
        let put = Journal.Put(hash: hash, size: size, metaSize: UInt32(metaSize), isInline: false, slot: 1,
                              checksum: 1, created: 1, accessed: 1, expires: nil)
        let journal = FileHandle(forWritingAtPath: dir.cache.path + "/journal")!
        journal.seekToEndOfFile()
        journal.write(Data(Journal.encode(.put(put))))
        try journal.close()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(inlineThreshold: 0))
        #expect(cache.data(for: Self.victim) == nil)
        #expect(cache.data(for: Self.bystander) == Self.otherValue)
        try cache.close()
    }

    // MARK: - Damage, byte by byte

    /// Writes `files` (``snapshot(_:)``'s form) as the directory `url`, removing what was there.
    func restore(_ files: [String: [UInt8]], to url: URL) throws {
        try? FileManager.default.removeItem(at: url)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        for (name, bytes) in files.sorted(by: { $0.key < $1.key }) {
            let path = url.appendingPathComponent(name).path
            if name.hasSuffix("/") {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } else {
                try writeFile(path, bytes)
                #expect(chmod(path, 0o600) == 0)
            }
        }
    }

    /// Which file of the victim's entry a trial damages.
    enum DamagedFile: String, CaseIterable, Sendable { case inlineMeta, meta, body, journal }

    /// The ways one byte is damaged.
    static let byteDamages: [(name: String, apply: @Sendable (UInt8) -> UInt8)] = [
        ("zeroed", { _ in 0 }), ("inverted", { ~$0 }), ("low bit flipped", { $0 ^ 1 }),
    ]

    /// Damages every byte of one of the victim's files (every 41st of a body, and its first and
    /// last), one at a time, in a copy of a closed cache, and does what a fresh process does with
    /// it: opens it, reads both keys every way, verifies, repairs, and opens it again. Nothing
    /// may trap; a read gives the value stored or nil; the other entry reads whole throughout
    /// (but for damage to the journal, where a record lost loses its entry); a verify and a repair
    /// finish, or fail with a `DiskCacheError`.
    @Test(arguments: DamagedFile.allCases)
    func everyByteOfAnEntryFileDamagedIsAMissOrAnErrorNeverATrap(file: DamagedFile) throws {
        let dir = TemporaryDirectory(inMemory: true)
        let value = randomData(count: file == .inlineMeta ? 100 : 2_000, seed: 11)
        var configuration = configuration(inlineThreshold: file == .inlineMeta ? 1 << 20 : 0)
        configuration.lockTimeout = .milliseconds(200)
        let cache = try DiskCache(directory: dir.cache, configuration: configuration)
        try cache.store(Self.otherValue, for: Self.bystander)
        try cache.store(value, for: Self.victim, metadata: ["type": "text/plain"], expires: Date(timeIntervalSinceNow: 86_400))
        let files = EntryFiles(cache, key: Self.victim)
        try cache.close()
        let target = switch file {
        case .inlineMeta, .meta: files.meta
        case .body: files.body
        case .journal: dir.cache.path + "/journal"
        }
        let name = String(target.dropFirst(dir.cache.path.count + 1))
        let template = try snapshot(dir.cache)
        let original = try #require(template[name])
        let offsets = file == .body
            ? Array(Set(Array(stride(from: 0, to: original.count, by: 41)) + [original.count - 1])).sorted()
            : Array(0..<original.count)
        for offset in offsets {
            for damage in Self.byteDamages {
                var damaged = original
                damaged[offset] = damage.apply(damaged[offset])
                guard damaged != original else { continue }
                var files = template
                files[name] = damaged
                try restore(files, to: dir.cache)
                let trial = "\(file) byte \(offset) of \(original.count) \(damage.name)"
                exercise(dir, value: value, configuration: configuration, bystanderKept: file != .journal, trial)
            }
        }
    }

    /// What a fresh process does with a damaged cache (see the test above).
    func exercise(_ dir: TemporaryDirectory, value: Data, configuration: DiskCache.Configuration, bystanderKept: Bool,
                  _ trial: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for round in 1...2 {
            let cache: DiskCache
            do {
                cache = try DiskCache(directory: dir.cache, configuration: configuration)
            } catch {
                #expect(error is DiskCacheError, "\(trial), round \(round): \(error)", sourceLocation: sourceLocation)
                return
            }
            let read = cache.data(for: Self.victim)
            #expect(read == nil || read == value, "\(trial), round \(round)", sourceLocation: sourceLocation)
            let both = cache.dataAndEntry(for: Self.victim)
            #expect(both == nil || both?.data == value, "\(trial), round \(round)", sourceLocation: sourceLocation)
            if let entry = cache.entry(for: Self.victim) { #expect(entry.key == Self.victim, "\(trial)", sourceLocation: sourceLocation) }
            let handedOut = try? cache.withFile(for: Self.victim) { try Data(contentsOf: $0.url) }
            #expect(handedOut == nil || handedOut == .some(nil) || handedOut == .some(value), "\(trial)", sourceLocation: sourceLocation)
            let other = cache.data(for: Self.bystander)
            #expect(other == Self.otherValue || (!bystanderKept && other == nil), "\(trial), round \(round)", sourceLocation: sourceLocation)
            for repair in [false, true] {
                do {
                    _ = try cache.verify(repair: repair)
                } catch {
                    #expect(error is DiskCacheError, "\(trial), verify(repair: \(repair)): \(error)", sourceLocation: sourceLocation)
                }
            }
            #expect(cache.data(for: Self.victim).map { $0 == value } ?? true, "\(trial), after the repair", sourceLocation: sourceLocation)
            #expect(cache.data(for: Self.bystander) == other, "\(trial), after the repair", sourceLocation: sourceLocation)
            do { try cache.close() } catch {
                #expect(error is DiskCacheError, "\(trial), close: \(error)", sourceLocation: sourceLocation)
            }
        }
    }

    /// Bytes appended to a `.meta` file (a read takes only the length its entry records, so it
    /// still reads well) must not carry over into another entry when the file is retired and
    /// written over for it: that entry would then fail its verify.
    @Test func bytesAppendedToAMetaFileDoNotOutliveItsReuse() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(inlineThreshold: 1 << 20))
        try cache.store(Self.value, for: Self.victim)
        let meta = EntryFiles(cache, key: Self.victim).meta
        try writeFile(meta, try readFile(meta) + [UInt8](repeating: 0xA5, count: 700))
        #expect(cache.data(for: Self.victim) == Self.value)
        // Replaced: its file is retired (as long as its entry recorded), then taken by a longer one.
        try cache.store(randomData(count: 3000, seed: 9), for: Self.victim)
        try cache.store(Self.value, for: Self.victim + "-longer")
        let report = try cache.verify()
        #expect(report.isHealthy, "\(report.problems)")
        #expect(cache.data(for: Self.victim + "-longer") == Self.value)
        try cache.close()
    }

    // MARK: - The shared page's counters

    /// Words of the shared page's first 96 bytes overwritten while an instance has the cache open
    /// (the magic and version left alone, so that the page still looks like this library's):
    /// every value a follower would turn into an `Int` or a journal offset (the generation, the
    /// journal's base, its record count, its end), alone and with the generation moved on so
    /// that the instance reads `base` and `baseRecords` to switch journals. Each store and read
    /// works or fails with a `DiskCacheError`, an instance opening meanwhile is refused with
    /// one, and once every instance has closed the next open finds every value stored.
    @Test(arguments: [UInt64.max, UInt64(1) << 63, UInt64(1) << 62, (UInt64(1) << 62) - 1] as [UInt64])
    func sharedPageCountersOverwrittenFailCleanly(value: UInt64) throws {
        for field in SharedRegion.Field.allCases {
            for movesGeneration in [false, true] {
                let dir = TemporaryDirectory(inMemory: true)
                var configuration = DiskCache.Configuration.testing()
                configuration.sweepInterval = nil
                configuration.lockTimeout = .milliseconds(100)
                let cache = try DiskCache(directory: dir.cache, configuration: configuration)
                try cache.store(Self.value, for: Self.victim)
                let region = try #require(cache.sharedRegion)
                let trial = "\(field) = \(value)\(movesGeneration ? ", generation moved on" : "")"
                if movesGeneration { region[.generation] = region[.generation] &+ 1 }
                region[field] = value
                var stored = [Self.victim: Self.value]
                do {
                    try cache.store(Self.otherValue, for: Self.bystander)
                    stored[Self.bystander] = Self.otherValue
                } catch {
                    #expect(error is DiskCacheError, "\(trial): \(error)")
                }
                for key in [Self.victim, Self.bystander] {
                    let read = cache.data(for: key)
                    #expect(read == nil || read == stored[key], "\(trial): \(key)")
                }
                do {
                    let other = try DiskCache(directory: dir.cache, configuration: configuration)
                    for key in [Self.victim, Self.bystander] {
                        let read = other.data(for: key)
                        #expect(read == nil || read == stored[key], "\(trial): \(key) in a second instance")
                    }
                    try? other.close()
                } catch {
                    #expect(error is DiskCacheError, "\(trial): \(error)")
                }
                try? cache.close()
                let reopened = try DiskCache(directory: dir.cache, configuration: configuration)
                for (key, data) in stored { #expect(reopened.data(for: key) == data, "\(trial): \(key) after reopening") }
                try reopened.close()
            }
        }
    }

    // MARK: - Housekeeping held elsewhere

    /// A verify while another instance keeps the housekeeping lock longer than the lock timeout
    /// (a long sweep, or a stopped process) fails with `lockTimeout`; it used to trap.
    @Test func verifyWhileAnotherInstanceHoldsHousekeepingFailsWithLockTimeout() throws {
        let dir = TemporaryDirectory()
        var configuration = DiskCache.Configuration.testing()
        configuration.sweepInterval = nil
        configuration.lockTimeout = .milliseconds(100)
        let first = try DiskCache(directory: dir.cache, configuration: configuration)
        let second = try DiskCache(directory: dir.cache, configuration: configuration)
        try first.store(Self.value, for: Self.victim)
        let outcome = try second.asHousekeeper(wait: true) { () -> Result<DiskCache.VerificationReport, any Error> in
            Result { try first.verify() }
        }
        guard case .failure(let error as DiskCacheError)? = outcome else {
            Issue.record("expected a DiskCacheError, got \(String(describing: outcome))")
            return
        }
        #expect(error.code == .lockTimeout)
        // Once it is let go, the verify runs.
        #expect(try first.verify().isHealthy)
        #expect(first.data(for: Self.victim) == Self.value)
        try second.close()
        try first.close()
    }
}

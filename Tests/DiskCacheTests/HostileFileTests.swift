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
}

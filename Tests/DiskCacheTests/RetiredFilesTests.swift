@testable import DiskCache
import DiskCacheLocking
import Foundation
import Testing
import TestSupport

/// The `.meta` files of replaced and removed entries are moved to `retired/` and written again
/// for later entries (`RetiredFiles`) instead of being unlinked and created anew.
struct RetiredFilesTests {
    func inode(_ path: String) -> UInt64? {
        var info = stat()
        return lstat(path, &info) == 0 ? UInt64(info.st_ino) : nil
    }

    func retiredCount(_ dir: TemporaryDirectory) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: dir.cache.appendingPathComponent("retired").path).count) ?? 0
    }

    @Test func aReplacedEntrysMetadataFileIsWrittenAgainForTheNextEntry() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        try cache.store(bytes("first"), for: "a")
        let first = try #require(inode(EntryFiles(cache, key: "a").meta))
        try cache.store(Data(repeating: 7, count: 2_000), for: "a")
        #expect(retiredCount(dir) == 1)
        // A longer file than the one it reuses (a shorter one is never written over a longer).
        let long = Data(repeating: 9, count: 1_000)
        try cache.store(long, for: "b", metadata: ["m": "1"])
        #expect(inode(EntryFiles(cache, key: "b").meta) == first)
        #expect(retiredCount(dir) == 0)
        #expect(cache.data(for: "a") == Data(repeating: 7, count: 2_000) && cache.data(for: "b") == long)
        #expect(cache.entry(for: "b")?.metadata == ["m": "1"])
        #expect(try cache.verify().isHealthy)
        // A removed entry's file is retired too; closing removes what is left.
        try cache.removeValue(for: "a")
        #expect(retiredCount(dir) == 1)
        try cache.close()
        #expect(retiredCount(dir) == 0)
        let reopened = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(reopened.data(for: "b") == long && reopened.data(for: "a") == nil)
    }

    /// In `.immediate` an eviction's record is synced when its sweep ends, not before the
    /// sweep goes on: its `.meta` file is not written over until then.
    @Test func anEvictedEntrysFileWaitsForItsRecordToBeDurable() throws {
        let files = RetiredFiles()
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        try cache.store(bytes("a"), for: "a")
        try cache.store(bytes("b"), for: "b")
        let record = Journal.Position(generation: 1, end: 100)
        #expect(files.retire(EntryFiles(cache, key: "a").meta, size: 10, to: dir.cache.appendingPathComponent("retired/a").path,
                             layout: cache.layout, record: record))
        #expect(files.retire(EntryFiles(cache, key: "b").meta, size: 10, to: dir.cache.appendingPathComponent("retired/b").path,
                             layout: cache.layout))
        // The older file waits for its record; the one whose record is durable goes first.
        #expect(files.take(atMost: 100)?.hasSuffix("retired/b") == true)
        #expect(files.take(atMost: 100) == nil)
        files.noteSynced(through: Journal.Position(generation: 1, end: 99))
        #expect(files.take(atMost: 100) == nil)
        files.noteSynced(through: Journal.Position(generation: 1, end: 100))
        #expect(files.take(atMost: 100)?.hasSuffix("retired/a") == true)
    }

    /// The same through the store: a sweep's evictions retire their files, and once the sweep
    /// has synced its removals (when it ends) the next put writes over the oldest.
    @Test func aSweepsEvictionsAreReusedOnceSynced() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        var configuration = DiskCache.Configuration.testing(clock: clock)
        configuration.durability = .immediate
        configuration.sweepInterval = nil
        configuration.lowWatermark = 0.9  // a sweep down to 90 % of 2: one entry left
        let cache = try DiskCache(directory: dir.cache, configuration: configuration)
        for n in 0..<4 {
            try cache.store(bytes("value \(n)"), for: "k\(n)")
            clock.advance(seconds: 1)
        }
        let oldest = try #require(inode(EntryFiles(cache, key: "k0").meta))
        cache.countLimit = 2
        #expect(cache.sweep().totalRemovedEntries == 3)
        #expect(retiredCount(dir) == 3)
        try cache.store(bytes("a later and longer value"), for: "later")
        #expect(inode(EntryFiles(cache, key: "later").meta) == oldest)
        #expect(retiredCount(dir) == 2)
        #expect(cache.data(for: "later") == bytes("a later and longer value"))
        #expect(try cache.verify().isHealthy)
    }

    /// A reader that opened an entry's `.meta` file before the entry was removed, and reads it
    /// after the file was written again for another entry, gets a miss: never the other
    /// entry's bytes, and nothing counted as damage.
    @Test func aFileWrittenAgainWhileAReaderHasItOpenIsNotReadAsItsEntry() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        try cache.store(bytes("a's value"), for: "a")
        let path = EntryFiles(cache, key: "a").meta
        let reused = try #require(inode(path))
        let fired = PthreadMutex(false)
        let token = FileSystemObservers.add { event in
            guard case .open(_, let opened, false, _) = event, opened == path,
                  fired.withLock({ fired in defer { fired = true }; return !fired }) else { return }
            // Between the reader's open and its read: `a` removed, its file retired and written for `b`.
            try? cache.removeValue(for: "a")
            _ = try? cache.store(bytes("b's value"), for: "b")
        }
        defer { FileSystemObservers.remove(token) }
        #expect(cache.data(for: "a") == nil)
        #expect(fired.withLock { $0 })
        #expect(inode(EntryFiles(cache, key: "b").meta) == reused)
        #expect(cache.data(for: "b") == bytes("b's value"))
        #expect(cache.statistics.corruptEntriesRemoved == 0)
    }

    @Test func filesACrashLeftInRetiredAreRemovedAtOpen() throws {
        let dir = TemporaryDirectory()
        do {
            let cache = try DiskCache(directory: dir.cache, configuration: .testing())
            try cache.store(bytes("one"), for: "k")
            try cache.store(bytes("two"), for: "k")
            #expect(retiredCount(dir) == 1)
            try cache.flush()
            // Not closed, as after `kill -9`: the retired file stays.
            cache.maintenance.stop()
            cache.state.withLock { $0.isClosed = true }
            cache.locks.withLock { $0 = [] }
        }
        let reopened = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(retiredCount(dir) == 0)
        #expect(reopened.data(for: "k") == bytes("two"))
        #expect(try reopened.verify().isHealthy)
    }
}

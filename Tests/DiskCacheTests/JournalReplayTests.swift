@testable import DiskCache
import Foundation
import MemoryCache
import DiskCacheLocking
import Testing
import TestSupport

/// Recovery from damaged journals, written byte by byte.
struct JournalReplayTests {
    /// A closed cache holding k0…k(n-1); returns its journal's bytes.
    func makeCache(_ dir: TemporaryDirectory, entries: Int = 5) throws -> [UInt8] {
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        for i in 0..<entries { try cache.store(bytes("value \(i)"), for: "k\(i)") }
        try cache.close()
        return try readFile(dir.cache.appendingPathComponent("journal").path)
    }

    var journalRecordSizes: (put: Int, close: Int) {
        (Journal.recordOverhead + Journal.putPayloadSize, Journal.recordOverhead)
    }

    /// The sample in Journal.swift's doc comment is the journal of a cache holding "greeting",
    /// then closed, byte for byte as far as it spells bytes out: each sample line's offset and
    /// hex bytes (up to the first placeholder such as `<61 payload bytes>`).
    @Test func theJournalSampleInTheSourceIsTheRealFormat() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        try cache.store(bytes("hello"), for: "greeting")
        try cache.close()
        let journal = try readFile(dir.cache.appendingPathComponent("journal").path)
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/DiskCache/Internal/Format/Journal.swift")
        let text = try String(contentsOf: source, encoding: .utf8)
        let sample = text.components(separatedBy: "\n")
            .drop { !$0.contains("A sample, a cache holding \"greeting\" then closed") }
            .dropFirst(2)
            .prefix { $0.hasPrefix("/// 000000") }
        #expect(sample.count == 3)
        for line in sample {
            let words = line.dropFirst(4).split(separator: " ")
            let offset = try #require(Int(words[0], radix: 16))
            let spelled = words.dropFirst().prefix { $0.count == 2 && Int($0, radix: 16) != nil }.map { UInt8($0, radix: 16)! }
            #expect(!spelled.isEmpty)
            #expect(Array(journal[offset..<min(journal.count, offset + spelled.count)]) == spelled, "\(line)")
        }
    }

    @Test func journalStartsWithHeaderAndHoldsOneRecordPerWrite() throws {
        let dir = TemporaryDirectory()
        let journal = try makeCache(dir, entries: 3)
        #expect(Array(journal[0..<8]) == Array("DCJOURNL".utf8))
        #expect(journal.count == Journal.headerSize + 3 * journalRecordSizes.put + journalRecordSizes.close)
        var records: [Journal.Record] = []
        let summary = journal.withUnsafeBytes { Journal.replay($0) { records.append($0) } }
        #expect(summary.records == 4)
        #expect(summary.endedCleanly)
        #expect(records.last == .close)
    }

    /// The journal cut at every byte offset inside its last PUT record: the cut record is
    /// discarded, every earlier entry survives, and the file is truncated to the last good record.
    @Test func truncatedTailIsDiscardedAtEveryOffset() throws {
        let dir = TemporaryDirectory()
        var journal = try makeCache(dir, entries: 4)
        // Drop the CLOSE record so the last record is the PUT of k3.
        journal.removeLast(journalRecordSizes.close)
        let lastStart = journal.count - journalRecordSizes.put
        let journalPath = dir.cache.appendingPathComponent("journal").path
        for cut in lastStart..<journal.count {
            try writeFile(journalPath, Array(journal[0..<cut]))
            let cache = try DiskCache(directory: dir.cache, configuration: .testing())
            #expect(cache.count == 3, "cut at \(cut)")
            for i in 0..<3 { #expect(cache.data(for: "k\(i)") == bytes("value \(i)"), "cut at \(cut)") }
            #expect(cache.data(for: "k3") == nil, "cut at \(cut)")
            // Zeros that end the torn bytes read as space written ahead, not as the tail.
            let torn = journal[lastStart..<cut]
            #expect(cache.statistics.recovery.truncatedBytes == (torn.lastIndex { $0 != 0 }.map { $0 + 1 } ?? lastStart) - lastStart)
            #expect(cache.statistics.recovery.wasUncleanShutdown)
            try cache.close()
            // The torn bytes were cut before anything was appended after them.
            let after = try readFile(journalPath)
            #expect(Array(after[0..<lastStart]) == Array(journal[0..<lastStart]))
            // What follows them is whole records again (the reads' ACCESS batch; CLOSE too if the
            // orphan scan finished before the close).
            let summary = after.withUnsafeBytes { Journal.replay($0) { _ in } }
            #expect(summary.truncatedBytes == 0 && summary.corruptRegions == 0)
        }
    }

    /// A flipped byte anywhere inside a middle record loses that record only.
    @Test(arguments: [0, 3, 4, 5, 20, 40, 65, 66, 73])
    func flippedByteInMiddleRecordLosesOnlyThatRecord(offsetInRecord: Int) throws {
        let dir = TemporaryDirectory()
        var journal = try makeCache(dir, entries: 5)
        let put = journalRecordSizes.put
        let secondRecord = Journal.headerSize + put  // the PUT of k1
        journal[secondRecord + offsetInRecord] ^= 0x5A
        try writeFile(dir.cache.appendingPathComponent("journal").path, journal)
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(cache.data(for: "k1") == nil)
        for i in [0, 2, 3, 4] { #expect(cache.data(for: "k\(i)") == bytes("value \(i)"), "k\(i)") }
        #expect(cache.statistics.recovery.corruptRegions == 1)
        #expect(cache.statistics.recovery.truncatedBytes == 0)
    }

    @Test func missingJournalIsRebuiltByScanningTheShards() throws {
        let dir = TemporaryDirectory()
        do {
            let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 100))
            try cache.store(bytes("inline"), for: "small", metadata: ["m": "1"])
            try cache.store(randomData(count: 5000, seed: 1), for: "large")
            try cache.close()
        }
        try FileManager.default.removeItem(at: dir.cache.appendingPathComponent("journal"))
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(cache.statistics.recovery.rebuiltByScan)
        #expect(cache.statistics.recovery.entriesRecoveredByScan == 2)
        #expect(cache.data(for: "small") == bytes("inline"))
        #expect(cache.entry(for: "small")?.metadata == ["m": "1"])
        #expect(cache.data(for: "large") == randomData(count: 5000, seed: 1))
        try cache.close()
        // The rebuilt journal is used from then on.
        let again = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(!again.statistics.recovery.rebuiltByScan)
        #expect(again.count == 2)
    }

    @Test func scanDropsEntriesWhoseFilesDoNotCheckOut() throws {
        let dir = TemporaryDirectory()
        var files: [String: EntryFiles] = [:]
        do {
            let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 0))
            for key in ["good", "truncatedBody", "garbageMeta", "noMeta"] {
                try cache.store(randomData(count: 3000, seed: 3), for: key)
                files[key] = EntryFiles(cache, key: key)
            }
            try cache.close()
        }
        try FileManager.default.removeItem(at: dir.cache.appendingPathComponent("journal"))
        try writeFile(files["truncatedBody"]!.body, Array(try readFile(files["truncatedBody"]!.body).prefix(100)))
        try writeFile(files["garbageMeta"]!.meta, Array("bplist00 not really".utf8))
        try FileManager.default.removeItem(atPath: files["noMeta"]!.meta)
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(cache.count == 1)
        #expect(cache.data(for: "good") == randomData(count: 3000, seed: 3))
        for key in ["truncatedBody", "garbageMeta", "noMeta"] {
            #expect(cache.data(for: key) == nil)
            #expect(!fileExists(files[key]!.meta) && !fileExists(files[key]!.body), "\(key)'s files are gone")
        }
    }

    @Test func unreadableJournalHeaderIsMovedAsideAndRebuilt() throws {
        let dir = TemporaryDirectory()
        var journal = try makeCache(dir, entries: 3)
        journal[2] ^= 0xFF
        try writeFile(dir.cache.appendingPathComponent("journal").path, journal)
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(cache.statistics.recovery.rebuiltByScan)
        #expect(cache.count == 3)
        for i in 0..<3 { #expect(cache.data(for: "k\(i)") == bytes("value \(i)")) }
        #expect(try readFile(dir.cache.appendingPathComponent("journal.corrupt").path) == journal)
    }

    @Test func leftoversInTmpAreRemovedAtOpen() throws {
        let dir = TemporaryDirectory()
        _ = try makeCache(dir, entries: 1)
        let tmp = dir.cache.appendingPathComponent("tmp")
        try writeFile(tmp.appendingPathComponent("0123-7.body").path, [1, 2, 3])
        try FileManager.default.createDirectory(at: tmp.appendingPathComponent("trash-3/ab"), withIntermediateDirectories: true)
        try writeFile(tmp.appendingPathComponent("trash-3/ab/x").path, [1])
        try writeFile(dir.cache.appendingPathComponent("journal.tmp").path, [9, 9, 9])
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp.path).isEmpty)
        #expect(!fileExists(dir.cache.appendingPathComponent("journal.tmp").path))
        #expect(cache.statistics.recovery.temporaryFilesRemoved == 2)
        #expect(cache.data(for: "k0") == bytes("value 0"))
    }

    /// Files renamed into place whose journal record never made it (the process died in
    /// between) are not served and are removed by the scan after an unclean shutdown.
    @Test func filesTheJournalDoesNotVouchForAreRemovedAfterUncleanShutdown() throws {
        let dir = TemporaryDirectory()
        var orphan: EntryFiles!
        var journal: [UInt8] = []
        do {
            let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 0))
            try cache.store(bytes("kept"), for: "kept")
            journal = try readFile(dir.cache.appendingPathComponent("journal").path)
            try cache.store(bytes("never committed"), for: "orphan")
            orphan = EntryFiles(cache, key: "orphan")
            try cache.close()
        }
        // Roll the journal back to before the orphan's PUT: its files remain, no record vouches for them.
        try writeFile(dir.cache.appendingPathComponent("journal").path, journal)
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(cache.statistics.recovery.wasUncleanShutdown)
        #expect(cache.data(for: "orphan") == nil)
        #expect(cache.data(for: "kept") == bytes("kept"))
        // The scan runs in the background; closing waits for it.
        let deadline = Date().addingTimeInterval(10)
        // The count is updated after the unlinks: wait for both.
        while (fileExists(orphan.meta) || fileExists(orphan.body) || cache.statistics.recovery.orphanFilesRemoved < 2)
                && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.01)
        }
        #expect(!fileExists(orphan.meta))
        #expect(!fileExists(orphan.body))
        #expect(cache.statistics.recovery.orphanFilesRemoved == 2)
    }

    @Test func compactionKeepsEveryLiveEntryAndShrinksTheJournal() throws {
        let dir = TemporaryDirectory()
        var configuration = DiskCache.Configuration.testing()
        configuration.compactionThreshold = 50
        let cache = try DiskCache(directory: dir.cache, configuration: configuration)
        for round in 0..<10 {
            for i in 0..<40 { try cache.store(bytes("r\(round) v\(i)"), for: "k\(i)") }
        }
        try cache.removeValue(for: "k0")
        // Compaction runs on the background queue after writes; wait for it.
        let deadline = Date().addingTimeInterval(10)
        while cache.statistics.compactions == 0 && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(cache.statistics.compactions >= 1)
        // On a loaded machine the queue may still owe the compaction the last writes asked for.
        while cache.journalStatistics.redundantRecords >= 50 && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        try cache.close()
        let journalSize = try readFile(dir.cache.appendingPathComponent("journal").path).count
        // Uncompacted it would hold 401 records; compacted, the 40 live ones plus what came after
        // the last compaction (compaction starts at 50 redundant records, ≥ the live count).
        #expect(journalSize < Journal.headerSize + 150 * journalRecordSizes.put)
        let reopened = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(reopened.count == 39)
        #expect(reopened.data(for: "k0") == nil)
        for i in 1..<40 { #expect(reopened.data(for: "k\(i)") == bytes("r9 v\(i)")) }
    }

    /// Access times persist through the journal, so LRU order survives a restart.
    @Test func accessTimesSurviveReopen() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        do {
            let cache = try DiskCache(directory: dir.cache, configuration: .testing(clock: clock))
            try cache.store(bytes("a"), for: "a")
            clock.advance(seconds: 100)
            _ = cache.data(for: "a")
            try cache.close()
        }
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(clock: clock))
        let entry = try #require(cache.entry(for: "a"))
        #expect(entry.lastAccessed == clock.date)
        #expect(entry.created == clock.date.addingTimeInterval(-100))
    }

    /// Access times are kept to the second: a read in the second the entry was last stored or
    /// read notes nothing for the journal, a read in a later second notes its time once. (Under
    /// LRU; S3-FIFO also notes the reads that raise an entry's frequency, three at most.)
    @Test func onlyAReadThatMovesTheAccessSecondIsNoted() throws {
        let dir = TemporaryDirectory()
        let clock = ManualClock()
        var configuration = DiskCache.Configuration.testing(clock: clock)
        configuration.evictionPolicy = .leastRecentlyUsed
        let cache = try DiskCache(directory: dir.cache, configuration: configuration)
        func pending() -> Int { cache.state.withLock { $0.pendingAccess.count } }
        try cache.store(bytes("a"), for: "a")
        for _ in 0..<5 { #expect(cache.data(for: "a") == bytes("a")) }
        #expect(pending() == 0)
        clock.advance(seconds: 1)
        for _ in 0..<5 { #expect(cache.data(for: "a") == bytes("a")) }
        // One noted (a maintenance tick may have journaled it already, so at most one is left).
        #expect(pending() <= 1)
        #expect(cache.entry(for: "a")?.lastAccessed == clock.date)
        try cache.close()
        let reopened = try DiskCache(directory: dir.cache, configuration: .testing(clock: clock))
        #expect(reopened.entry(for: "a")?.lastAccessed == clock.date)
    }

    /// PUT records (with valid checksums) claiming bodies of nearly 2^62 bytes each: their sum
    /// overflowed the index's running totals and trapped the open. Entries that would take the
    /// totals past 2^62 bytes (more than any volume holds) are dropped like damaged records,
    /// so that no sum of sizes can overflow anywhere.
    @Test func aJournalClaimingExabytesOpensWithTheEntriesThatFit() throws {
        let dir = TemporaryDirectory()
        var journal = try makeCache(dir, entries: 2)
        journal.removeLast(journalRecordSizes.close)
        // 2^61 fits beside the two real entries; each 2^62 - 1 after it would pass 2^62.
        for (i, size) in [1 << 61, IndexEntry.maximumBodySize, IndexEntry.maximumBodySize, IndexEntry.maximumBodySize].enumerated() {
            journal += Journal.encode(.put(Journal.Put(
                hash: KeyHash(high: UInt64(i), low: 42), size: size, metaSize: 200, isInline: false,
                slot: 0, checksum: 0, created: 1, accessed: 1, expires: nil)))
        }
        try writeFile(dir.cache.appendingPathComponent("journal").path, journal)
        var configuration = DiskCache.Configuration.testing()
        configuration.sweepInterval = nil
        let cache = try DiskCache(directory: dir.cache, configuration: configuration)
        #expect(cache.count == 3)
        #expect(cache.logicalSize <= Index.maximumTotal)
        #expect(cache.totalSize > 0)
        for i in 0..<2 { #expect(cache.data(for: "k\(i)") == bytes("value \(i)")) }
        try cache.close()
    }

    @Test func randomGarbageAppendedToTheJournalIsCutAndEntriesSurvive() throws {
        let dir = TemporaryDirectory()
        var journal = try makeCache(dir, entries: 4)
        journal += [UInt8](randomData(count: 10_000, seed: 77))
        try writeFile(dir.cache.appendingPathComponent("journal").path, journal)
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(cache.count == 4)
        #expect(cache.statistics.recovery.truncatedBytes == 10_000)
    }
}

struct OrphanScanTests {
    /// A close that cuts the orphan scan short writes no clean-shutdown record, so the next open
    /// scans again and the orphans do not outlive it.
    @Test func closeBeforeTheOrphanScanFinishesLeavesTheNextOpenUnclean() throws {
        let dir = TemporaryDirectory()
        var journal: [UInt8] = []
        var orphan = ""
        do {
            let cache = try DiskCache(directory: dir.cache, configuration: .testing())
            try cache.store(bytes("kept"), for: "kept")
            journal = try readFile(dir.cache.appendingPathComponent("journal").path)
            try cache.store(bytes("orphan"), for: "orphan")
            orphan = EntryFiles(cache, key: "orphan").meta
            try cache.close()
        }
        try writeFile(dir.cache.appendingPathComponent("journal").path, journal)
        do {
            let cache = try DiskCache(directory: dir.cache, configuration: .testing())
            // Simulate a close that stopped the scan before it finished.
            cache.state.withLock { $0.orphanScanPending = true }
            cache.maintenance.queue.sync {}
            cache.state.withLock { $0.orphanScanPending = true }
            try cache.close()
        }
        try writeFile(orphan, Array("still an orphan".utf8))
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(cache.statistics.recovery.wasUncleanShutdown)
        #expect(try cache.verify().isHealthy)
        #expect(!fileExists(orphan))
    }
}

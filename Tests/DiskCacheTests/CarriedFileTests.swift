@testable import DiskCache
import Foundation
import Testing

/// `.immediate` writes of inline entries commit with one flush: the journal record carries the
/// whole `.meta` file (PUT+FILE) and the file itself is synced later, at a checkpoint. These
/// tests make the state a power cut before that checkpoint leaves, by hand: a copy of the open
/// cache's directory (its journal has no CLOSE record) in which the entry's file is missing,
/// cut short or zeroed, as unsynced data can be after a power cut. The timed checkpoint is
/// pushed an hour out, so that only `flush()` and `close()` make files durable here.
struct CarriedFileTests {
    func configuration(inlineThreshold: Int = 8 << 10) -> DiskCache.Configuration {
        var configuration = DiskCache.Configuration.testing(durability: .immediate, inlineThreshold: inlineThreshold)
        configuration.checkpointInterval = .seconds(3600)
        return configuration
    }

    enum Damage: String, CaseIterable {
        case missing, truncated, zeroed
    }

    func apply(_ damage: Damage, to path: String) throws {
        switch damage {
        case .missing:
            try FileManager.default.removeItem(atPath: path)
        case .truncated:
            let bytes = try readFile(path)
            try writeFile(path, Array(bytes[0..<(bytes.count / 2)]))
        case .zeroed:
            let count = try readFile(path).count
            try writeFile(path, [UInt8](repeating: 0, count: count))
        }
    }

    /// A copy of the directory of `cache`, which stays open (so the copy is what a crash leaves).
    func crashImage(of dir: TemporaryDirectory) throws -> URL {
        let image = dir.url.appendingPathComponent("image-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: dir.cache, to: image)
        return image
    }

    /// The path of `file` (inside `dir.cache`) in `image`.
    func path(_ file: String, in image: URL, of dir: TemporaryDirectory) -> String {
        image.path + file.dropFirst(dir.cache.path.count)
    }

    func recordTypes(_ journalPath: String) throws -> [Journal.RecordType] {
        let journal = try readFile(journalPath)
        var types: [Journal.RecordType] = []
        _ = journal.withUnsafeBytes { Journal.replay($0) { _, type, _ in types.append(type) } }
        return types
    }

    @Test(arguments: Damage.allCases)
    func anAcknowledgedWriteWhoseFileWasLostIsRestoredFromTheJournal(damage: Damage) throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration())
        let value = randomData(count: 3000, seed: 7)
        try cache.store(bytes("first"), for: "k")
        try cache.store(value, for: "k")  // the second slot: the first value's files are gone
        try cache.store(bytes("kept"), for: "other")
        let files = EntryFiles(cache, key: "k")
        let original = try readFile(files.meta)
        #expect(try recordTypes(dir.cache.appendingPathComponent("journal").path).filter { $0 == .putWithFile }.count == 3)

        let image = try crashImage(of: dir)
        try apply(damage, to: path(files.meta, in: image, of: dir))
        let reopened = try DiskCache(directory: image, configuration: configuration())
        #expect(reopened.statistics.recovery.wasUncleanShutdown)
        #expect(reopened.statistics.recovery.filesRestoredFromJournal == 1)
        #expect(reopened.data(for: "k") == value)
        #expect(reopened.data(for: "other") == bytes("kept"))
        #expect(try readFile(path(files.meta, in: image, of: dir)) == original)
        try reopened.close()
        try cache.close()
    }

    /// `flush()` (like the checkpoint every second) makes the files durable and says so in the
    /// journal: a recovery then leaves the files before it alone, and restores those after it.
    @Test func aCheckpointEndsTheRecoveryOfEarlierFiles() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration())
        try cache.store(bytes("before"), for: "early")
        try cache.flush()
        try cache.store(bytes("after"), for: "late")
        let early = EntryFiles(cache, key: "early").meta
        let late = EntryFiles(cache, key: "late").meta
        let types = try recordTypes(dir.cache.appendingPathComponent("journal").path)
        #expect(types == [.putWithFile, .checkpoint, .putWithFile])

        let image = try crashImage(of: dir)
        // Gone after a checkpoint said it was durable: damage a power cut cannot cause, found
        // by the read as any damage is (a miss), not restored.
        try apply(.missing, to: path(early, in: image, of: dir))
        try apply(.missing, to: path(late, in: image, of: dir))
        let reopened = try DiskCache(directory: image, configuration: configuration())
        #expect(reopened.statistics.recovery.filesRestoredFromJournal == 1)
        #expect(reopened.data(for: "late") == bytes("after"))
        #expect(reopened.data(for: "early") == nil)
        try reopened.close()
        try cache.close()
    }

    /// Only `.immediate` writes of inline entries carry their file; a clean close (which syncs
    /// everything first) leaves nothing for the next open to restore.
    @Test func onlyImmediateInlineWritesCarryTheirFile() throws {
        let dir = TemporaryDirectory()
        var configuration = configuration(inlineThreshold: 100)
        let cache = try DiskCache(directory: dir.cache, configuration: configuration)
        try cache.store(bytes("small"), for: "inline")
        try cache.store(randomData(count: 500, seed: 1), for: "body file")
        try cache.close()
        let journal = dir.cache.appendingPathComponent("journal").path
        #expect(try recordTypes(journal) == [.putWithFile, .put, .close])

        configuration.durability = .none
        let unsynced = try DiskCache(directory: dir.cache, configuration: configuration)
        #expect(unsynced.statistics.recovery.filesRestoredFromJournal == 0)
        try unsynced.store(bytes("small again"), for: "inline")
        #expect(try recordTypes(journal).last == .put)
        try unsynced.close()
    }

    /// A CHECKPOINT covers the PUT+FILE records before the journal's end when its checkpoint
    /// began, named by its distance back from itself: still true after a compaction copies it
    /// and the records around it into a new file at other offsets (an absolute offset would
    /// then cover records the checkpoint never synced).
    @Test func aCheckpointCoversTheSameRecordsWhereverACompactionMovesIt() throws {
        func put(_ n: UInt64, file: [UInt8]) -> Journal.Put {
            Journal.Put(hash: KeyHash(high: n, low: n), size: Int64(file.count), metaSize: UInt32(file.count), isInline: true,
                        slot: 0, checksum: n, created: 1, accessed: 1, expires: nil)
        }
        let early = [UInt8](repeating: 1, count: 40)
        let late = [UInt8](repeating: 2, count: 40)
        var tail = early.withUnsafeBytes { Journal.encodePut(put(1, file: early), carrying: [$0]) }
        let covered = tail.count  // the checkpoint began when the journal ended here
        tail += late.withUnsafeBytes { Journal.encodePut(put(2, file: late), carrying: [$0]) }
        tail += Journal.encode(.checkpoint(back: Int64(tail.count - covered)))
        func uncheckpointed(_ journal: [UInt8]) -> [UInt64] {
            var carried = Journal.CarriedFiles()
            _ = Index.replaying(journal, blockSize: 4096, carried: &carried)
            return journal.withUnsafeBytes { bytes in
                carried.uncovered.compactMap { offset -> UInt64? in
                    guard case (.put(let put), _, _)? = Journal.decodeRecord(bytes, at: offset) else { return nil }
                    return put.hash.high
                }
            }
        }
        // As written: the late record went in after the checkpoint began, so it is not covered.
        #expect(uncheckpointed(Journal.header() + tail) == [2])
        // The same records after a compaction that wrote other records before them.
        let manyPuts = (3..<40).flatMap { Journal.encode(.put(put(UInt64($0), file: []))) }
        #expect(uncheckpointed(Journal.header() + manyPuts + tail) == [2])
        #expect(uncheckpointed(Journal.header() + tail + Journal.encode(.checkpoint(back: 0))) == [])
    }

    /// A journal of version 1 (which has no PUT+FILE records) is read as it is and its header
    /// rewritten as the current version before anything is appended: an older library then
    /// refuses the journal instead of skipping records it does not know as damage.
    @Test func aVersion1JournalIsUpgradedAtOpen() throws {
        let dir = TemporaryDirectory()
        try makeClosedCache(dir)
        let journalPath = dir.cache.appendingPathComponent("journal").path
        var journal = try readFile(journalPath)
        var header = Array(journal[0..<8]) + [1, 0, 0, 0]
        let check = header.withUnsafeBytes { Checksum.xxh3($0) }
        header += withUnsafeBytes(of: UInt32(truncatingIfNeeded: check).littleEndian) { Array($0) }
        journal.replaceSubrange(0..<16, with: header)
        try writeFile(journalPath, journal)

        let cache = try DiskCache(directory: dir.cache, configuration: configuration())
        #expect(cache.data(for: "k") == bytes("v"))
        let upgraded = try readFile(journalPath)
        #expect(upgraded.withUnsafeBytes { Journal.checkHeader($0) } == .valid)
        #expect(upgraded.withUnsafeBytes { Journal.version(of: $0) } == Journal.journalVersion)
        #expect(Array(upgraded[16..<journal.count - Journal.recordOverhead]) == Array(journal[16..<journal.count - Journal.recordOverhead]))
        try cache.store(bytes("w"), for: "k2")
        try cache.close()
    }
}

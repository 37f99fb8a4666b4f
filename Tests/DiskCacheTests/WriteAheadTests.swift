@testable import DiskCache
import Foundation
import Testing

/// The journal's zeros written ahead: an open cache writes zeros past the end of its records a
/// chunk at a time, so that each append overwrites blocks the file already has (the `.immediate`
/// sync then flushes no metadata). These tests check that the zeros are where they should be
/// while the cache is open, that no reader takes them for damage, and that opening and closing
/// cut them off.
struct WriteAheadTests {
    static let chunk = 16 << 10

    func configuration(_ sharing: DiskCache.Sharing, durability: DiskCache.Durability = .none) -> DiskCache.Configuration {
        var configuration = DiskCache.Configuration.testing(durability: durability)
        configuration.sharing = sharing
        configuration.journalWriteAhead = Self.chunk
        return configuration
    }

    func journalLength(_ cache: DiskCache) -> Int {
        cache.state.withLock { Int($0.journalLength) }
    }

    static let sharingModes: [DiskCache.Sharing] = [.exclusive, .shared]

    @Test(arguments: sharingModes)
    func appendsGoIntoZerosWrittenAheadAndCloseCutsThem(sharing: DiskCache.Sharing) throws {
        let dir = TemporaryDirectory()
        let journalPath = dir.cache.appendingPathComponent("journal").path
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(sharing, durability: .immediate))
        var stored: [String: Data] = [:]
        var zerosSeen = 0
        // Enough records to cross several chunks.
        for i in 0..<120 {
            let value = randomData(count: 300 + i, seed: UInt64(i))
            try cache.store(value, for: "key \(i)")
            stored["key \(i)"] = value
            let file = try readFile(journalPath)
            let length = journalLength(cache)
            try #require(file.count >= length, "after \(i + 1) stores")
            #expect(file[length...].allSatisfy { $0 == 0 }, "after \(i + 1) stores the file holds only zeros past its records")
            if file.count > length { zerosSeen += 1 }
            #expect(file.count - length <= 2 * Self.chunk)
        }
        #expect(zerosSeen > 100, "zeros past the records after \(zerosSeen) of 120 stores")
        #expect(try readFile(journalPath).count > 2 * Self.chunk, "the zeros were written ahead more than once")
        let open = try readFile(journalPath)
        let summary = open.withUnsafeBytes { Journal.replay($0) { _ in } }
        #expect(summary.validLength == journalLength(cache))
        #expect(summary.writtenAhead == open.count - journalLength(cache))
        #expect(summary.truncatedBytes == 0 && summary.corruptRegions == 0)
        try cache.close()

        let closed = try readFile(journalPath)
        let after = closed.withUnsafeBytes { Journal.replay($0) { _ in } }
        #expect(after.endedCleanly)
        #expect(after.writtenAhead == 0)
        #expect(after.validLength == closed.count)
        let reopened = try DiskCache(directory: dir.cache, configuration: configuration(sharing))
        #expect(!reopened.statistics.recovery.wasUncleanShutdown)
        for (key, value) in stored { #expect(reopened.data(for: key) == value, "\(key)") }
        try reopened.close()
    }

    /// What a crash leaves (a copy of the open cache's directory): a journal that ends in zeros
    /// written ahead. The open reads every record, reports no damage, and cuts the zeros.
    @Test(arguments: sharingModes)
    func aCrashImageWithZerosWrittenAheadOpensWithNoDamage(sharing: DiskCache.Sharing) throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(sharing, durability: .immediate))
        for i in 0..<40 { try cache.store(randomData(count: 500, seed: UInt64(i)), for: "key \(i)") }
        try cache.removeValue(for: "key 3")
        let image = dir.url.appendingPathComponent("image")
        try FileManager.default.copyItem(at: dir.cache, to: image)
        try cache.close()
        let imageJournal = image.appendingPathComponent("journal").path
        let before = try readFile(imageJournal)
        let beforeSummary = before.withUnsafeBytes { Journal.replay($0) { _ in } }
        #expect(beforeSummary.writtenAhead > 0)
        // The inspector counts the records, not the zeros.
        let inspected = try DiskCacheInspector(directory: image).summary
        #expect(inspected.journalSize == Int64(beforeSummary.validLength))
        #expect(inspected.truncatedTailBytes == 0 && inspected.corruptRegions == 0)
        #expect(inspected.entries == 39)

        let reopened = try DiskCache(directory: image, configuration: configuration(sharing))
        let recovery = reopened.statistics.recovery
        #expect(recovery.wasUncleanShutdown)
        #expect(recovery.truncatedBytes == 0)
        #expect(recovery.corruptRegions == 0)
        #expect(reopened.count == 39)
        for i in 0..<40 where i != 3 { #expect(reopened.data(for: "key \(i)") == randomData(count: 500, seed: UInt64(i))) }
        #expect(reopened.data(for: "key 3") == nil)
        #expect(try reopened.verify().isHealthy)
        try reopened.close()
        let cut = try readFile(imageJournal)
        #expect(cut.withUnsafeBytes { Journal.replay($0) { _ in } }.writtenAhead == 0)
    }

    /// Zeros after a clean close's CLOSE record (a power cut can bring them back when the cut
    /// at close was not yet durable) leave the shutdown clean; after a torn record they are
    /// not counted as the torn tail.
    @Test func zerosAfterTheLastRecordAreNotATornTail() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(.exclusive))
        for i in 0..<3 { try cache.store(bytes("value \(i)"), for: "k\(i)") }
        try cache.close()
        let journalPath = dir.cache.appendingPathComponent("journal").path
        let journal = try readFile(journalPath)
        let zeros = [UInt8](repeating: 0, count: 100_000)

        let clean = (journal + zeros).withUnsafeBytes { Journal.replay($0) { _ in } }
        #expect(clean.endedCleanly)
        #expect(clean.truncatedBytes == 0)
        #expect(clean.writtenAhead == zeros.count)
        #expect(clean.validLength == journal.count)

        // A record cut short, then zeros: only the record's bytes are the torn tail.
        let torn = Array(journal[0..<(journal.count - Journal.recordOverhead)]) + [0x3D, 0x00, 0x00, 0x00, 0x01, 0x7F]
        let tornSummary = (torn + zeros).withUnsafeBytes { Journal.replay($0) { _ in } }
        #expect(!tornSummary.endedCleanly)
        #expect(tornSummary.truncatedBytes == 6)
        #expect(tornSummary.writtenAhead == zeros.count)
        #expect(tornSummary.corruptRegions == 0)

        try writeFile(journalPath, journal + zeros)
        let reopened = try DiskCache(directory: dir.cache, configuration: configuration(.exclusive))
        #expect(!reopened.statistics.recovery.wasUncleanShutdown)
        #expect(reopened.statistics.recovery.truncatedBytes == 0)
        for i in 0..<3 { #expect(reopened.data(for: "k\(i)") == bytes("value \(i)")) }
        try reopened.close()
        #expect(try readFile(journalPath).count < journal.count + zeros.count)
    }
}

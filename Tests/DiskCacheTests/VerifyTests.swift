@testable import DiskCache
import Foundation
import Testing

struct VerifyTests {
    @Test func healthyCacheVerifiesClean() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 100))
        for i in 0..<20 { try cache.store(randomData(count: i * 20, seed: UInt64(i)), for: "k\(i)") }
        let report = try cache.verify()
        #expect(report.isHealthy, "\(report.problems)")
        #expect(report.entriesChecked == 20)
        #expect(report.bytesChecked == Int64((0..<20).reduce(0) { $0 + $1 * 20 }))
    }

    @Test func verifyFindsAndRepairFixesDamage() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 0))
        for i in 0..<5 { try cache.store(randomData(count: 500, seed: UInt64(i)), for: "k\(i)") }
        // A corrupt body, a missing body, an orphan file, a file with loose permissions.
        var body = try readFile(EntryFiles(cache, key: "k1").body)
        body[10] ^= 1
        try writeFile(EntryFiles(cache, key: "k1").body, body)
        try FileManager.default.removeItem(atPath: EntryFiles(cache, key: "k2").body)
        let hash = KeyHash(high: 0xABCD_0000_0000_0000, low: 7)
        let orphanDirectory = (cache.layout.metaFile(hash, slot: 0) as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: orphanDirectory, withIntermediateDirectories: true)
        try writeFile(cache.layout.metaFile(hash, slot: 0), [1, 2, 3])
        chmod(EntryFiles(cache, key: "k3").meta, 0o644)

        let report = try cache.verify()
        let kinds = Set(report.problems.map(\.kind))
        #expect(kinds == [.checksumMismatch, .missingBody, .orphanFile, .wrongPermissions])
        #expect(report.problems.first { $0.kind == .checksumMismatch }?.key == "k1")

        let repair = try cache.verify(repair: true)
        #expect(repair.repairs.contains { $0.contains("Removed 1 orphan") })
        #expect(cache.count == 3)
        #expect(try cache.verify().isHealthy)
        #expect(cache.data(for: "k0") == randomData(count: 500, seed: 0))
        #expect(cache.data(for: "k3") == randomData(count: 500, seed: 3))
    }

    @Test func inspectorReadsWithoutWritingAnything() throws {
        let dir = TemporaryDirectory()
        do {
            let cache = try DiskCache(directory: dir.cache, configuration: .testing())
            try cache.store(bytes("v"), for: "k", metadata: ["x": "y"])
            try cache.store(bytes("w"), for: "k")
            try cache.close()
        }
        let journalPath = dir.cache.appendingPathComponent("journal").path
        var journal = try readFile(journalPath)
        journal += [1, 2, 3]  // a torn tail the inspector reports but must not cut
        try writeFile(journalPath, journal)
        let before = try FileManager.default.attributesOfItem(atPath: journalPath)[.modificationDate] as? Date

        let inspector = try DiskCacheInspector(directory: dir.cache)
        #expect(inspector.summary.entries == 1)
        #expect(inspector.summary.truncatedTailBytes == 3)
        #expect(inspector.summary.redundantRecords == 2)  // the first PUT and the CLOSE
        #expect(inspector.data(for: "k") == bytes("w"))
        #expect(inspector.entries().map(\.key) == ["k"])
        let report = inspector.verify()
        #expect(report.problems.map(\.kind) == [.journalTornTail])
        #expect(try readFile(journalPath) == journal)
        #expect(try FileManager.default.attributesOfItem(atPath: journalPath)[.modificationDate] as? Date == before)
    }

    /// What the open found in the journal is reported, repaired, and then no longer reported:
    /// a verify after a successful repair in the same session is healthy.
    @Test func verifyAfterARepairIsHealthyInTheSameSession() throws {
        let dir = TemporaryDirectory()
        do {
            let cache = try DiskCache(directory: dir.cache, configuration: .testing())
            try cache.store(bytes("v"), for: "k")
            try cache.close()
        }
        let journalPath = dir.cache.appendingPathComponent("journal").path
        try writeFile(journalPath, try readFile(journalPath) + [1, 2, 3])
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(try cache.verify().problems.map(\.kind) == [.journalTornTail])
        let repair = try cache.verify(repair: true)
        #expect(repair.problems.map(\.kind) == [.journalTornTail])
        #expect(!repair.repairs.isEmpty)
        let after = try cache.verify()
        #expect(after.isHealthy, "\(after.problems)")
        #expect(cache.data(for: "k") == bytes("v"))
        try cache.close()
    }

    @Test func cacheReachedThroughASymbolicLinkVerifiesClean() throws {
        let dir = TemporaryDirectory()
        let real = dir.url.appendingPathComponent("real")
        do {
            let cache = try DiskCache(directory: real, configuration: .testing())
            try cache.store(bytes("v"), for: "k")
            try cache.close()
        }
        let link = dir.url.appendingPathComponent("link")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: real)
        let cache = try DiskCache(directory: link, configuration: .testing())
        #expect(cache.data(for: "k") == bytes("v"))
        #expect(try cache.verify().isHealthy)
    }

    @Test func inspectorDoesNotKeepAnApplicationFromOpeningTheCache() throws {
        let dir = TemporaryDirectory()
        try makeClosedCache(dir)
        let inspector = try DiskCacheInspector(directory: dir.cache)
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(cache.data(for: "k") == bytes("v"))
        #expect(inspector.data(for: "k") == bytes("v"))
    }

    @Test func inspectorRefusesWhatIsNotACacheAndCreatesNothing() throws {
        let dir = TemporaryDirectory()
        #expect { try DiskCacheInspector(directory: dir.cache) } throws: { ($0 as? DiskCacheError)?.code == .notFound }
        #expect(!fileExists(dir.cache.path))
        try FileManager.default.createDirectory(at: dir.cache, withIntermediateDirectories: true)
        #expect { try DiskCacheInspector(directory: dir.cache) } throws: { ($0 as? DiskCacheError)?.code == .notACache }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.cache.path).isEmpty)
    }

    @Test func inspectorRefusesACacheThatIsOpen() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect { try DiskCacheInspector(directory: dir.cache) } throws: { ($0 as? DiskCacheError)?.code == .locked }
        try cache.close()
        #expect(try DiskCacheInspector(directory: dir.cache).summary.entries == 0)
        // And an owner that holds it exclusively, named by its process.
        var exclusive = DiskCache.Configuration.testing()
        exclusive.sharing = .exclusive
        let owner = try DiskCache(directory: dir.cache, configuration: exclusive)
        #expect { try DiskCacheInspector(directory: dir.cache) } throws: {
            ($0 as? DiskCacheError)?.code == .locked && ($0 as? DiskCacheError)?.message.contains("process \(getpid())") == true
        }
        #expect(try DiskCacheInspector(directory: dir.cache, whileOpen: true).summary.openBy == "\(getpid())")
        try owner.close()
        let shared = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(try DiskCacheInspector(directory: dir.cache, whileOpen: true).summary.openBy == "shared")
        try shared.close()
        #expect(try DiskCacheInspector(directory: dir.cache, whileOpen: true).summary.openBy == nil)
    }

    /// Inspecting never makes an open fail: an inspector reading a long journal over and over
    /// (as `verify` of an open cache and a server's prefix purge do) while the cache is opened
    /// and closed in both sharing modes. (Its probe used to hold the directory exclusively
    /// through the journal's read, and an instance opening meanwhile failed with `.locked`.)
    @Test func anInspectorNeverMakesAnOpenFail() throws {
        let dir = TemporaryDirectory()
        do {
            let cache = try DiskCache(directory: dir.cache, configuration: .testing())
            for i in 0..<5_000 { try cache.store(Data([UInt8(truncatingIfNeeded: i)]), for: "key \(i)") }
            try cache.close()
        }
        let state = Locked((done: false, inspections: 0))
        let url = dir.cache
        let inspector = Thread {
            while state.withLock({ !$0.done && $0.inspections < 5_000 }) {
                if let summary = try? DiskCacheInspector(directory: url, whileOpen: true).summary, summary.entries > 0 {
                    state.withLock { $0.inspections += 1 }
                }
            }
        }
        inspector.start()
        defer { state.withLock { $0.done = true } }
        while state.value.inspections == 0 { usleep(1_000) }
        var failures: [String] = []
        var opens = 0
        // Counts work, not time (a loaded machine does both slowly): at least 40 opens, and
        // until 20 inspections have overlapped them; 4,000 opens at most, by which any running
        // inspector has made 20.
        let inspectedBefore = state.value.inspections
        while opens < 40 || state.value.inspections - inspectedBefore < 20, opens < 4_000 {
            var configuration = DiskCache.Configuration.testing()
            configuration.sharing = opens % 2 == 0 ? .shared : .exclusive
            do {
                let cache = try DiskCache(directory: dir.cache, configuration: configuration)
                try cache.close()
            } catch {
                failures.append("\(configuration.sharing): \(error)")
            }
            opens += 1
        }
        let inspected = state.value.inspections - inspectedBefore
        let failed = failures.count
        #expect(failed == 0, "\(failed) of \(opens) opens failed: \(failures.prefix(3))")
        #expect(opens >= 20 && inspected >= 20, "\(opens) opens, \(inspected) inspections")
    }
}

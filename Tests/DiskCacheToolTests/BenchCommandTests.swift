import DiskCache
import Foundation
import Testing

/// `diskcache bench` run for real with tiny settings: what the report holds, never how fast.
struct BenchCommandTests {
    /// Runs `diskcache bench --json` on 1 KiB bodies in a fresh directory.
    private func report(entries: Int = 50, operations: String = "put,get", _ extra: [String] = []) throws -> [String: Any] {
        let directory = TemporaryDirectory()
        let result = try runTool(["bench", directory.path, "--sizes", "1K", "--entries", "\(entries)", "--duration", "0.05",
                                  "--operations", operations, "--floor-probe-seconds", "0.2", "--json", "--quiet"] + extra)
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(try result.json() as? [String: Any])
    }

    private func rows(_ report: [String: Any], subject: String) -> [[String: Any]] {
        (report["rows"] as? [[String: Any]] ?? []).filter { $0["subject"] as? String == subject }
    }

    @Test func reportNamesTheFloorTheProbeChoseAndWhatEachCandidateDid() throws {
        let report = try report()
        let floors = try #require(report["floors"] as? [[String: Any]])
        #expect(floors.count == 1)
        let floor = try #require(floors.first)
        #expect(floor["size"] as? Int == 1024)
        #expect(["shards", "flat"].contains(floor["layout"] as? String))
        #expect(["renameInDirectory", "renameFromTmp", "tmpfileLink", "exclusiveCreate"].contains(floor["strategy"] as? String))
        #expect(["pread", "read"].contains(floor["readMethod"] as? String))
        let candidates = try #require(floor["candidates"] as? [[String: Any]])
        #expect(candidates.count == 8)
        let chosen = try #require(candidates.first {
            $0["layout"] as? String == floor["layout"] as? String && $0["strategy"] as? String == floor["strategy"] as? String
        })
        let best = candidates.compactMap { $0["putOpsPerSecond"] as? Double }.max() ?? 0
        #expect((chosen["putOpsPerSecond"] as? Double ?? 0) == best)
        #expect(best > 0)
        let notes = report["notes"] as? [String] ?? []
        #expect(notes.contains { $0.hasPrefix("1K floor: ") && $0.contains(floor["description"] as? String ?? "?") })
        #expect(rows(report, subject: "floor").map { $0["operation"] as? String } == ["put", "get"])
    }

    @Test func sqliteRunsByDefaultBesideTheStore() throws {
        let report = try report()
        let sqlite = rows(report, subject: "sqlite")
        #expect(sqlite.map { $0["operation"] as? String } == ["put", "get"])
        for row in sqlite {
            #expect((row["opsPerSecond"] as? Double ?? 0) > 0)
            #expect(row["entries"] as? Int == 50)
        }
        for row in rows(report, subject: "diskcache") {
            #expect((row["ratioToSQLite"] as? Double ?? 0) > 0)
        }
        #expect(report["sqliteVersion"] is String)
        #expect((report["settings"] as? [String: Any])?["compare"] as? [String] == ["sqlite"])
        #expect((report["notes"] as? [String] ?? []).contains { $0.contains("synchronous=NORMAL") })
    }

    /// churn runs each subject at the fill's entries: the store's count limit held (sampled),
    /// and the floor ends with exactly as many files as it was filled with.
    /// cold says how it emptied the page cache.
    @Test func churnHoldsEachSubjectAtTheFillAndColdSaysHowItDropped() throws {
        let directory = TemporaryDirectory()
        let result = try runTool(["bench", directory.path, "--sizes", "1K", "--entries", "200", "--duration", "0.2",
                                  "--operations", "put,cold,churn", "--floor-probe-seconds", "0.2", "--json", "--quiet", "--keep"])
        #expect(result.status == 0, "\(result.stderr)")
        let report = try #require(try result.json() as? [String: Any])
        for subject in ["diskcache", "floor", "sqlite"] {
            #expect(rows(report, subject: subject).compactMap { $0["operation"] as? String } == ["put", "cold", "churn"])
            #expect(rows(report, subject: subject).allSatisfy { ($0["opsPerSecond"] as? Double ?? 0) > 0 })
        }
        let figures = try #require(report["figures"] as? [String: Double])
        let peak = try #require(figures["1K.churn.peakCount"])
        #expect(peak <= 200)
        let coldNote = rows(report, subject: "diskcache").first { $0["operation"] as? String == "cold" }?["note"] as? String ?? ""
        #expect(coldNote.contains("drop_caches") || coldNote.contains("posix_fadvise"), "\(coldNote)")
        let kept = (report["notes"] as? [String] ?? []).first { $0.hasPrefix("kept: ") }
        let root = String(try #require(kept).dropFirst("kept: ".count))
        let floorFiles = try FileManager.default.subpathsOfDirectory(atPath: root + "/floor-1K")
            .filter { $0.split(separator: "/").last?.count == 32 }
        #expect(floorFiles.count == 200)
    }

    @Test func compareNoneRunsNoPeer() throws {
        let report = try report(["--compare", "none"])
        #expect(rows(report, subject: "sqlite").isEmpty)
        #expect(!rows(report, subject: "floor").isEmpty)
        #expect(rows(report, subject: "diskcache").allSatisfy { $0["ratioToSQLite"] == nil })
    }

    @Test func immediateDurabilityRunsSQLiteWithSynchronousFull() throws {
        let report = try report(entries: 8, operations: "put", ["--durability", "immediate"])
        #expect((report["notes"] as? [String] ?? []).contains { $0.contains("synchronous=FULL") })
        #expect(rows(report, subject: "sqlite").allSatisfy { ($0["opsPerSecond"] as? Double ?? 0) > 0 })
    }

    @Test func inlineThresholdDefaultsToTheStoresDefault() throws {
        let report = try report()
        let settings = try #require(report["settings"] as? [String: Any])
        #expect(settings["inlineThreshold"] as? Int == DiskCache.Configuration().inlineThreshold)
    }

    @Test func unknownPeerIsAUsageError() throws {
        let result = try runTool(["bench", "--compare", "sqlite,mysql"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("mysql"))
    }
}

/// `diskcache bench --trace`: the simulations' answers on a trace worked out by hand, and the
/// store's replay beside them.
struct BenchTraceCommandTests {
    private func traceReport(_ trace: String, capacities: String, policies: String = "s3fifo,lru",
                             _ extra: [String] = []) throws -> [String: Any] {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        var argument = trace
        if !trace.hasPrefix("synthetic") {
            let file = directory.url.appendingPathComponent("trace.txt")
            try Data(trace.utf8).write(to: file)
            argument = file.path
        }
        let result = try runTool(["bench", directory.path, "--trace", argument, "--capacities", capacities,
                                  "--policies", policies, "--json", "--quiet"] + extra)
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(try result.json() as? [String: Any])
    }

    private func misses(_ row: [String: Any], simulated policy: String) -> Int? {
        (row["simulated"] as? [String: Any]).flatMap { $0[policy] as? [String: Any] }.flatMap { $0["misses"] as? Int }
    }

    private func misses(_ row: [String: Any], store policy: String) -> Int? {
        (row["store"] as? [[String: Any]])?.first { $0["policy"] as? String == policy }.flatMap { $0["misses"] as? Int }
    }

    @Test func aTraceWorkedOutByHand() throws {
        // Capacity 2. LRU: a b (a) c b a: five misses. Belady keeps a and b, passing c by: three.
        let report = try traceReport("a\nb\na\nc\nb\na\n", capacities: "2", policies: "lru")
        #expect(report["requests"] as? Int == 6)
        #expect(report["objects"] as? Int == 3)
        let row = try #require((report["rows"] as? [[String: Any]])?.first)
        #expect(row["capacity"] as? Int == 2)
        #expect(misses(row, simulated: "LRU") == 5)
        #expect(misses(row, simulated: "Belady") == 3)
        #expect(misses(row, store: "LRU") == 5)
    }

    @Test func admissionWorkedOutByHand() throws {
        // Capacity 2, min-uses 2 (a window of 2 keys), LRU. a, b: stored while there is room;
        // c: declined, then stored on its second miss (a evicted); d, a: declined; a: its
        // second, stored (b evicted). Seven misses, four puts.
        let report = try traceReport("a\nb\nc\nc\nd\na\na\n", capacities: "2", policies: "lru",
                                     ["--min-uses", "2", "--low-watermark", "1"])
        let row = try #require((report["rows"] as? [[String: Any]])?.first)
        #expect(row["minimumUses"] as? Int == 2)
        #expect(misses(row, simulated: "LRU") == 7)
        #expect(misses(row, store: "LRU") == 7)
        let store = try #require((row["store"] as? [[String: Any]])?.first)
        #expect(store["puts"] as? Int == 4)
        let simulated = try #require((row["simulated"] as? [String: Any])?["LRU"] as? [String: Any])
        #expect(simulated["puts"] as? Int == 4)
    }

    @Test func aCapacityInBytesLimitsTheStoresDiskUsage() throws {
        // Sizes from the trace: the simulations count bytes; the store stores each miss at its
        // size under a disk capacity of 64 KiB, and evicts.
        var lines: [String] = []
        for round in 0..<3 { for key in 0..<40 { lines.append("k\(key + round) \(4096)") } }
        let report = try traceReport(lines.joined(separator: "\n") + "\n", capacities: "64K", policies: "lru", ["--min-uses", "1"])
        let row = try #require((report["rows"] as? [[String: Any]])?.first)
        #expect(row["capacityInBytes"] as? Bool == true)
        #expect(row["capacity"] as? Int == 64 << 10)
        // 16 objects of 4 KiB fit, and each round walks 40 keys: LRU misses every request.
        let simulated = try #require(misses(row, simulated: "LRU"))
        #expect(simulated == 120)
        let store = try #require((row["store"] as? [[String: Any]])?.first)
        #expect((store["evictions"] as? Int ?? 0) > 0)
        #expect((store["misses"] as? Int ?? 0) >= simulated)
    }

    @Test func admissionSavesPutsOnATraceOfOneHitWonders() throws {
        let report = try traceReport("synthetic:objects=400,requests=4000,onehit=0.5,seed=5", capacities: "10%", policies: "s3fifo")
        let rows = try #require(report["rows"] as? [[String: Any]])
        #expect(rows.map { $0["minimumUses"] as? Int } == [1, 2])
        let puts = rows.map { ($0["store"] as? [[String: Any]])?.first?["puts"] as? Int ?? 0 }
        #expect(puts[1] * 2 < puts[0])
    }

    @Test func theStoreReplaysAsTheSimulationsOfItsPolicies() throws {
        // Sweeps down to the limit itself, as the simulations evict (the default takes a 1 % batch).
        let report = try traceReport("synthetic:objects=400,requests=4000,scan-every=1000,scan-length=100,seed=3",
                                     capacities: "10%", ["--low-watermark", "1"])
        let row = try #require((report["rows"] as? [[String: Any]])?.first)
        let storeLRU = try #require(misses(row, store: "LRU")), simulatedLRU = try #require(misses(row, simulated: "LRU"))
        #expect(storeLRU == simulatedLRU)
        // The store evicts after a put where the simulation evicts before one: a few decisions
        // may differ, never many.
        let storeS3 = try #require(misses(row, store: "S3-FIFO")), simulatedS3 = try #require(misses(row, simulated: "S3-FIFO"))
        #expect(abs(storeS3 - simulatedS3) <= simulatedS3 / 100)
        #expect(storeS3 < storeLRU)
    }
}

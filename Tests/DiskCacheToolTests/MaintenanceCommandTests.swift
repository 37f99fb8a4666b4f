@testable import DiskCache
import Foundation
import Testing
import TestSupport

/// put, rm, clear, compact and sweep, checked by opening the cache with the library afterwards.
struct MaintenanceCommandTests {
    @Test func putStoresAFileWithMetadataAndExpiry() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let file = directory.url.appendingPathComponent("input.bin")
        let body = binaryData(count: 30_000)
        try body.write(to: file)

        let result = try runTool(["put", directory.cache.path, "delta", file.path,
                                  "--meta", "a=b", "--meta", "c=d=e", "--expires", "2099-06-01T00:00:00Z"])
        #expect(result.status == 0)
        #expect(result.output == "stored \"delta\" (30000 bytes)\n")

        let cache = try openCache(directory.cache)
        defer { try? closeCache(cache) }
        let (data, entry) = try #require(cache.dataAndEntry(for: "delta"))
        #expect(data == body)
        #expect(entry.metadata == ["a": "b", "c": "d=e"])
        #expect(entry.expires == ISO8601DateFormatter().date(from: "2099-06-01T00:00:00Z"))
        #expect(cache.data(for: "alpha") == SmallCache.alpha)
    }

    @Test func putReadsStandardInput() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let body = binaryData(count: 3 << 20 | 5)  // several of the 1 MiB pieces it is read in
        let result = try runTool(["put", directory.cache.path, "from stdin", "-", "--expires", "2h"], input: body)
        #expect(result.status == 0)
        #expect(result.output == "stored \"from stdin\" (\(3 << 20 | 5) bytes)\n")

        let cache = try openCache(directory.cache)
        defer { try? closeCache(cache) }
        let (data, entry) = try #require(cache.dataAndEntry(for: "from stdin"))
        #expect(data == body)
        let expires = try #require(entry.expires)
        #expect(expires > Date().addingTimeInterval(3600) && expires <= Date().addingTimeInterval(7200))
    }

    @Test func putCreatesACacheOnlyWhenAsked() throws {
        let directory = TemporaryDirectory()
        let refused = try runTool(["put", directory.cache.path, "k", "-"], input: Data("v".utf8))
        #expect(refused.status == 3)
        #expect(!exists(directory.cache))

        let created = try runTool(["put", directory.cache.path, "k", "-", "--create"], input: Data("v".utf8))
        #expect(created.status == 0)
        #expect(try runTool(["get", directory.cache.path, "k"]).stdout == Data("v".utf8))
    }

    @Test func putRejectsMalformedMetadata() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let result = try runTool(["put", directory.cache.path, "k", "-", "--meta", "novalue"], input: Data())
        #expect(result.status == 2)
        #expect(result.stderr.contains("name=value"))
    }

    @Test func rmRemovesKeysAndReportsMissingOnes() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let path = directory.cache.path
        let removed = try runTool(["rm", path, "alpha"])
        #expect(removed.status == 0)
        #expect(removed.output == "removed 1 entry\n")

        let missing = try runTool(["rm", path, "beta", "alpha"])
        #expect(missing.status == 4)
        #expect(missing.output == "removed 1 entry\n")
        #expect(missing.stderr == "diskcache: error: No entry for key \"alpha\"\n")

        let forced = try runTool(["rm", path, "-f", "nope"])
        #expect(forced.status == 0)
        #expect(try runTool(["ls", path]).lines.dropFirst().map { String($0.split(separator: " ").last!) } == ["gamma"])
    }

    @Test(arguments: [
        ("2026-01-01T00:01:00Z", ["alpha"]),
        ("2026-01-01T00:00:30Z", ["alpha"]),
        ("2026-01-01T00:02:00Z", ["alpha", "beta"]),
        ("2026-01-01", [String]()),
        ("2026-01-02", ["alpha", "beta", "gamma"]),
    ])
    func rmSinceRemovesEntriesStoredAtOrAfterADate(since: String, left: [String]) throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let result = try runTool(["rm", directory.cache.path, "--since", since])
        #expect(result.status == 0)
        let removed = 3 - left.count
        #expect(result.output.hasPrefix("removed \(removed) \(removed == 1 ? "entry" : "entries") stored since "))
        // ls lists expired entries too (gamma has expired).
        #expect(try runTool(["ls", directory.cache.path]).lines.dropFirst().map { String($0.split(separator: " ").last!) } == left)
    }

    @Test func rmSinceAcceptsARelativeDuration() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        #expect(try runTool(["put", directory.cache.path, "fresh", "-"], input: Data("new".utf8)).status == 0)
        let result = try runTool(["rm", directory.cache.path, "--since", "10m"])
        #expect(result.status == 0)
        #expect(result.output.hasPrefix("removed 1 entry stored since "))
        #expect(try runTool(["get", directory.cache.path, "fresh"]).status == 4)
        #expect(try runTool(["get", directory.cache.path, "alpha"]).status == 0)
    }

    @Test(arguments: [["rm", "DIR"], ["rm", "DIR", "k", "--since", "1h"], ["rm", "DIR", "--since", "yesterday"],
                      ["sweep", "DIR", "--capacity", "12Q"], ["sweep", "DIR", "--capacity", "-5M"],
                      ["ls", "DIR", "--sort", "colour"], ["put", "DIR", "k", "-", "--expires", "soon"]])
    func badArgumentsAreUsageErrors(arguments: [String]) throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let before = snapshot(directory.cache)
        let result = try runTool(arguments.map { $0 == "DIR" ? directory.cache.path : $0 }, input: Data())
        #expect(result.status == 2)
        #expect(result.stderr.contains("Error") || result.stderr.contains("error"))
        #expect(result.stdout.isEmpty)
        #expect(snapshot(directory.cache) == before)
    }

    @Test func clearRemovesEveryEntry() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let result = try runTool(["clear", directory.cache.path])
        #expect(result.status == 0)
        #expect(result.output == "removed 3 entries\n")
        #expect(try runTool(["stats", directory.cache.path]).fields["Entries"] == "0")
        #expect(try runTool(["verify", directory.cache.path]).status == 0)
    }

    @Test func compactRewritesTheJournal() throws {
        let directory = TemporaryDirectory()
        let clock = ManualClock("2026-01-01T00:00:00Z")
        let cache = try openCache(directory.cache, clock: clock)
        for version in 0..<200 { try cache.store(Data("v\(version)".utf8), for: "k\(version % 4)") }
        try closeCache(cache)
        let before = try #require(try runTool(["stats", directory.cache.path, "--json"]).json() as? [String: Any])
        #expect(before["redundantRecords"] as? Int ?? 0 >= 196)

        let result = try runTool(["compact", directory.cache.path])
        #expect(result.status == 0)
        #expect(result.output.hasPrefix("compacted the journal: "))
        #expect(result.output.hasSuffix(", 4 entries\n"))

        let after = try #require(try runTool(["stats", directory.cache.path, "--json"]).json() as? [String: Any])
        #expect(after["entries"] as? Int == 4)
        #expect((after["journalSize"] as? Int ?? .max) < (before["journalSize"] as? Int ?? 0) / 10)
        #expect((after["redundantRecords"] as? Int ?? .max) <= 2)
        #expect(try runTool(["get", directory.cache.path, "k3"]).stdout == Data("v199".utf8))
    }

    @Test func sweepRemovesExpiredEntries() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let result = try runTool(["sweep", directory.cache.path])
        #expect(result.status == 0)
        #expect(result.lines.first?.hasPrefix("removed 1 entry (") == true)
        #expect(result.lines.first?.hasSuffix("): 1 expired") == true)
        #expect(result.lines.last?.hasPrefix("2 entries left, ") == true)
        #expect(try runTool(["get", directory.cache.path, "gamma"]).status == 4)
    }

    @Test func sweepWithCapacityEvictsLeastRecentlyUsed() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        // alpha (read last) and the journal fit in 16 KiB; beta's 20,000-byte body does not.
        let result = try runTool(["sweep", directory.cache.path, "--capacity", "16K"])
        #expect(result.status == 0)
        #expect(result.lines.first?.hasPrefix("removed 2 entries (") == true)
        #expect(result.lines.first?.hasSuffix("1 expired, 1 over capacity") == true)
        let cache = try openCache(directory.cache)
        defer { try? closeCache(cache) }
        #expect(cache.data(for: "alpha") == SmallCache.alpha)
        #expect(!cache.contains("beta"))
        #expect(cache.totalSize <= 16 << 10)
    }
}

import DiskCache
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import HTTPCache
import Testing

/// `verify` finds a corrupt body, an orphan file and a torn journal without touching
/// anything; `verify --repair` fixes all three and says so; a second `verify` passes.
struct VerifyCommandTests {
    @Test func aHealthyCachePasses() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let result = try runTool(["verify", directory.cache.path])
        #expect(result.status == 0)
        #expect(result.output == "checked 3 entries (19.6 KiB of bodies): no problems\n")
        // Not a terminal: no progress bar.
        #expect(result.stderr == "")

        let repair = try runTool(["verify", directory.cache.path, "--repair"])
        #expect(repair.status == 0)
        #expect(repair.output == result.output)
    }

    @Test func leftoversTheNextOpenRemovesAreNotesNotProblems() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        try Data("half a write".utf8).write(to: directory.cache.appendingPathComponent("tmp/interrupted"))
        let result = try runTool(["verify", directory.cache.path])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.lines.contains { $0.hasPrefix("note: tmp/ holds 1 item") }, "\(result.output)")
        #expect(!result.lines.contains { $0.hasPrefix("problem: ") })
    }

    @Test func repairMarksACacheWhoseVersionFileWasLost() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        try FileManager.default.removeItem(at: directory.cache.appendingPathComponent("VERSION"))
        #expect(try runTool(["verify", directory.cache.path]).status != 0)
        let repair = try runTool(["verify", directory.cache.path, "--repair"])
        #expect(repair.status == 0, "\(repair.output)\(repair.stderr)")
        #expect(repair.lines.first == "repaired: Wrote a new VERSION file (it was missing)")
        let again = try runTool(["get", directory.cache.path, "alpha"])
        #expect(again.status == 0)
    }

    /// A directory, symbolic link or FIFO put where `SHARED` belongs is a problem `verify`
    /// reports; `verify --repair`, with no instance open, moves it aside, and the cache is
    /// opened shared again.
    @Test(arguments: ["directory", "symlink", "fifo"])
    func somethingNotAFileAtSharedIsReportedAndRepaired(_ kind: String) throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let shared = directory.cache.appendingPathComponent("SHARED").path
        unlink(shared)
        switch kind {
        case "directory": #expect(mkdir(shared, 0o700) == 0)
        case "symlink": #expect(symlink("/etc/hostname", shared) == 0)
        default: #expect(mkfifo(shared, 0o600) == 0)
        }
        let result = try runTool(["verify", directory.cache.path])
        #expect(result.status != 0)
        #expect(result.lines.contains { $0.hasPrefix("problem: ") && $0.contains("SHARED") }, "\(result.output)")
        let repair = try runTool(["verify", directory.cache.path, "--repair"])
        #expect(repair.status == 0, "\(repair.output)\(repair.stderr)")
        #expect(repair.lines.contains { $0.hasPrefix("repaired: Moved aside what was in place of SHARED") }, "\(repair.output)")
        var info = stat()
        #expect(lstat(shared, &info) == 0 && info.st_mode & S_IFMT == S_IFREG)
        #expect(try runTool(["verify", directory.cache.path]).status == 0)
        #expect(try runTool(["get", directory.cache.path, "alpha"]).status == 0)
    }

    /// HTTP records no lookup of `HTTPURLCache` reaches (a variant list of the earlier layout,
    /// a response under a key that is not a variant's) are problems; repair removes them and
    /// nothing else.
    @Test func httpRecordsNoLookupReachesAreReportedAndRepaired() throws {
        let directory = TemporaryDirectory()
        let url = URL(string: "https://example.com/")!
        let stored = HTTPURLCache.entry(
            from: CachedURLResponse(response: URLResponse(url: url, mimeType: nil, expectedContentLength: 3, textEncodingName: nil),
                                    data: Data("old".utf8)),
            for: CacheRequest(url: url), requestTime: Date(), responseTime: Date())
        let response = try #require(try stored.encodedMetadata()["http-response"])
        do {
            let cache = try DiskCache(directory: directory.cache)
            try cache.store(Data("plain".utf8), for: "plain")
            try cache.store(Data(), for: "GET https://example.com/", metadata: ["variants": #"[{"id":"GET","policy":"allowed"}]"#])
            try cache.store(Data("old".utf8), for: "GET https://example.com/\n#variant\nGET", metadata: ["http-response": response])
            try cache.close()
        }
        let result = try runTool(["verify", directory.cache.path])
        #expect(result.status == 1, "\(result.output)")
        let problems = result.lines.filter { $0.hasPrefix("problem: unreachableHTTPRecord: ") }
        #expect(problems.count == 2, "\(result.output)")
        #expect(result.lines.last == "checked 3 entries (8 B of bodies): 2 problems", "\(result.output)")

        let repair = try runTool(["verify", directory.cache.path, "--repair"])
        #expect(repair.status == 0, "\(repair.output)\(repair.stderr)")
        #expect(repair.lines.filter { $0.hasPrefix("repaired: Removed an HTTP record no lookup reaches") }.count == 2, "\(repair.output)")
        #expect(repair.lines.last == "after repair: 1 entry, no problems", "\(repair.output)")
        #expect(try runTool(["get", directory.cache.path, "plain"]).output == "plain")
    }

    /// A cache that is not an HTTP cache, with metadata fields of the same names in other
    /// shapes, has nothing the HTTP check reports.
    @Test func recordsThatMerelyShareFieldNamesAreNotHTTPRecords() throws {
        let directory = TemporaryDirectory()
        do {
            let cache = try DiskCache(directory: directory.cache)
            try cache.store(Data(), for: "list", metadata: ["variants": "red, green"])
            try cache.store(Data("x".utf8), for: "doc", metadata: ["variants": #"[{"id":"a","policy":"allowed"}]"#])
            try cache.store(Data("y".utf8), for: "page", metadata: ["http-response": "text/html"])
            try cache.close()
        }
        let result = try runTool(["verify", directory.cache.path])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output == "checked 3 entries (2 B of bodies): no problems\n")
    }

    /// The small cache with beta's body corrupted, an orphan `.meta` in a shard and garbage
    /// after the journal's last record.
    struct Damaged {
        let directory = TemporaryDirectory()
        let orphan: URL
        let journal: URL

        init() throws {
            let small = try SmallCache(at: directory.cache)
            var body = try Data(contentsOf: URL(fileURLWithPath: small.betaBody))
            body[12_345] ^= 0x40
            try body.write(to: URL(fileURLWithPath: small.betaBody))

            let shard = directory.cache.appendingPathComponent("ab")
            try FileManager.default.createDirectory(at: shard, withIntermediateDirectories: true)
            orphan = shard.appendingPathComponent("abcd" + String(repeating: "0123456789abcdef", count: 2).prefix(28) + ".meta")
            try Data("nobody vouches for me".utf8).write(to: orphan)

            journal = directory.cache.appendingPathComponent("journal")
            let handle = try FileHandle(forWritingTo: journal)
            try handle.seekToEnd()
            // The start of a PUT record whose payload never made it to disk.
            try handle.write(contentsOf: Data([0x3D, 0x00, 0x00, 0x00, 0x01, 0xAB, 0xCD, 0xEF]))
            try handle.close()
        }

        var path: String { directory.cache.path }
    }

    @Test func verifyListsEachProblemAndChangesNothing() throws {
        let damaged = try Damaged()
        let before = snapshot(damaged.directory.cache)
        let result = try runTool(["verify", damaged.path])
        #expect(result.status == 1)
        let problems = result.lines.filter { $0.hasPrefix("problem: ") }
        #expect(problems.count == 3, "\(result.output)")
        #expect(problems.contains { $0.hasPrefix("problem: checksumMismatch: ") && $0.contains("(key \"beta\")") })
        #expect(problems.contains { $0.hasPrefix("problem: orphanFile: ") && $0.contains(damaged.orphan.path) })
        #expect(problems.contains { $0.hasPrefix("problem: journalTornTail: 8 bytes") })
        #expect(result.lines.last == "checked 3 entries (19.6 KiB of bodies): 3 problems")
        #expect(snapshot(damaged.directory.cache) == before)
    }

    @Test func repairFixesEveryProblemAndSaysWhatItDid() throws {
        let damaged = try Damaged()
        let result = try runTool(["verify", damaged.path, "--repair"])
        #expect(result.status == 0, "\(result.output)\(result.stderr)")
        #expect(result.lines.filter { $0.hasPrefix("problem: ") }.count == 3)
        let repairs = result.lines.filter { $0.hasPrefix("repaired: ") }
        #expect(repairs.contains { $0.contains("torn journal tail") })
        #expect(repairs.contains { $0.contains("orphan") })
        #expect(repairs.contains { $0.contains("damaged entry") && $0.hasSuffix("(key \"beta\")") })
        #expect(result.stderr == "")
        #expect(repairs.contains { $0.contains("Rewrote the journal") })
        #expect(result.lines.last == "after repair: 2 entries, no problems")
        #expect(!exists(damaged.orphan))

        let again = try runTool(["verify", damaged.path])
        #expect(again.status == 0)
        #expect(again.output == "checked 2 entries (105 B of bodies): no problems\n")
        #expect(try runTool(["get", damaged.path, "beta"]).status == 4)
        #expect(try runTool(["get", damaged.path, "alpha"]).stdout == SmallCache.alpha)
        #expect(try runTool(["get", damaged.path, "gamma"]).stdout == SmallCache.gamma)
        #expect(try runTool(["stats", damaged.path]).fields["Journal damage"] == "none")
    }

    @Test func statsReportsTheTornTailWithoutCuttingIt() throws {
        let damaged = try Damaged()
        let size = try FileManager.default.attributesOfItem(atPath: damaged.journal.path)[.size] as? Int
        let result = try runTool(["stats", damaged.path])
        #expect(result.status == 0)
        #expect(result.fields["Journal damage"] == "8 bytes of torn tail (run verify)")
        #expect(try FileManager.default.attributesOfItem(atPath: damaged.journal.path)[.size] as? Int == size)
    }
}

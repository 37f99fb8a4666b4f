import DiskCache
import Foundation
import Testing

/// The read-only subcommands on the small cache: exact output, and nothing on disk changes.
struct InspectionCommandTests {
    @Test func statsReportsEntriesSizesJournalAndVolume() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let journalSize = try FileManager.default.attributesOfItem(atPath: directory.cache.appendingPathComponent("journal").path)[.size] as! Int

        let result = try runTool(["stats", directory.cache.path])
        #expect(result.status == 0)
        #expect(result.stderr == "")
        let fields = result.fields
        #expect(fields["Directory"] == directory.cache.path)
        #expect(fields["Format version"] == "2")
        #expect(fields["Entries"] == "3")
        #expect(fields["Logical size"] == "19.6 KiB (20105 bytes)")
        #expect(fields["Journal size"]?.hasSuffix("(\(journalSize) bytes)") == true || fields["Journal size"] == "\(journalSize) bytes")
        #expect(fields["Cleanly closed"] == "yes")
        #expect(fields["Journal damage"] == "none")
        #expect(fields["Volume free"]?.contains(" of ") == true)
        // Records: three PUTs, the access of alpha, the close; everything but the PUTs is redundant.
        let records = try #require(fields["Journal records"])
        let counts = records.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
        #expect(counts.count == 3)
        #expect(counts.first.map { $0 >= 3 } == true)
        #expect(counts.count == 3 && counts[1] == counts[0] - 3)

        let json = try #require(try runTool(["stats", directory.cache.path, "--json"]).json() as? [String: Any])
        #expect(json["entries"] as? Int == 3)
        #expect(json["logicalSize"] as? Int == 20105)
        #expect(json["formatVersion"] as? Int == 2)
        #expect(json["journalSize"] as? Int == journalSize)
        #expect((json["diskUsage"] as? Int ?? 0) >= 20105 + journalSize)
        #expect(json["wasCleanlyClosed"] as? Bool == true)
        #expect((json["volumeTotal"] as? Int ?? 0) > 0)
    }

    @Test func lsPrintsAlignedColumnsSortedByKey() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let result = try runTool(["ls", directory.cache.path])
        #expect(result.status == 0)
        #expect(result.output == """
                SIZE  CREATED               ACCESSED              EXPIRES               KEY
                 5 B  2026-01-01T00:00:00Z  2026-01-01T00:05:00Z  -                     alpha
            19.5 KiB  2026-01-01T00:01:00Z  2026-01-01T00:01:00Z  2099-01-01T00:00:00Z  beta
               100 B  2026-01-01T00:02:00Z  2026-01-01T00:02:00Z  2026-01-02T00:00:00Z  gamma

            """)
    }

    @Test(arguments: [
        (["--sort", "size"], ["beta", "gamma", "alpha"]),
        (["--sort", "accessed"], ["alpha", "gamma", "beta"]),
        (["--sort", "created"], ["gamma", "beta", "alpha"]),
        (["--sort", "size", "--reverse"], ["alpha", "gamma", "beta"]),
        (["--sort", "accessed", "--limit", "1"], ["alpha"]),
        (["--limit", "2"], ["alpha", "beta"]),
    ])
    func lsSortsAndLimits(options: [String], keys: [String]) throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let result = try runTool(["ls", directory.cache.path] + options)
        #expect(result.status == 0)
        #expect(result.lines.dropFirst().map { String($0.split(separator: " ").last!) } == keys)
    }

    @Test func lsJSONHasEveryFieldWithISODates() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let result = try runTool(["ls", directory.cache.path, "--json", "--sort", "key"])
        #expect(result.status == 0)
        let array = try #require(try result.json() as? [[String: Any]])
        #expect(array.map { $0["key"] as? String } == ["alpha", "beta", "gamma"])
        #expect(array[0]["size"] as? Int == 5)
        #expect(array[0]["created"] as? String == "2026-01-01T00:00:00Z")
        #expect(array[0]["lastAccessed"] as? String == "2026-01-01T00:05:00Z")
        #expect(array[0]["expires"] is NSNull)
        #expect(array[0]["metadata"] as? [String: String] == [:])
        #expect(array[1]["size"] as? Int == 20000)
        #expect(array[1]["expires"] as? String == "2099-01-01T00:00:00Z")
        #expect(array[1]["metadata"] as? [String: String] == ["content-type": "text/plain"])
    }

    @Test func showPrintsTheMetadataAsJSONWithoutTheBody() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let result = try runTool(["show", directory.cache.path, "beta"])
        #expect(result.status == 0)
        let object = try #require(try result.json() as? [String: Any])
        #expect(object["key"] as? String == "beta")
        #expect(object["size"] as? Int == 20000)
        #expect(object["format"] as? Int == 1)
        #expect(object["created"] as? String == "2026-01-01T00:01:00Z")
        #expect(object["expires"] as? String == "2099-01-01T00:00:00Z")
        #expect(object["metadata"] as? [String: String] == ["content-type": "text/plain"])
        #expect(object["checksum"] is Int)
        #expect(object["body"] == nil)

        let inline = try #require(try runTool(["show", directory.cache.path, "alpha"]).json() as? [String: Any])
        #expect(inline["body"] == nil)
        let withBody = try #require(try runTool(["show", directory.cache.path, "alpha", "--include-body"]).json() as? [String: Any])
        #expect(withBody["body"] as? String == "aGVsbG8=")
    }

    @Test func showPrintsXML() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let result = try runTool(["show", directory.cache.path, "alpha", "--format", "xml"])
        #expect(result.status == 0)
        #expect(result.output.hasPrefix("<?xml"))
        #expect(result.output.contains("<key>key</key>"))
        #expect(result.output.contains("<string>alpha</string>"))
        #expect(!result.output.contains("<key>body</key>"))
        let plist = try #require(try PropertyListSerialization.propertyList(from: result.stdout, format: nil) as? [String: Any])
        #expect(plist["size"] as? Int == 5)
    }

    @Test func getWritesTheBodyByteForByte() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let result = try runTool(["get", directory.cache.path, "beta"])
        #expect(result.status == 0)
        #expect(result.stdout == SmallCache.beta)
        #expect(try runTool(["get", directory.cache.path, "alpha"]).stdout == SmallCache.alpha)

        let file = directory.url.appendingPathComponent("out.bin")
        let toFile = try runTool(["get", directory.cache.path, "beta", "-o", file.path])
        #expect(toFile.status == 0)
        #expect(toFile.stdout.isEmpty)
        #expect(try Data(contentsOf: file) == SmallCache.beta)
    }

    /// A body of several 1 MiB pieces comes out whole; a damaged one fails with status 5, and a
    /// file named with -o keeps what it held.
    @Test func getStreamsLargeBodiesAndRefusesDamagedOnes() throws {
        let directory = TemporaryDirectory()
        let small = try SmallCache(at: directory.cache)
        let large = binaryData(count: 3 << 20 | 7)
        #expect(try runTool(["put", directory.cache.path, "large", "-"], input: large).status == 0)
        #expect(try runTool(["get", directory.cache.path, "large"]).stdout == large)

        var damaged = [UInt8](try Data(contentsOf: URL(fileURLWithPath: small.betaBody)))
        damaged[damaged.count - 1] ^= 0xFF
        try Data(damaged).write(to: URL(fileURLWithPath: small.betaBody))
        let file = directory.url.appendingPathComponent("out.bin")
        try Data("earlier".utf8).write(to: file)
        let toFile = try runTool(["get", directory.cache.path, "beta", "-o", file.path])
        #expect(toFile.status == 5)
        #expect(toFile.stderr.contains("damaged"))
        #expect(try Data(contentsOf: file) == Data("earlier".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path).filter { $0.hasPrefix(".out.bin") }.isEmpty)
        #expect(try runTool(["get", directory.cache.path, "beta"]).status == 5)
        try FileManager.default.removeItem(atPath: small.betaBody)  // a missing body is damage too, not "no entry"
        #expect(try runTool(["get", directory.cache.path, "beta"]).status == 5)

        // An output that is not a regular file is written to, never replaced.
        #expect(try runTool(["get", directory.cache.path, "large", "-o", "/dev/null"]).status == 0)
        var info = stat()
        #expect(stat("/dev/null", &info) == 0 && info.st_mode & S_IFMT == S_IFCHR)
    }

    @Test func readOnlyCommandsChangeNothing() throws {
        let directory = TemporaryDirectory()
        _ = try SmallCache(at: directory.cache)
        let before = snapshot(directory.cache)
        let path = directory.cache.path
        for arguments in [["stats", path], ["stats", path, "--json"], ["ls", path], ["ls", path, "--json"],
                          ["show", path, "alpha"], ["get", path, "beta"], ["get", path, "nope"], ["verify", path]] {
            _ = try runTool(arguments)
        }
        #expect(snapshot(directory.cache) == before)
    }

    @Test(arguments: ["stats", "ls", "show", "get", "put", "rm", "clear", "verify", "compact", "sweep", "bench"])
    func everySubcommandHasHelp(subcommand: String) throws {
        let result = try runTool([subcommand, "--help"])
        #expect(result.status == 0)
        #expect(result.output.contains("USAGE: diskcache \(subcommand)"))
    }

    @Test func rootHelpListsSubcommandsAndExitStatuses() throws {
        let result = try runTool(["--help"])
        #expect(result.status == 0)
        for subcommand in ["stats", "ls", "show", "get", "put", "rm", "clear", "verify", "compact", "sweep", "bench"] {
            #expect(result.output.contains("  \(subcommand) "), "\(subcommand) missing from help")
        }
        #expect(result.output.contains("EXIT STATUS"))
    }
}

#if Server
import Foundation
import HTTPCache
import HTTPTypes
import Testing
@testable import CacheServer
@testable import diskcache_server

/// Bad configuration values are refused before the server listens, each with a message naming it.
struct ConfigurationTests {
    @Test func originsOtherThanPlainHTTPHostAndPortAreRefused() throws {
        let good = try ServerConfiguration.Origin(parsing: "http://127.0.0.1:8081/")
        #expect(good.host == "127.0.0.1" && good.port == 8081 && good.authority == "127.0.0.1:8081")
        #expect(try ServerConfiguration.Origin(parsing: "http://example.com").authority == "example.com")
        let refused: [(String, String)] = [
            ("https://example.com", "only http://"),
            ("ftp://example.com", "only http://"),
            ("example.com", "not a URL"),
            ("http://", "no host"),
            ("http://example.com/path", "path or query"),
            ("http://example.com/?q=1", "path or query"),
            ("http://user:secret@example.com", "credentials"),
            ("http://example.com:70000", "out of range"),
        ]
        for (text, message) in refused {
            #expect(performing: { try ServerConfiguration.Origin(parsing: text) },
                    throws: { "\($0)".contains(message) })
        }
    }

    @Test func valuesThatCannotWorkAreRefused() {
        var configuration = ServerConfiguration(origin: .init(host: "127.0.0.1", port: 80), cacheDirectory: URL(fileURLWithPath: "/tmp/x"))
        #expect(throws: Never.self) { try configuration.validate() }
        for change in [{ (c: inout ServerConfiguration) in c.port = 70_000 }, { $0.diskCapacity = 0 }, { $0.memoryCapacity = -1 },
                       { $0.mappedCapacity = -1 }, { $0.copyLimit = -1 }, { $0.eventLoopCount = 0 }, { $0.purgeToken = "" }, { $0.purgeToken = "a b" }, { $0.viaName = "two words" }] {
            var changed = configuration
            change(&changed)
            #expect(throws: ServerConfigurationError.self) { try changed.validate() }
        }
        configuration.purgeToken = "secret"
        #expect(throws: Never.self) { try configuration.validate() }
    }

    @Test func theConfigurationFileNamesTheLineThatIsWrong() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("server-\(UUID().uuidString).conf")
        defer { try? FileManager.default.removeItem(at: file) }
        try "# a node\norigin = http://127.0.0.1:9000\ncache-dir = /tmp/c   # here\ndisk-capacity = 2G\nmapped-capacity = 0\ncdn = true\ncopy-limit = 2M\n"
            .write(to: file, atomically: true, encoding: .utf8)
        let settings = try ServerCommand.readSettings(file.path)
        let configuration = try ServerCommand.configuration(from: settings)
        #expect(configuration.origin.port == 9000 && configuration.cacheDirectory.path == "/tmp/c")
        #expect(configuration.diskCapacity == 2 << 30 && configuration.isCDN && configuration.mappedCapacity == 0)
        #expect(configuration.copyLimit == 2 << 20)
        let defaults = ServerConfiguration(origin: .init(host: "h", port: 80), cacheDirectory: URL(fileURLWithPath: "/c"))
        #expect(defaults.mappedCapacity == 1 << 30 && defaults.copyLimit == 0)
        #expect(try ServerCommand.configuration(from: ["origin": "http://h", "cache-dir": "/c"]).copyLimit == 0)
        #expect(try ServerCommand.configuration(from: ["origin": "http://h", "cache-dir": "/c", "event-loops": "4"]).eventLoopCount == 4)
        #expect(try ServerCommand.configuration(from: ["origin": "http://h", "cache-dir": "/c"]).eventLoopCount == nil)
        try "origin = http://127.0.0.1:9000\ncolour = blue\n".write(to: file, atomically: true, encoding: .utf8)
        #expect(performing: { try ServerCommand.readSettings(file.path) }, throws: { "\($0)".contains(":2: unknown setting \"colour\"") })
        try "origin http://127.0.0.1:9000\n".write(to: file, atomically: true, encoding: .utf8)
        #expect(performing: { try ServerCommand.readSettings(file.path) }, throws: { "\($0)".contains(":1: expected `name = value`") })
        #expect(performing: { try ServerCommand.readSettings("/nonexistent/server.conf") }, throws: { "\($0)".contains("cannot read") })
        #expect(performing: { try ServerCommand.configuration(from: ["cache-dir": "/tmp/c"]) }, throws: { "\($0)".contains("no origin") })
        // Each bad value, with what its error says.
        for (name, value, message) in [("event-loops", "many", "event loops \"many\" is not a whole number"),
                                       ("event-loops", "0", "must be 1 to 1024"),
                                       ("mapped-capacity", "all", "mapped capacity \"all\" is not a size"),
                                       ("listen", "nowhere", "not host:port"),
                                       ("cdn", "maybe", "true or false"),
                                       ("copy-limit", "some", "copy limit \"some\" is not a size"),
                                       ("copy-limit", "2G", "copy limit must be 0 to 1 GiB"),
                                       ("admin-listen", "here", "admin address \"here\" is not host:port"),
                                       ("max-connections", "lots", "connection limit \"lots\" is not a whole number"),
                                       ("max-connections", "0", "connection limit must be 1 to 1000000"),
                                       ("header-timeout", "0", "header timeout \"0\" is not a number of seconds"),
                                       ("idle-timeout", "soon", "idle timeout \"soon\" is not a number of seconds"),
                                       ("set-cookie", "keep", "set-cookie must be bypass or strip"),
                                       ("min-uses", "twice", "min-uses \"twice\" is not a whole number"),
                                       ("min-uses", "0", "min-uses must be 1 to 1000"),
                                       ("metrics-need-token", "true", "metrics that need the token need a purge token")] {
            #expect("\(name) = \(value)", performing: { try ServerCommand.configuration(from: ["origin": "http://h", "cache-dir": "/c", name: value]) },
                    throws: { "\($0)".contains(message) })
        }
        #expect(try ServerCommand.size("512K", "x") == 512 << 10)
        #expect(try ServerCommand.size("64MB", "x") == 64 << 20)
        // The `diskcache` tool's syntax: fractions and binary unit names.
        #expect(try ServerCommand.size("1.5G", "x") == 3 << 29)
        #expect(try ServerCommand.size("64MiB", "x") == 64 << 20)
        #expect(throws: ServerConfigurationError.self) { try ServerCommand.size("-1", "x") }
        #expect(performing: { try ServerCommand.size("lots", "disk capacity") }, throws: { "\($0)".contains("disk capacity \"lots\" is not a size") })
    }

    /// The client limits, the admin address and the Set-Cookie policy: their defaults (nginx's
    /// timeouts and connection count, cookies not stored) and each setting read from the file's words.
    @Test func clientLimitsHaveNginxDefaultsAndReadTheirSettings() throws {
        let defaults = try ServerCommand.configuration(from: ["origin": "http://h", "cache-dir": "/c"])
        #expect(defaults.timeouts.header == .seconds(60) && defaults.timeouts.body == .seconds(60))
        #expect(defaults.timeouts.send == .seconds(60) && defaults.timeouts.idle == .seconds(75))
        #expect(defaults.maximumConnections == 1024)
        #expect(defaults.minimumUses == 1)
        #expect(defaults.setCookie == .doNotStore)
        #expect(defaults.adminHost == nil && !defaults.metricsNeedToken)
        let set = try ServerCommand.configuration(from: [
            "origin": "http://h", "cache-dir": "/c", "header-timeout": "2.5", "body-timeout": "3", "send-timeout": "4", "idle-timeout": "5",
            "max-connections": "10", "min-uses": "2", "set-cookie": "strip", "admin-listen": "127.0.0.1:9090", "purge-token": "t", "metrics-need-token": "true",
        ])
        #expect(set.timeouts.header == .milliseconds(2500) && set.timeouts.body == .seconds(3))
        #expect(set.timeouts.send == .seconds(4) && set.timeouts.idle == .seconds(5))
        #expect(set.maximumConnections == 10)
        #expect(set.minimumUses == 2)
        #expect(set.setCookie == .storeWithoutField)
        #expect(set.adminHost == "127.0.0.1" && set.adminPort == 9090)
        #expect(set.metricsNeedToken)
    }

    /// `CDN-Cache-Control` is read as a structured-field Dictionary: a field that does not parse,
    /// or whose delta-seconds directive has another type, is ignored whole (nil).
    @Test func cdnCacheControlIsReadAsAStructuredField() {
        let cases: [([String], String?)] = [
            (["max-age=3600"], "max-age=3600"),
            (["foobar, max-age=3600"], "foobar, max-age=3600"),
            (["max-age=3600", "no-store"], "max-age=3600, no-store"),
            (["private"], "private"),
            (["private=\"Set-Cookie\""], "private"),
            (["max-age=2147483648"], "max-age=2147483648"),
            (["max-age=10000, &&&&&"], nil),
            (["max-age=\"10000\""], nil),
            (["max-age=10.5"], nil),
            (["max-age=-1"], nil),
            (["max-age =100"], nil),
            (["MaX-aGe=3600"], nil),
            (["max-age=(1 2)"], nil),
            ([""], nil),
            ([], nil),
        ]
        for (lines, expected) in cases {
            #expect(Fields.cdnDirectives(lines) == expected, "\(lines)")
        }
        let fields: HTTPFields = [.cdnCacheControl: "max-age=\"10\"", .cacheControl: "no-store"]
        #expect(Fields.targeted(fields) == fields, "an invalid CDN-Cache-Control leaves Cache-Control in charge")
    }

    @Test func aCacheDirectoryThatIsAFileStopsTheStartWithTheStoresError() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("server-\(UUID().uuidString)")
        try Data("not a directory".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        var configuration = ServerConfiguration(origin: .init(host: "127.0.0.1", port: 80), cacheDirectory: file)
        configuration.port = 0
        await #expect(throws: (any Error).self) { _ = try await CacheServer.start(configuration) }
        #expect(try Data(contentsOf: file) == Data("not a directory".utf8))
    }
}
#endif

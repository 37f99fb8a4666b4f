#if Server
import ArgumentParser
import CacheServer
import DiskCache
import Foundation
import Logging
import ServiceLifecycle
import UnixSignals

/// `diskcache-server`: an RFC 9111 caching reverse proxy in front of one origin.
@main
struct ServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diskcache-server",
        abstract: "An RFC 9111 caching reverse proxy in front of one HTTP origin, over a disk cache.",
        discussion: """
        Every request goes to the origin unless the cache may answer it. GET /_cache/health and \
        GET /_cache/metrics (Prometheus text) are the server's own; PURGE <path> and PURGE * with \
        Authorization: Bearer <token> remove stored responses. SIGTERM or SIGINT: stop accepting, \
        let requests in progress finish, close the store.

        A configuration file holds lines of `name = value` (listen, admin-listen, origin, cache-dir, \
        disk-capacity, memory-capacity, mapped-capacity, copy-limit, event-loops, purge-token, via, log-level, \
        cdn = true|false, metrics-need-token = true|false, set-cookie = bypass|strip, min-uses, max-connections, \
        header-timeout, body-timeout, send-timeout, idle-timeout); `#` starts a comment. \
        Options on the command line win over the file.
        """
    )

    @Option(help: "Read settings from this file (name = value lines).")
    var config: String?
    @Option(help: "Address and port to listen on (default 127.0.0.1:8080).")
    var listen: String?
    @Option(help: "The origin, http://host[:port].")
    var origin: String?
    @Option(name: .customLong("cache-dir"), help: "The cache directory (created if missing; may be shared with other processes).")
    var cacheDirectory: String?
    @Option(name: .customLong("disk-capacity"), help: "Bytes kept on disk, e.g. 512M or 10G (default 1G).")
    var diskCapacity: String?
    @Option(name: .customLong("memory-capacity"), help: "Bytes kept in memory, e.g. 64M (default 64M).")
    var memoryCapacity: String?
    @Option(name: .customLong("mapped-capacity"),
            help: "Bytes of stored body files kept mapped, so that checking a body read from disk hashes the page cache's pages in place (default 1G; 0 reads them instead).")
    var mappedCapacity: String?
    @Option(name: .customLong("copy-limit"),
            help: "Copy mapped bodies up to this size into memory as they are checked and write them from there instead of with sendfile (default 0: none; cheaper for clients on the same machine).")
    var copyLimit: String?
    @Option(name: .customLong("event-loops"), help: "Event loop threads answering connections (default: one per core).")
    var eventLoops: String?
    @Option(name: .customLong("purge-token"), help: "The bearer token PURGE requests must carry (or DISKCACHE_SERVER_PURGE_TOKEN); none refuses purges.")
    var purgeToken: String?
    @Flag(help: "Act as a CDN node: a response's CDN-Cache-Control (RFC 9213) decides instead of its Cache-Control.")
    var cdn = false
    @Option(help: "This node's name in Via (default diskcache-server).")
    var via: String?
    @Option(name: .customLong("log-level"), help: "trace, debug, info (each request), notice, warning, error (default info).")
    var logLevel: String?
    @Option(name: .customLong("admin-listen"),
            help: "Serve /_cache/health, /_cache/metrics and PURGE on this address and port instead of the client port (default: none).")
    var adminListen: String?
    @Flag(name: .customLong("metrics-need-token"), help: "On the client port, /_cache/metrics answers only with the purge token.")
    var metricsNeedToken = false
    @Option(name: .customLong("set-cookie"),
            help: "Responses with Set-Cookie: bypass (passed on, never stored; the default) or strip (stored without the field).")
    var setCookie: String?
    @Option(name: .customLong("min-uses"),
            help: "Store a response on the Nth request for its key the cache could not answer (default 1: the first; 2 skips what is asked for once).")
    var minUses: String?
    @Option(name: .customLong("max-connections"), help: "Client connections open at once; one more gets a 503 (default 1024).")
    var maxConnections: String?
    @Option(name: .customLong("header-timeout"), help: "Seconds for a request's head to arrive whole (default 60).")
    var headerTimeout: String?
    @Option(name: .customLong("body-timeout"), help: "Seconds a request's body may pause between two reads (default 60).")
    var bodyTimeout: String?
    @Option(name: .customLong("send-timeout"), help: "Seconds a client may leave its answer unread (default 60).")
    var sendTimeout: String?
    @Option(name: .customLong("idle-timeout"), help: "Seconds a kept-alive connection may stay idle (default 75).")
    var idleTimeout: String?
    /// For benchmarks: `no-bytes` turns off answers from the connection's bytes, `task-only`
    /// the event loop's too, so that one run measures what each fast path saves.
    @Option(name: .customLong("fast-paths"), help: .hidden)
    var fastPaths: String?

    func run() async throws {
        var settings = try config.map(Self.readSettings) ?? [:]
        let flags: [(String, String?)] = [("listen", listen), ("origin", origin), ("cache-dir", cacheDirectory),
                                          ("disk-capacity", diskCapacity), ("memory-capacity", memoryCapacity), ("mapped-capacity", mappedCapacity),
                                          ("copy-limit", copyLimit), ("event-loops", eventLoops),
                                          ("purge-token", purgeToken), ("via", via), ("log-level", logLevel),
                                          ("admin-listen", adminListen), ("set-cookie", setCookie), ("min-uses", minUses), ("max-connections", maxConnections),
                                          ("header-timeout", headerTimeout), ("body-timeout", bodyTimeout), ("send-timeout", sendTimeout),
                                          ("idle-timeout", idleTimeout)]
        for (name, value) in flags { if let value { settings[name] = value } }
        if cdn { settings["cdn"] = "true" }
        if metricsNeedToken { settings["metrics-need-token"] = "true" }
        if settings["purge-token"] == nil, let token = ProcessInfo.processInfo.environment["DISKCACHE_SERVER_PURGE_TOKEN"] {
            settings["purge-token"] = token
        }
        var configuration: ServerConfiguration
        do {
            configuration = try Self.configuration(from: settings)
        } catch {
            throw ValidationError("\(error)")
        }
        switch fastPaths {
        case nil, "all": break
        case "no-bytes": configuration.answersFromBytes = false
        case "task-only": (configuration.answersFromBytes, configuration.answersOnEventLoop) = (false, false)
        case let other?: throw ValidationError("--fast-paths must be all, no-bytes or task-only, not \"\(other)\"")
        }
        var logger = Logger(label: "diskcache-server")
        let level = settings["log-level"] ?? "info"
        guard let parsed = Logger.Level(rawValue: level) else {
            throw ValidationError("the log level \"\(level)\" is not one of trace, debug, info, notice, warning, error, critical")
        }
        logger.logLevel = parsed
        let server: CacheServer
        do {
            server = try await CacheServer.start(configuration, logger: logger)
        } catch {
            logger.critical("Cannot start: \(error)")
            throw ExitCode(1)
        }
        // SIGTERM and SIGINT start a graceful shutdown (swift-service-lifecycle).
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: [.init(service: server)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    static let settingNames: Set<String> = ["listen", "origin", "cache-dir", "disk-capacity", "memory-capacity", "mapped-capacity", "copy-limit", "event-loops", "purge-token",
                                            "via", "log-level", "cdn", "admin-listen", "metrics-need-token", "set-cookie", "min-uses", "max-connections",
                                            "header-timeout", "body-timeout", "send-timeout", "idle-timeout"]

    /// `name = value` lines; a clear error names the line that is wrong.
    static func readSettings(_ path: String) throws -> [String: String] {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw ValidationError("cannot read the configuration file \(path): \(error.localizedDescription)")
        }
        var settings: [String: String] = [:]
        for (number, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            guard !line.trimmingCharacters(in: .whitespaces).isEmpty else { continue }
            let parts = line.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                throw ValidationError("\(path):\(number + 1): expected `name = value`, found \"\(rawLine)\"")
            }
            guard settingNames.contains(parts[0]) else {
                throw ValidationError("\(path):\(number + 1): unknown setting \"\(parts[0])\"; known: \(settingNames.sorted().joined(separator: ", "))")
            }
            settings[parts[0]] = parts[1]
        }
        return settings
    }

    static func configuration(from settings: [String: String]) throws -> ServerConfiguration {
        guard let originText = settings["origin"] else { throw ServerConfigurationError("no origin: give --origin http://host[:port]") }
        guard let directory = settings["cache-dir"] else { throw ServerConfigurationError("no cache directory: give --cache-dir <path>") }
        var configuration = ServerConfiguration(origin: try ServerConfiguration.Origin(parsing: originText),
                                                cacheDirectory: URL(fileURLWithPath: directory, isDirectory: true))
        if let listen = settings["listen"] { (configuration.host, configuration.port) = try address(listen, "listen address") }
        if let listen = settings["admin-listen"] {
            let (host, port) = try address(listen, "admin address")
            configuration.adminHost = host
            configuration.adminPort = port
        }
        if let text = settings["max-connections"] {
            guard let count = Int(text) else { throw ServerConfigurationError("the connection limit \"\(text)\" is not a whole number") }
            configuration.maximumConnections = count
        }
        if let text = settings["min-uses"] {
            guard let count = Int(text) else { throw ServerConfigurationError("min-uses \"\(text)\" is not a whole number") }
            configuration.minimumUses = count
        }
        if let text = settings["header-timeout"] { configuration.timeouts.header = try seconds(text, "header timeout") }
        if let text = settings["body-timeout"] { configuration.timeouts.body = try seconds(text, "body timeout") }
        if let text = settings["send-timeout"] { configuration.timeouts.send = try seconds(text, "send timeout") }
        if let text = settings["idle-timeout"] { configuration.timeouts.idle = try seconds(text, "idle timeout") }
        if let text = settings["set-cookie"] {
            guard let policy = ServerConfiguration.SetCookiePolicy(rawValue: text) else {
                throw ServerConfigurationError("set-cookie must be bypass or strip, not \"\(text)\"")
            }
            configuration.setCookie = policy
        }
        switch settings["metrics-need-token"] {
        case nil, "false": configuration.metricsNeedToken = false
        case "true": configuration.metricsNeedToken = true
        case let other?: throw ServerConfigurationError("metrics-need-token must be true or false, not \"\(other)\"")
        }
        if let text = settings["disk-capacity"] { configuration.diskCapacity = try size(text, "disk capacity") }
        if let text = settings["memory-capacity"] { configuration.memoryCapacity = try size(text, "memory capacity") }
        if let text = settings["mapped-capacity"] { configuration.mappedCapacity = try size(text, "mapped capacity") }
        if let text = settings["copy-limit"] { configuration.copyLimit = try size(text, "copy limit") }
        if let text = settings["event-loops"] {
            guard let count = Int(text) else { throw ServerConfigurationError("the number of event loops \"\(text)\" is not a whole number") }
            configuration.eventLoopCount = count
        }
        configuration.purgeToken = settings["purge-token"]
        if let via = settings["via"] { configuration.viaName = via }
        switch settings["cdn"] {
        case nil, "false": configuration.isCDN = false
        case "true": configuration.isCDN = true
        case let other?: throw ServerConfigurationError("cdn must be true or false, not \"\(other)\"")
        }
        try configuration.validate()
        return configuration
    }

    /// `host:port` (an IPv6 host in brackets).
    static func address(_ text: String, _ what: String) throws -> (String, Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]) else {
            throw ServerConfigurationError("the \(what) \"\(text)\" is not host:port")
        }
        return (String(text[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]")), port)
    }

    /// A positive number of seconds, such as `60` or `2.5`.
    static func seconds(_ text: String, _ what: String) throws -> Duration {
        guard let value = Double(text), value.isFinite, value > 0, value <= 86_400 * 365 else {
            throw ServerConfigurationError("the \(what) \"\(text)\" is not a number of seconds more than 0")
        }
        return .milliseconds(Int64((value * 1000).rounded()))
    }

    /// `1048576`, `512K`, `64M`, `1.5G`, `64MiB` (binary units; the `diskcache` tool's syntax).
    static func size(_ text: String, _ what: String) throws -> Int {
        // `parse` refuses a sign, so a size is never negative.
        guard let bytes = ByteSizeText.parse(text), let value = Int(exactly: bytes) else {
            throw ServerConfigurationError("the \(what) \"\(text)\" is not a size (bytes, or a number with K, M, G or T, such as 512K, 64M or 1.5G)")
        }
        return value
    }
}
#endif

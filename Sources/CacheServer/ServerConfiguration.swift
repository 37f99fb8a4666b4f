#if Server
public import Foundation
public import HTTPCache

/// How a ``CacheServer`` listens, where it forwards, and what it keeps.
public struct ServerConfiguration: Sendable {
    /// The address to listen on: loopback by default.
    public var host: String = "127.0.0.1"
    /// The port to listen on (0: any free port; ``CacheServer/port`` tells which).
    public var port: Int = 8080
    /// The origin every request goes to: `http://host[:port]`, with no path.
    public var origin: Origin
    /// The cache directory (opened shared: other processes may use it at the same time).
    public var cacheDirectory: URL
    /// Bytes of responses kept on disk.
    public var diskCapacity: Int = 1 << 30
    /// Bytes of responses kept in memory in front of the disk: seven eighths for the memory tier
    /// (bodies above 5 % of that go to disk only), an eighth for answers prepared for the hits
    /// it holds (``preparedCapacity``).
    public var memoryCapacity: Int = 64 << 20
    /// Bytes of stored body files kept mapped, so that checking a body read from disk before it
    /// is sent with `sendfile` hashes the page cache's pages where they are instead of copying
    /// them into a buffer first; 0 reads them. The pages are the page cache's, not memory the
    /// server allocates (the kernel reclaims them as it does any cached file), but they count
    /// in the process's resident size while mapped. Bodies of 64 KiB and more, at most 4,096
    /// files; the least recently checked are unmapped first.
    public var mappedCapacity: Int = 1 << 30
    /// Bodies of up to this many bytes that are checked through their mappings
    /// (``mappedCapacity``) are copied into memory as they are hashed, and written to the
    /// socket from the copy instead of sent from their files with `sendfile`; 0, the default,
    /// copies none. The bytes sent are then the very bytes hashed. `sendfile` costs the server
    /// less (where the network card can send from the page cache, nothing is copied at all);
    /// a client on the same machine (over loopback) reads a body written from memory for less
    /// than one sent from the page cache (nginx's `sendfile off` against `sendfile on`).
    /// Copies in flight take at most ``copyBudget`` bytes in all; beyond that a body goes by
    /// `sendfile`, as do bodies too small to be mapped.
    public var copyLimit: Int = 0
    /// The most bytes of body copies (``copyLimit``) held at once, in the whole process.
    var copyBudget: Int = 256 << 20
    /// The caching rules: a shared cache (RFC 9111 §3.5: `private` and, without `public` or
    /// `s-maxage`, authenticated responses are not stored); a stale response is served after an
    /// origin failure only where `stale-if-error` allows it.
    public var engine: CachePolicyEngine = CachePolicyEngine(mode: .shared, servesStaleWhenDisconnected: false)
    /// A CDN node (RFC 9213): a response's `CDN-Cache-Control`, when it has one, decides
    /// instead of its `Cache-Control` and `Expires` (which still reach the client as sent).
    public var isCDN = false
    /// The token a `PURGE` request must carry as `Authorization: Bearer <token>`; `nil`
    /// refuses every purge.
    public var purgeToken: String?
    /// This node's name in `Via` (RFC 9110 §7.6.3).
    public var viaName: String = "diskcache-server"
    /// How long the origin may take to connect, and then to send each part of its answer.
    public var originConnectTimeout: Duration = .seconds(5)
    public var originReadTimeout: Duration = .seconds(60)
    /// On shutdown, how long requests in progress may take to finish before their connections are closed.
    public var shutdownGracePeriod: Duration = .seconds(10)
    /// How long a client may hold a connection without progress (see ``Timeouts``).
    public var timeouts = Timeouts()
    /// The most client connections open at once; one more is answered 503 and closed at once.
    /// 1,024 by default (nginx's 512 `worker_connections` for each of two workers).
    public var maximumConnections: Int = 1024
    /// A response is stored on the `minimumUses`-th request for its key that the cache could not
    /// answer (nginx's `proxy_cache_min_uses`); the earlier ones are passed on to the client
    /// (`X-Cache: MISS`) without being written. 1, the default, stores the first, as nginx does:
    /// what was asked for once is there the second time, which clients and RFC 9111's tests
    /// expect. 2 spares the disk the responses asked for once (a third to half of a CDN's
    /// objects) for one more miss on each of the others; see docs/server.md. Requests are
    /// counted for the last ``minimumUsesWindow`` keys, in this process's memory; a key with a
    /// response stored (any variant, fresh or stale) is always stored again.
    public var minimumUses: Int = 1
    /// How many keys ``minimumUses`` counts requests for: 100,000 by default (a few MB).
    public var minimumUsesWindow: Int = 100_000
    /// What the node does with a response that carries `Set-Cookie` (see ``SetCookiePolicy``):
    /// by default it is not stored, as nginx and Varnish do.
    public var setCookie: SetCookiePolicy = .doNotStore
    /// A separate address for the node's own endpoints (`/_cache/health`, `/_cache/metrics`,
    /// `PURGE`); nil (the default) serves them on the client port. When set, the client port
    /// forwards such requests to the origin like any other.
    public var adminHost: String?
    /// The admin address's port (0: any free port; ``CacheServer/adminPort`` tells which).
    public var adminPort: Int = 0
    /// `/_cache/metrics` on the client port answers only a request with the purge token
    /// (`Authorization: Bearer <token>`); off by default. The admin address never asks.
    public var metricsNeedToken = false
    /// How many event loop threads accept connections and answer them: nil (the default)
    /// shares NIO's process-wide group, one thread per core (`System.coreCount`); a number
    /// gives the server a group of its own of that many threads, shut down when it stops.
    public var eventLoopCount: Int?
    /// A stored body read from disk up to this size is checked whole against its checksum
    /// before the first byte is sent, then sent by the kernel from the file (`sendfile`); a
    /// larger one is read and sent in 1 MiB chunks, its last only after the checksum matched
    /// (the first byte sooner, but a damaged body ends in a cut connection, not a refetch).
    var wholeCheckLimit: Int64 = 64 << 20
    /// Requests a prepared answer answers are read and answered straight from the connection's
    /// bytes (`RawHitResponder`); off, they take NIO's HTTP pipeline like every other (for
    /// tests that compare the two, and `diskcache-server --fast-paths`).
    package var answersFromBytes = true
    /// Hits held in memory or in the page cache are answered on the connection's event loop
    /// (`EventLoopHitResponder`); off, every request takes the connection's task (for
    /// `diskcache-server --fast-paths`, which measures what each path saves).
    package var answersOnEventLoop = true

    /// The bytes of ``memoryCapacity`` for answers prepared for hits (see `PreparedHits`): an eighth.
    var preparedCapacity: Int { memoryCapacity / 8 }
    /// The rest, for the memory tier.
    var memoryTierCapacity: Int { memoryCapacity - preparedCapacity }

    public init(origin: Origin, cacheDirectory: URL) {
        self.origin = origin
        self.cacheDirectory = cacheDirectory
    }

    /// An origin server reached over plain HTTP/1.1.
    public struct Origin: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// Parses `http://host[:port]` (a trailing `/` allowed); throws a ``ServerConfigurationError``
        /// saying what is wrong.
        public init(parsing text: String) throws(ServerConfigurationError) {
            guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
                throw ServerConfigurationError("the origin \"\(text)\" is not a URL; expected http://host[:port]")
            }
            guard scheme == "http" else {
                throw ServerConfigurationError("the origin \"\(text)\" uses \(scheme); only http:// origins are supported")
            }
            guard let host = components.host, !host.isEmpty else {
                throw ServerConfigurationError("the origin \"\(text)\" has no host")
            }
            guard components.path.isEmpty || components.path == "/", components.query == nil, components.fragment == nil else {
                throw ServerConfigurationError("the origin \"\(text)\" has a path or query; give only http://host[:port]")
            }
            guard components.user == nil, components.password == nil else {
                throw ServerConfigurationError("the origin \"\(text)\" carries credentials; they are not supported")
            }
            let port = components.port ?? 80
            guard (1...65_535).contains(port) else { throw ServerConfigurationError("the origin's port \(port) is out of range") }
            self.init(host: host, port: port)
        }

        /// `host:port` as a `Host` field names it (the port left out when it is 80).
        public var authority: String {
            let bracketed = host.contains(":") ? "[\(host)]" : host
            return port == 80 ? bracketed : "\(bracketed):\(port)"
        }

        public var description: String { "http://\(authority)" }
    }

    /// How long a client may hold a connection without progress; each ends it with a close
    /// (nginx's `client_header_timeout`, `client_body_timeout`, `send_timeout`,
    /// `keepalive_timeout`, whose defaults these are). Read while the connection is open.
    public struct Timeouts: Sendable, Hashable {
        /// From a request head's first byte (or the connection's opening) to its end: 60 s.
        public var header: Duration = .seconds(60)
        /// Between two reads of a request's body: 60 s.
        public var body: Duration = .seconds(60)
        /// An answer the client does not read (the connection stays unwritable): 60 s.
        public var send: Duration = .seconds(60)
        /// A kept-alive connection with nothing under way: 75 s.
        public var idle: Duration = .seconds(75)
        /// The rest of a request's body after its answer has ended (an origin that answered an
        /// upload early), read and dropped whatever its pace, before the connection closes:
        /// 30 s, nginx's `lingering_time`. Not an option of the server; tests shorten it.
        var lingering: Duration = .seconds(30)

        public init() {}

        var shortest: Duration { Swift.min(header, body, send, idle) }
    }

    /// What the node does with an origin's response that carries `Set-Cookie`. RFC 9111 lets a
    /// shared cache store it, but a stored cookie reaches every client after: one user's session
    /// becomes the next one's.
    public enum SetCookiePolicy: String, Sendable, CaseIterable {
        /// Passed on to the client that asked, never stored (nginx's and Varnish's default).
        case doNotStore = "bypass"
        /// Passed on to the client that asked, and stored without its `Set-Cookie` fields
        /// (nginx's `proxy_ignore_headers Set-Cookie` with `proxy_hide_header Set-Cookie` on
        /// hits).
        case storeWithoutField = "strip"
    }

    /// Checks the values that cannot be checked by their types.
    public func validate() throws(ServerConfigurationError) {
        guard (0...65_535).contains(port) else { throw ServerConfigurationError("the port \(port) is out of range (0-65535)") }
        guard diskCapacity > 0 else { throw ServerConfigurationError("the disk capacity must be more than 0 bytes") }
        guard memoryCapacity >= 0 else { throw ServerConfigurationError("the memory capacity cannot be negative") }
        guard mappedCapacity >= 0 else { throw ServerConfigurationError("the mapped capacity cannot be negative") }
        guard (0...(1 << 30)).contains(copyLimit) else { throw ServerConfigurationError("the copy limit must be 0 to 1 GiB, not \(copyLimit) bytes") }
        if let eventLoopCount, !(1...1024).contains(eventLoopCount) {
            throw ServerConfigurationError("the number of event loops must be 1 to 1024, not \(eventLoopCount)")
        }
        guard (1...1000).contains(minimumUses) else { throw ServerConfigurationError("min-uses must be 1 to 1000, not \(minimumUses)") }
        guard (1...100_000_000).contains(minimumUsesWindow) else {
            throw ServerConfigurationError("the min-uses window must be 1 to 100000000 keys, not \(minimumUsesWindow)")
        }
        guard (1...1_000_000).contains(maximumConnections) else {
            throw ServerConfigurationError("the connection limit must be 1 to 1000000, not \(maximumConnections)")
        }
        for (name, value) in [("header", timeouts.header), ("body", timeouts.body), ("send", timeouts.send), ("idle", timeouts.idle)]
        where value <= .zero {
            throw ServerConfigurationError("the \(name) timeout must be more than 0 seconds")
        }
        guard (0...65_535).contains(adminPort) else { throw ServerConfigurationError("the admin port \(adminPort) is out of range (0-65535)") }
        if metricsNeedToken, purgeToken == nil {
            throw ServerConfigurationError("metrics that need the token need a purge token")
        }
        if let purgeToken, purgeToken.isEmpty || purgeToken.contains(where: { $0.isWhitespace }) {
            throw ServerConfigurationError("the purge token must be non-empty and without spaces")
        }
        guard !viaName.isEmpty, !viaName.contains(where: { $0.isWhitespace || $0 == "," }) else {
            throw ServerConfigurationError("the Via name \"\(viaName)\" must be one token (no spaces or commas)")
        }
    }
}
#endif

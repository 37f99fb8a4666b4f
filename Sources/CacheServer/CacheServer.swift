#if Server
import Foundation
import DiskCache
import DiskCacheLocking
import HTTPCache
public import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
public import ServiceLifecycle

/// An RFC 9111 caching reverse proxy over the disk store: every request goes to one origin,
/// and what may be stored is stored, in a cache directory other processes may share.
///
/// ```swift
/// let server = try await CacheServer.start(configuration)
/// try await server.run()          // until shutdown(), or the service group's graceful shutdown
/// ```
///
/// `shutdown()` stops accepting connections, closes idle ones, lets requests in progress finish
/// (for up to ``ServerConfiguration/shutdownGracePeriod``), then closes the store cleanly.
public final class CacheServer: Service, Sendable {
    public let configuration: ServerConfiguration
    /// The port the server listens on (the one chosen when the configuration says 0).
    public let port: Int
    let handler: ProxyHandler
    private let cache: HTTPResponseStore
    let listener: NIOAsyncChannel<Connection, Never>
    /// The listener of ``ServerConfiguration/adminHost``, when it is set.
    let adminListener: NIOAsyncChannel<Connection, Never>?
    /// The port of the admin address (the one chosen when the configuration says 0); nil without one.
    public let adminPort: Int?
    /// The open connections, and whether ``shutdown()`` has begun (read on the event loops by
    /// ``EventLoopHitResponder`` too).
    private let connections: PthreadMutex<Connections>
    /// Files open for bodies being sent with `sendfile`, over all connections.
    let sentFileCount: PthreadMutex<SentFileCounts>
    private let logger: Logger
    /// The server's own event loops (``ServerConfiguration/eventLoopCount``), shut down once
    /// ``run()`` has closed the store; nil when it uses NIO's shared group.
    let ownGroup: MultiThreadedEventLoopGroup?

    struct Connections {
        /// Busy: the connection's task is answering a request.
        var open: [Int: (channel: any Channel, busy: Bool, activity: InFlightCount)] = [:]
        var nextID = 0
        var isDraining = false
    }

    /// Opens the store and starts listening.
    ///
    /// #### Errors
    /// ``ServerConfigurationError`` for a value that cannot work; the store's error when the
    /// cache directory cannot be opened (a file, no permission, opened exclusively elsewhere);
    /// NIO's error when the address cannot be bound (in use, not an address of this machine).
    public static func start(_ configuration: ServerConfiguration,
                             logger: Logger = Logger(label: "diskcache-server")) async throws -> CacheServer {
        try configuration.validate()
        let cache = try HTTPResponseStore(memoryCapacity: configuration.memoryTierCapacity, diskCapacity: configuration.diskCapacity,
                                          directory: configuration.cacheDirectory, engine: configuration.engine)
        cache.mappedBodyCapacity = Int64(configuration.mappedCapacity)
        let ownGroup = configuration.eventLoopCount.map { MultiThreadedEventLoopGroup(numberOfThreads: $0) }
        let group = ownGroup ?? MultiThreadedEventLoopGroup.singleton
        let sentFileCount = PthreadMutex(SentFileCounts())
        let origin = OriginClient(origin: configuration.origin, group: group, connectTimeout: configuration.originConnectTimeout,
                                  readTimeout: configuration.originReadTimeout)
        let handler = ProxyHandler(cache: cache, configuration: configuration, origin: origin, logger: logger)
        // Draining once `shutdown()` begins: from then on every request takes the task path,
        // which closes the connection.
        let connections = PthreadMutex(Connections())
        let openConnections = PthreadMutex(0)
        let listener: NIOAsyncChannel<Connection, Never>
        var adminListener: NIOAsyncChannel<Connection, Never>?
        do {
            func bind(host: String, port: Int, admin: Bool) async throws -> NIOAsyncChannel<Connection, Never> {
                try await ServerBootstrap(group: group)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .serverChannelOption(.backlog, value: 1024)
                    .bind(host: host, port: port) { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try Self.configure(channel, admin: admin, configuration: configuration, handler: handler, logger: logger,
                                               sentFileCount: sentFileCount, connections: connections, openConnections: openConnections)
                        }
                    }
            }
            listener = try await bind(host: configuration.host, port: configuration.port, admin: false)
            if let adminHost = configuration.adminHost {
                adminListener = try await bind(host: adminHost, port: configuration.adminPort, admin: true)
            }
        } catch {
            try? cache.closeStore()
            try? await ownGroup?.shutdownGracefully()
            throw ServerConfigurationError("cannot listen on \(configuration.host):\(configuration.port): \(error)")
        }
        return CacheServer(configuration: configuration, cache: cache, listener: listener, adminListener: adminListener,
                           handler: handler, logger: logger, sentFileCount: sentFileCount, connections: connections, ownGroup: ownGroup)
    }

    /// Sets up an accepted connection's pipeline, from the socket inwards: ``ClientTimeouts``;
    /// on the client port ``RawHitResponder``; NIO's HTTP/1.1 codec and pipelining handler;
    /// ``RequestGuard``; ``ResponseWrites``; on the client port ``EventLoopHitResponder``; the
    /// connection's task. One connection past ``ServerConfiguration/maximumConnections`` gets
    /// only a 503 and a close.
    private static func configure(_ channel: any Channel, admin: Bool, configuration: ServerConfiguration, handler: ProxyHandler,
                                  logger: Logger, sentFileCount: PthreadMutex<SentFileCounts>, connections: PthreadMutex<Connections>,
                                  openConnections: PthreadMutex<Int>) throws -> Connection {
        let pipeline = channel.pipeline.syncOperations
        let admitted = openConnections.withLock { count in
            guard count < configuration.maximumConnections else { return false }
            count += 1
            return true
        }
        if admitted {
            channel.closeFuture.whenComplete { _ in openConnections.withLock { $0 -= 1 } }
        }
        try pipeline.configureHTTPServerPipeline(withErrorHandling: false)
        let clock = ClientTimeouts.Clock()
        try pipeline.addHandler(RequestGuard(clock: clock))
        let sentFiles = SentFiles(counting: sentFileCount)
        let activity = InFlightCount()
        let declined = DeclinedRequests()
        channel.closeFuture.whenComplete { _ in activity.closed() }
        let handedOn = HandedOn()
        if configuration.answersFromBytes, !admin {
            try pipeline.addHandler(RawHitResponder(
                handedOn: handedOn, activity: activity, clock: clock,
                answer: { target in connections.withLock { $0.isDraining } ? nil : handler.rawAnswer(for: target) },
                answered: { target, outcome, started in
                    guard logger.logLevel <= .info else { return }
                    let head = HTTPRequestHead(version: .http1_1, method: target.isHEAD ? .HEAD : .GET, uri: target.uri)
                    CacheServer.logAccess(logger, head, outcome, since: started)
                }), position: .first)
        }
        try pipeline.addHandler(ClientTimeouts(clock: clock, timeouts: configuration.timeouts) { reason in
            handler.note(.connectionsTimedOut)
            logger.debug("A connection timed out", metadata: ["reason": "\(reason)"])
        }, position: .first)
        try pipeline.addHandler(ResponseWrites(files: sentFiles, activity: activity, handedOn: handedOn, clock: clock))
        if configuration.answersOnEventLoop, !admin {
            try pipeline.addHandler(EventLoopHitResponder(
                activity: activity, declined: declined,
                answer: { head in connections.withLock { $0.isDraining } ? .declined(nil) : handler.answerOnEventLoop(head, sentFiles: sentFiles) },
                answered: { head, outcome, started in CacheServer.logAccess(logger, head, outcome, since: started) }))
        }
        if !admitted {
            handler.note(.connectionsRefused)
            logger.warning("A connection was refused: \(configuration.maximumConnections) are open (maximum-connections)")
            try pipeline.addHandler(ConnectionRefusal(), position: .first)
        }
        return Connection(channel: try NIOAsyncChannel(wrappingChannelSynchronously: channel), sentFiles: sentFiles,
                          activity: activity, declined: declined, isAdmin: admin)
    }

    private init(configuration: ServerConfiguration, cache: HTTPResponseStore,
                 listener: NIOAsyncChannel<Connection, Never>, adminListener: NIOAsyncChannel<Connection, Never>?,
                 handler: ProxyHandler, logger: Logger, sentFileCount: PthreadMutex<SentFileCounts>,
                 connections: PthreadMutex<Connections>, ownGroup: MultiThreadedEventLoopGroup?) {
        self.configuration = configuration
        self.adminListener = adminListener
        adminPort = adminListener.flatMap { $0.channel.localAddress?.port }
        self.ownGroup = ownGroup
        self.sentFileCount = sentFileCount
        self.connections = connections
        self.cache = cache
        self.listener = listener
        self.handler = handler
        self.logger = logger
        port = listener.channel.localAddress?.port ?? configuration.port
    }

    /// What the server has done so far.
    public var statistics: ServerStatistics { handler.statistics.withLock { $0 } }

    /// Files held open for bodies being sent with `sendfile` (0 once every such write is done).
    var filesBeingSent: Int { sentFileCount.withLock { $0.open } }

    /// Bodies sent from their files with `sendfile` since the server started.
    var filesSent: Int { sentFileCount.withLock { $0.adopted } }

    /// Serves connections until ``shutdown()`` or a graceful shutdown of the `ServiceGroup`
    /// running it (swift-service-lifecycle: SIGTERM, say); then waits for the connections to
    /// finish and closes the store.
    public func run() async throws {
        try await withGracefulShutdownHandler {
            try await serve()
        } onGracefulShutdown: {
            Task { await self.shutdown() }
        }
    }

    private func serve() async throws {
        logger.notice("Listening", metadata: ["address": "\(configuration.host):\(port)", "origin": "\(configuration.origin)",
                                            "cache": "\(configuration.cacheDirectory.path)"])
        try await withThrowingDiscardingTaskGroup { listeners in
            for listener in [listener] + (adminListener.map { [$0] } ?? []) {
                listeners.addTask {
                    try await listener.executeThenClose { inbound in
                        try await withThrowingDiscardingTaskGroup { group in
                            for try await connection in inbound {
                                group.addTask { await self.serve(connection) }
                            }
                        }
                    }
                }
            }
        }
        await handler.waitForRefreshes()
        await handler.origin.pool.closeAll()
        do {
            try cache.closeStore()
            logger.notice("Stopped; the store is closed")
        } catch {
            // The directory or its SHARED file removed under the server, say: nothing more can
            // be written, and the next start recovers the store as after a crash.
            logger.error("Stopped; the store could not be closed cleanly: \(error)")
        }
        try await ownGroup?.shutdownGracefully()
    }

    /// Stops accepting connections and closes idle ones; a request in progress finishes (its
    /// connection closes after it), for up to the grace period. ``run()`` returns after.
    public func shutdown() async {
        // Draining first: a connection found idle below gets no answer from its responder after.
        connections.withLock { $0.isDraining = true }
        try? await listener.channel.close()
        try? await adminListener?.channel.close()
        let deadline = ContinuousClock.now + configuration.shutdownGracePeriod
        var closed = Set<ObjectIdentifier>()
        while ContinuousClock.now < deadline {
            let idle = connections.withLock { state in
                state.open.values.filter { !$0.busy && $0.activity.isIdle && !closed.contains(ObjectIdentifier($0.channel)) }.map(\.channel)
            }
            for channel in idle {
                closed.insert(ObjectIdentifier(channel))
                try? await channel.close()
            }
            if connections.withLock({ $0.open.isEmpty }) { break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        for channel in connections.withLock({ $0.open.values.map(\.channel) }) { try? await channel.close() }
    }

    /// An accepted connection, the files of the bodies it sends with `sendfile`, and the
    /// answers its ``EventLoopHitResponder`` has under way.
    struct Connection: Sendable {
        let channel: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>
        let sentFiles: SentFiles
        let activity: InFlightCount
        /// What the event loop made of the request it last left to the task.
        let declined: DeclinedRequests
        /// Accepted on the admin address: only the node's own endpoints answer.
        let isAdmin: Bool
    }

    private func serve(_ accepted: Connection) async {
        let connection = accepted.channel
        defer { accepted.sentFiles.closeAll() }
        let id: Int? = connections.withLock { state in
            guard !state.isDraining else { return nil }
            state.nextID += 1
            state.open[state.nextID] = (connection.channel, false, accepted.activity)
            return state.nextID
        }
        guard let id else {
            try? await connection.channel.close()
            return
        }
        defer { _ = connections.withLock { $0.open.removeValue(forKey: id) } }
        do {
            try await connection.executeThenClose { inbound, outbound in
                let writer = ClientWriter(outbound: outbound, sentFiles: accepted.sentFiles, activity: accepted.activity)
                var parts = inbound.makeAsyncIterator()
                while true {
                    guard setBusy(id, false) else { break }
                    guard let part = try await parts.next() else { break }
                    guard case .head(let head) = part else { continue }
                    guard setBusy(id, true) else { break }
                    let started = ContinuousClock.now
                    let outcome = try await handler.handle(head, parts: &parts, writer: writer, admin: accepted.isAdmin,
                                                           declined: accepted.declined.take(for: head))
                    Self.logAccess(logger, head, outcome, since: started)
                    guard head.isKeepAlive, outcome.canContinue else { break }
                }
                // The close that follows would fail the writes still pending (a body sent with
                // `sendfile`, say): it waits until every response is written.
                await accepted.activity.idle()
            }
        } catch {
            logger.debug("A connection ended early", metadata: ["error": "\(error)"])
        }
    }

    /// Marks a connection busy or idle; false when the server is draining and it should close.
    private func setBusy(_ id: Int, _ busy: Bool) -> Bool {
        connections.withLock { state in
            state.open[id]?.busy = busy
            return !state.isDraining || busy
        }
    }

    private static func logAccess(_ logger: Logger, _ head: HTTPRequestHead, _ outcome: Outcome, since started: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - started
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        logger.info("\(head.method.rawValue) \(head.uri) \(outcome.status) \(outcome.bytes) \(outcome.cacheStatus) \(String(format: "%.1f", milliseconds))ms")
    }
}
#endif

#if Vapor
public import DiskCache
public import Foundation
public import Vapor

extension Application.Caches.Provider {
    /// A cache in `directory`, kept across restarts of the application: opens (or creates) a
    /// `DiskCache` there now, and closes it when the application shuts down.
    ///
    /// ```swift
    /// try app.caches.use(.disk(directory: URL(fileURLWithPath: app.directory.workingDirectory + "Cache")))
    /// ```
    ///
    /// The cache logs what it does by itself (its sweeps, a failed group commit) to the
    /// application's `app.logger` once the provider is in use; what its open reports (what it
    /// repaired) goes to `configuration`'s logger, as the open comes first.
    ///
    /// - Parameters:
    ///   - directory: the cache's directory; created (mode 0700) if it does not exist.
    ///   - configuration: the cache's settings (`DiskCache/Configuration`'s defaults: 512 MiB,
    ///     `.batched` durability, shared with other instances that open the same directory).
    ///     Its kind is replaced by ``DiskCacheVaporCache/cacheKind``.
    ///   - coder: how values are encoded; JSON (`JSONCacheCoder`) by default.
    /// - Throws: `DiskCacheError` when the cache cannot be opened (see
    ///   `DiskCache/init(directory:configuration:)`; `.otherKind` when the directory holds
    ///   another kind of cache, left as it is), so that a misconfigured application fails
    ///   while it is configured, not at its first request.
    public static func disk(directory: URL, configuration: DiskCache.Configuration = .init(),
                            coder: any CacheCoder = JSONCacheCoder()) throws -> Self {
        let logs = ApplicationLogs(until: configuration.logger)
        var configuration = configuration
        configuration.kind = DiskCacheVaporCache.cacheKind
        // Vapor's `set` promises the value to the next `get`: every set is written.
        configuration.admission = .everyStore
        configuration.logger = Logger(label: configuration.logger.label) { _ in ApplicationLogs.Handler(logs: logs) }
        let cache = try DiskCache(directory: directory, configuration: configuration)
        return .disk(cache, coder: coder, closesOnShutdown: true, logs: logs)
    }

    /// A cache over `cache`, which the caller opened and may go on using; the application
    /// flushes it when it shuts down, and does not close it.
    ///
    /// ```swift
    /// let cache = try DiskCache(directory: directory, configuration: .init(durability: .immediate))
    /// app.caches.use(.disk(cache))
    /// ```
    ///
    /// - Parameters:
    ///   - cache: where the values are stored, under the keys given, unchanged.
    ///   - coder: how values are encoded; JSON (`JSONCacheCoder`) by default.
    public static func disk(_ cache: DiskCache, coder: any CacheCoder = JSONCacheCoder()) -> Self {
        .disk(cache, coder: coder, closesOnShutdown: false)
    }

    private static func disk(_ cache: DiskCache, coder: any CacheCoder, closesOnShutdown: Bool,
                             logs: ApplicationLogs? = nil) -> Self {
        .init { application in
            logs?.attach(application.logger)
            application.lifecycle.use(DiskCacheLifecycle(cache: cache, closes: closesOnShutdown))
            application.caches.use { application in application.caches.disk(cache, coder: coder) }
        }
    }
}

extension Application.Caches {
    /// A Vapor `Cache` over `cache`, whose futures complete on one of the application's event
    /// loops (on the request's, for `request.cache`).
    ///
    /// See ``DiskCacheVaporCache`` for its semantics. To make it the application's cache, use
    /// `Provider.disk(directory:configuration:coder:)` or
    /// `Provider.disk(_:coder:)` instead.
    public func disk(_ cache: DiskCache, coder: any CacheCoder = JSONCacheCoder()) -> DiskCacheVaporCache {
        DiskCacheVaporCache(cache: cache, coder: coder, eventLoop: application.eventLoopGroup.any())
    }
}

/// A Vapor `Cache` that keeps its values in a `DiskCache`: they survive a restart of the
/// application (and a crash, up to the cache's `DiskCache/Configuration/durability`), with no
/// Redis server and no database. Configure it with `app.caches.use(.disk(directory:))`.
///
/// **Values** are encoded by a `CacheCoder` (JSON by default), one entry per key. A stored
/// value that does not decode as the type asked for reads as nil (the entry stays), as with
/// Vapor's memory cache.
///
/// **Directory.** The cache `app.caches.use(.disk(directory:))` opens is of kind
/// ``cacheKind``: a directory holding another kind of cache (a Hummingbird driver's, an
/// `HTTPURLCache`'s, a plain `DiskCache`'s) is refused with `DiskCacheError.Code.otherKind`
/// and left as it is.
///
/// **Expiry** follows Vapor's `CacheExpirationTime`: `set(_:to:expiresIn:)` with a time makes
/// the value read as absent that many seconds after the call (and the cache's sweeper removes
/// it); zero or less stores a value that has already expired. A `set` without a time stores a
/// value that never expires, replacing the earlier value and its expiry. Setting nil removes
/// the key.
///
/// **Threads.** Every call does its disk I/O through `DiskCache`'s async API, on the cache's own
/// I/O threads, never on an event loop; the returned future completes on ``eventLoop``, and
/// values are decoded there.
///
/// **Capacity.** It is a cache: when it passes its `DiskCache/Configuration/diskCapacity`
/// (512 MiB by default), or the volume's free space falls under
/// `DiskCache/Configuration/minimumFreeSpace`, its sweeper evicts entries in its eviction order
/// (S3-FIFO by default).
public struct DiskCacheVaporCache: Cache, Sendable {
    /// The cache the values are stored in.
    public let cache: DiskCache
    /// What turns values into the bytes stored, and back.
    public let coder: any CacheCoder
    /// The event loop the returned futures complete on.
    public let eventLoop: any EventLoop

    /// The `DiskCache/Configuration/kind` of the caches `Provider.disk(directory:configuration:coder:)`
    /// opens: `vapor-cache`. Open a cache with it to hand to `Provider.disk(_:coder:)` a
    /// directory the other opens too.
    public static let cacheKind = "vapor-cache"

    /// A cache over `cache` whose futures complete on `eventLoop`.
    ///
    /// - Parameters:
    ///   - cache: where the values are stored.
    ///   - coder: how values are encoded; JSON (`JSONCacheCoder`) by default.
    ///   - eventLoop: where the returned futures complete.
    public init(cache: DiskCache, coder: any CacheCoder = JSONCacheCoder(), eventLoop: any EventLoop) {
        self.cache = cache
        self.coder = coder
        self.eventLoop = eventLoop
    }

    /// The value stored for `key`, or nil if there is none, it has expired, or it does not
    /// decode as a `T` (as Vapor's memory cache answers a value of another type; the entry
    /// stays).
    ///
    /// The future fails with a `DiskCacheError` when the cache fails.
    public func get<T>(_ key: String, as type: T.Type) -> EventLoopFuture<T?> where T: Decodable & VaporSendableMetatype {
        let cache = self.cache
        let coder = self.coder
        return eventLoop.makeFutureWithTask { try await cache.data(for: key) }
            .map { data in data.flatMap { try? coder.decode(T.self, from: $0) } }
    }

    /// Stores `value` for `key` with no expiry, replacing any earlier value; nil removes the key.
    public func set<T>(_ key: String, to value: T?) -> EventLoopFuture<Void> where T: Encodable {
        set(key, to: value, expiresIn: nil)
    }

    /// Stores `value` for `key`, replacing any earlier value, to expire `expirationTime` from now
    /// (nil: never); nil removes the key.
    ///
    /// The value is encoded on the calling thread; the future fails with
    /// `DiskCacheError/Code/invalidArgument` when it cannot be, and with other
    /// `DiskCacheError`s when the cache fails.
    public func set<T>(_ key: String, to value: T?, expiresIn expirationTime: CacheExpirationTime?) -> EventLoopFuture<Void>
        where T: Encodable
    {
        let cache = self.cache
        guard let value else {
            return eventLoop.makeFutureWithTask { try await cache.removeValue(for: key) }
        }
        let data: Data
        do {
            data = try TypedValues.encode(value, for: key, with: coder)
        } catch {
            return eventLoop.makeFailedFuture(error)
        }
        let expires = expirationTime.map { Date(timeIntervalSinceNow: TimeInterval($0.seconds)) }
        return eventLoop.makeFutureWithTask { try await cache.store(data, for: key, expires: expires) }
    }

    /// The same cache, with futures that complete on the request's event loop.
    public func `for`(_ request: Request) -> DiskCacheVaporCache {
        DiskCacheVaporCache(cache: cache, coder: coder, eventLoop: request.eventLoop)
    }
}
#endif

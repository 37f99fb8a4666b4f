#if Hummingbird
public import DiskCache
public import Foundation
public import Hummingbird

/// A Hummingbird `PersistDriver` that keeps its key/value pairs in a `DiskCache`: they
/// survive a restart of the application (and a crash, up to the cache's
/// `DiskCache/Configuration/durability`), with no Redis server and no database.
///
/// ```swift
/// let persist = try DiskCachePersistDriver(directory: URL(fileURLWithPath: "/var/cache/myapp/persist"))
/// let app = Application(router: router, services: [persist])
/// ```
///
/// Add the driver to the application's services, as Hummingbird's own drivers are: when the
/// application shuts down it calls ``shutdown()``, which flushes the cache and closes it if the
/// driver opened it.
///
/// **Values** are encoded by a `CacheCoder` (JSON by default) and stored one entry per key.
/// ``get(key:as:)`` throws `PersistError.invalidConversion` when the stored bytes do not decode
/// as the type asked for, and leaves the entry as it is.
///
/// **Expiry.** An `expires` duration is turned into a date when the call is made; from that date
/// the key reads as absent (``get(key:as:)`` returns nil, ``create(key:value:expires:)`` may
/// create it again) and the cache's sweeper removes it. A duration of zero or less stores an entry
/// that has already expired. ``set(key:value:expires:)`` with a nil `expires` keeps the expiry
/// date of the value it replaces, as the protocol asks.
///
/// **Atomicity.** ``create(key:value:expires:)`` refuses a key that holds a value with
/// `PersistError.duplicate`. The check and the write are atomic against every other call of
/// the same driver (each key's writes are serialized), so of concurrent creates of one key
/// exactly one succeeds. Across drivers (or processes) that share one cache directory they are
/// not: two of them may both create the same key, and the later write wins.
///
/// **Threads.** Every call does its disk I/O through `DiskCache`'s async API, on the cache's own
/// I/O threads: never on an event loop, and never on Swift's cooperative pool.
///
/// **Directory.** The cache the driver opens is of kind ``cacheKind``: a directory that holds
/// another kind of cache (an `HTTPCachingMiddleware`'s, a Vapor cache's, a plain `DiskCache`'s)
/// is refused with `DiskCacheError.Code.otherKind` and left as it is. Give each its own
/// directory.
///
/// **Logging.** Hummingbird hands a persist driver no logger: the cache logs what it does by
/// itself (what its open repaired, its sweeps) to `DiskCache/Configuration/logger`; set it
/// to the application's logger.
///
/// **Capacity.** The entries live in a cache: when it passes its
/// `DiskCache/Configuration/diskCapacity` (512 MiB by default), or the volume's free space falls
/// under `DiskCache/Configuration/minimumFreeSpace`, its sweeper evicts entries in its eviction
/// order (S3-FIFO by default). Size the cache for what the application keeps in it.
public final class DiskCachePersistDriver: PersistDriver {
    /// The cache the values are stored in.
    public let cache: DiskCache
    /// What turns values into the bytes stored, and back.
    public let coder: any CacheCoder
    /// Whether ``shutdown()`` closes ``cache`` (true when the driver opened it).
    private let ownsCache: Bool
    /// Serializes the writes of each key, so that `create`'s check and write and `set`'s
    /// reading of the expiry it keeps are atomic against the other calls of this driver.
    private let writes = KeyedSerialization()

    /// The `DiskCache/Configuration/kind` of the caches the driver opens: `hummingbird-persist`.
    /// Open a cache with it to hand to ``init(cache:coder:)`` one directory the other
    /// initializer opens too.
    public static let cacheKind = "hummingbird-persist"

    /// Opens (or creates) a cache in `directory` for the driver; ``shutdown()`` closes it.
    ///
    /// - Parameters:
    ///   - directory: the cache's directory; created (mode 0700) if it does not exist.
    ///   - configuration: the cache's settings (`DiskCache/Configuration`'s defaults: 512 MiB,
    ///     `.batched` durability, shared with other instances that open the same directory;
    ///     the logger is best the application's). Its kind is replaced by ``cacheKind``, and its
    ///     admission by `.everyStore`.
    ///   - coder: how values are encoded; JSON (`JSONCacheCoder`) by default.
    /// - Throws: `DiskCacheError` when the cache cannot be opened (see
    ///   `DiskCache/init(directory:configuration:)`); `.otherKind` when the directory holds
    ///   another kind of cache.
    public convenience init(directory: URL, configuration: DiskCache.Configuration = .init(),
                            coder: any CacheCoder = JSONCacheCoder()) throws {
        var configuration = configuration
        configuration.kind = Self.cacheKind
        // A session `set` must be there to read: every set is written.
        configuration.admission = .everyStore
        try self.init(cache: DiskCache(directory: directory, configuration: configuration), coder: coder, ownsCache: true)
    }

    /// A driver over a cache the caller opened and keeps using; ``shutdown()`` flushes it but
    /// does not close it.
    ///
    /// - Parameters:
    ///   - cache: the cache to store the values in. Other code may use it too: the driver's
    ///     keys are the keys given to it, unchanged. Opened with ``cacheKind`` as its kind, its
    ///     directory is one ``init(directory:configuration:coder:)`` opens as well.
    ///   - coder: how values are encoded; JSON (`JSONCacheCoder`) by default.
    public convenience init(cache: DiskCache, coder: any CacheCoder = JSONCacheCoder()) {
        self.init(cache: cache, coder: coder, ownsCache: false)
    }

    private init(cache: DiskCache, coder: any CacheCoder, ownsCache: Bool) {
        self.cache = cache
        self.coder = coder
        self.ownsCache = ownsCache
    }

    /// Stores `value` for `key` unless `key` holds a value that has not expired; then throws
    /// `PersistError.duplicate` and stores nothing.
    ///
    /// - Parameters:
    ///   - key: the key; any string.
    ///   - value: the value, encoded by ``coder``.
    ///   - expires: how long the value lives; nil for no expiry.
    public func create<Object: Codable & Sendable>(key: String, value: Object, expires: Duration?) async throws {
        let data = try coder.encode(value)
        try await writes.run(key) {
            guard try await cache.entry(for: key) == nil else { throw PersistError.duplicate }
            try await cache.store(data, for: key, expires: expires.map(Self.date(in:)))
        }
    }

    /// Stores `value` for `key`, replacing any value it holds.
    ///
    /// - Parameters:
    ///   - key: the key; any string.
    ///   - value: the value, encoded by ``coder``.
    ///   - expires: how long the value lives. Nil keeps the expiry date of the value replaced
    ///     (none if there was none, or no value).
    public func set<Object: Codable & Sendable>(key: String, value: Object, expires: Duration?) async throws {
        let data = try coder.encode(value)
        try await writes.run(key) {
            let date: Date?
            if let expires {
                date = Self.date(in: expires)
            } else {
                date = try await cache.entry(for: key)?.expires
            }
            try await cache.store(data, for: key, expires: date)
        }
    }

    /// The value stored for `key`, or nil if there is none or it has expired.
    ///
    /// - Throws: `PersistError.invalidConversion` when the stored value does not decode as an
    ///   `Object` (the entry stays); `DiskCacheError` when the cache fails.
    public func get<Object: Codable & Sendable>(key: String, as type: Object.Type) async throws -> Object? {
        do {
            return try await cache.value(type, for: key, coder: coder)
        } catch DiskCacheError.Code.undecodableValue {
            throw PersistError.invalidConversion
        }
    }

    /// The value stored for `key` and the time it has left to live (nil for no expiry), or nil if
    /// there is no value or it has expired.
    ///
    /// - Throws: `PersistError.invalidConversion` when the stored value does not decode as an
    ///   `Object` (the entry stays); `DiskCacheError` when the cache fails.
    public func getWithTTL<Object: Codable & Sendable>(key: String, as type: Object.Type) async throws -> (object: Object, ttl: Duration?)? {
        guard let (data, entry) = try await cache.dataAndEntry(for: key) else { return nil }
        let object: Object
        do {
            object = try coder.decode(type, from: data)
        } catch {
            throw PersistError.invalidConversion
        }
        let ttl = entry.expires.map { expires in
            Duration.milliseconds(max(0, Int64((expires.timeIntervalSinceNow * 1000).rounded(.down))))
        }
        return (object, ttl)
    }

    /// Removes the value stored for `key`, if any.
    public func remove(key: String) async throws {
        try await writes.run(key) {
            try await cache.removeValue(for: key)
        }
    }

    /// Flushes the cache (what `.batched` durability had not yet written reaches the disk), and
    /// closes it if the driver opened it (``init(directory:configuration:coder:)``). Called when
    /// the application's services shut down.
    public func shutdown() async throws {
        if ownsCache {
            try await cache.close()
        } else {
            try await cache.flush()
        }
    }

    /// The date `duration` from now.
    private static func date(in duration: Duration) -> Date {
        let (seconds, attoseconds) = duration.components
        return Date(timeIntervalSinceNow: Double(seconds) + Double(attoseconds) * 1e-18)
    }
}
#endif

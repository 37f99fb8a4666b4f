public import Logging

extension DiskCache {
    /// How hard a `store` works to make its write survive power loss.
    ///
    /// A process crash (`kill -9`) loses nothing in any mode: every acknowledged write is in
    /// the kernel's page cache and on disk eventually. The modes differ after power loss or a
    /// kernel crash; `docs/durability.md` states each promise exactly. In every mode a read
    /// never returns bytes that were not stored for its key.
    public struct Durability: Hashable, Sendable, CustomStringConvertible {
        enum Mode: Hashable, Sendable {
            case none
            case batched(Duration)
            case immediate
        }
        let mode: Mode

        /// No fsync. After power loss, recent writes (up to what the kernel had not yet
        /// written back, typically ~30 s) may be missing; what is read back is never corrupt.
        public static let none = Durability(mode: .none)
        /// Group commit every second: see ``batched(interval:)``.
        public static let batched = Durability(mode: .batched(.seconds(1)))
        /// Group commit: every `interval`, one sync makes all writes since the last one durable
        /// (journal, bodies, metadata and directories), shared by all writers of the interval.
        /// After power loss, writes acknowledged before the last completed sync survive;
        /// later ones may be missing. `store` does not wait for the sync; ``DiskCache/flush()`` does.
        public static func batched(interval: Duration) -> Durability {
            Durability(mode: .batched(max(interval, .milliseconds(1))))
        }
        /// `store` returns only after the body, the metadata, their directory entries and the
        /// journal record are on stable storage (fsync), so an acknowledged write survives
        /// power loss. Concurrent writers share journal fsyncs.
        public static let immediate = Durability(mode: .immediate)

        public var description: String {
            switch mode {
            case .none: return "none"
            case .batched(let interval): return "batched(\(interval))"
            case .immediate: return "immediate"
            }
        }
    }

    /// Settings of a cache. Each states its default and when a change takes effect.
    public struct Configuration: Sendable {
        /// The most the cache may occupy on disk, in bytes, counting bodies, metadata files
        /// and the journal at the filesystem's block granularity. 512 MiB by default.
        /// Enforced by the sweeper; see ``DiskCache/setDiskCapacity(_:)`` to change it while open.
        public var diskCapacity: Int64

        /// The most entries the cache may hold; nil (the default) for no limit.
        public var countLimit: Int?

        /// See ``Durability``. `.batched` (one group commit a second) by default.
        public var durability: Durability

        /// Whether every read checks the body against its XXH3-64 checksum. On by default;
        /// a corrupt entry then reads as a miss, is removed, and is counted.
        public var verifiesChecksums: Bool

        /// Bodies of at most this many bytes are stored inside the `.meta` file, so that a
        /// read or write touches one file instead of two. 8 KiB by default (measured: see
        /// docs/benchmarks.md); 0 stores every body in its own file. Applies to later writes.
        public var inlineThreshold: Int

        /// Where the store reports what it repaired at open (a torn journal tail, orphan files).
        public var logger: Logger

        // Test hooks, internal on purpose.
        /// Milliseconds since 1970.
        var clock: @Sendable () -> Int64 = { DiskCache.systemMilliseconds() }
        var keyHasher: KeyHasher = .xxh3
        /// How often the background thread looks for work (access-time batches, group commit,
        /// compaction). Idle ticks touch no file.
        var maintenanceInterval: Duration = .seconds(1)
        /// When the journal is rewritten: at least this many redundant records, and at least as many as live entries.
        var compactionThreshold: Int = 2000

        public init(
            diskCapacity: Int64 = 512 << 20,
            countLimit: Int? = nil,
            durability: Durability = .batched,
            verifiesChecksums: Bool = true,
            inlineThreshold: Int = 8 << 10,
            logger: Logger = Logger(label: "DiskCache")
        ) {
            self.diskCapacity = diskCapacity
            self.countLimit = countLimit
            self.durability = durability
            self.verifiesChecksums = verifiesChecksums
            self.inlineThreshold = inlineThreshold
            self.logger = logger
        }
    }
}

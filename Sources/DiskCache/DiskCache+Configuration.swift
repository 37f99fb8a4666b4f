public import MemoryCache
public import Logging
#if canImport(Darwin)
public import Foundation
#endif

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
        /// later ones may be missing. `store` does not wait for the sync; ``DiskCache/flush()-ltyj`` does.
        public static func batched(interval: Duration) -> Durability {
            Durability(mode: .batched(max(interval, .milliseconds(1))))
        }
        /// `store` returns only after the write is on stable storage, so an acknowledged write
        /// survives power loss. An inline entry (metadata file of at most 256 KiB) takes one
        /// fsync: its journal record carries the whole metadata file, which a checkpoint syncs
        /// within a second and the next open rewrites from the record if a power cut took it.
        /// Any other entry has its files, their directory entries and then its journal record
        /// fsynced. Concurrent writers share journal fsyncs.
        public static let immediate = Durability(mode: .immediate)

        public var description: String {
            switch mode {
            case .none: return "none"
            case .batched(let interval): return "batched(\(interval))"
            case .immediate: return "immediate"
            }
        }
    }

    /// Who may have a cache directory open at once.
    public enum Sharing: Hashable, Sendable {
        /// Any number of processes, and of `DiskCache` instances in one process, open the
        /// directory together; each sees what the others store and remove from its next call
        /// on (see docs/on-disk-format.md, "Sharing a cache"). On a network filesystem, where
        /// the locks this relies on cannot be trusted, the cache is opened `.exclusive` instead.
        case shared
        /// One instance owns the directory; any other open fails with
        /// ``DiskCacheError/Code/locked`` until it closes. Saves the few system calls a shared
        /// write spends on locks (see docs/benchmarks.md).
        case exclusive
    }

    /// Which stores the cache writes: every one (the default), or only a key asked to be stored
    /// for the `n`-th time lately, as nginx's `proxy_cache_min_uses` does.
    ///
    /// Most caches see many keys asked for once and never again (a third to half of the keys of
    /// the traces in docs/benchmarks.md). Each such store costs a file, a journal record and
    /// later an eviction, and pushes out an entry that would have been read. With
    /// ``minimumUses(_:window:)``, once the cache has filled to its limits' low watermark
    /// (below it there is room, and every store is written), a store of a key the cache does not
    /// hold is declined (it returns false and writes nothing) until the key's `n`-th store
    /// within the window of the last keys declined. A store that replaces an entry is always written, and so is one of a
    /// key the cache held lately (`EvictionPolicy.s3FIFO` remembers the keys that left its small
    /// queue, evicted or removed).
    ///
    /// The counts are kept in memory by each instance: a reopen starts them over, and instances
    /// sharing a cache each count their own stores.
    public struct Admission: Hashable, Sendable, CustomStringConvertible {
        /// The store that writes a key the cache does not hold: 1 for the first.
        public let minimumUses: Int
        /// How many declined keys are remembered; nil for the cache's ``Configuration/countLimit``,
        /// or without one the entries it holds (at least 4,096).
        public let window: Int?

        /// Every store is written: the default, and what `store` always did.
        public static let everyStore = Admission(minimumUses: 1, window: nil)

        /// A key the cache does not hold is written on its `uses`-th store among the stores of
        /// the last `window` keys declined (nil: see ``window``); the earlier ones return false.
        /// 2 writes what is asked for twice: on the traces of docs/sweeper.md it saves 54–97 %
        /// of the writes, for up to 4.5 points of hit ratio on one and a gain on the other.
        public static func minimumUses(_ uses: Int, window: Int? = nil) -> Admission {
            Admission(minimumUses: max(1, uses), window: window.map { max(1, $0) })
        }

        public var description: String {
            minimumUses <= 1 ? "everyStore" : "minimumUses(\(minimumUses)\(window.map { ", window: \($0)" } ?? ""))"
        }
    }

    /// Settings of a cache. Each states its default and when a change takes effect.
    public struct Configuration: Sendable {
        /// The most the cache may occupy on disk, in bytes, counting bodies, metadata files
        /// and the journal at the filesystem's block granularity. 512 MiB by default.
        /// Enforced by the sweeper: a store that passes it waits until a sweep has brought the
        /// cache back under (the sweep goes on to `lowWatermark` beside later stores), so the
        /// cache is never over by more than one entry for each store in flight (with
        /// `sweepInterval` nil, only at
        /// ``DiskCache/sweep()-2dxyb``). Change it while open with ``DiskCache/diskCapacity``.
        public var diskCapacity: Int64

        /// The most entries the cache may hold; nil (the default) for no limit. Enforced like
        /// ``diskCapacity``; change it while open with ``DiskCache/countLimit``.
        public var countLimit: Int?

        /// How many entry files the cache keeps open after reading them, so that reading an
        /// entry again reads through the open descriptor instead of opening its path (nginx's
        /// `open_file_cache`). An entry's are kept from its second read on; at the limit, those
        /// not read lately are closed first (CLOCK), and an entry's are closed when it is
        /// replaced or removed and when the cache closes. An entry takes one (two with a body
        /// file of its own, see ``inlineThreshold``); 0 keeps none. Fixed at open.
        ///
        /// By default a quarter of the process's soft limit on open descriptors
        /// (`ulimit -n`) when the configuration is made, at most 16,384: 256 under a limit of
        /// 1,024, which leaves three quarters to the rest of the process (a server's sockets).
        /// All the caches of a process together keep no more than that quarter, whatever each
        /// one's setting.
        public var keptOpenFiles: Int = KeptFiles.processLimit

        /// Which stores are written: ``Admission/everyStore`` (the default) or
        /// ``Admission/minimumUses(_:window:)``. `HTTPURLCache` and the integrations built on it
        /// write every cacheable response whatever this says. Fixed at open.
        public var admission: Admission = .everyStore

        /// When the sweeper evicts for capacity or count, it evicts down to this fraction of the
        /// limit. 0.999 by default: a batch of 0.1 % (at least one entry) shares a sweep's fixed
        /// costs (a wake-up of the sweeper, and in `.immediate` a journal sync) while a cache of
        /// N entries holds N to within that batch, and misses as its eviction policy does at
        /// exactly N (0.99 missed up to 0.0012 more on the traces of docs/sweeper.md; 0.9 holds
        /// 0.95 N on average, and misses more). 1 evicts down to the limit itself, one sweep per
        /// store at the limit.
        public var lowWatermark: Double

        /// Which entry the sweeper evicts first. `EvictionPolicy.s3FIFO` by default (one-hit
        /// wonders and scans leave first, and what is read again stays; see docs/sweeper.md), or
        /// `EvictionPolicy.leastRecentlyUsed`. Fixed at open; every instance sharing a cache
        /// should use the same one (each keeps its own order from the journal's records).
        public var evictionPolicy: EvictionPolicy

        /// The sweeper evicts entries (in the eviction order) while the volume's free space is under
        /// `max(minimumFreeSpace, minimumFreeFraction × volume size)`, until it is 10 % above that
        /// floor or the cache is empty. 256 MiB by default.
        public var minimumFreeSpace: Int64

        /// See ``minimumFreeSpace``. 0.02 (2 % of the volume) by default.
        public var minimumFreeFraction: Double

        /// How often the background sweeper checks limits, expiry and free space; nil turns the
        /// background sweeper off (``DiskCache/sweep()-2dxyb`` still works). 10 s by default. A check
        /// with nothing to do costs one `statvfs` and a few integer comparisons.
        public var sweepInterval: Duration?

        /// Called after each removal the cache makes or is asked to make (not for
        /// ``DiskCache/removeAll()-935c2``), with the key and reason, on the thread that removed it
        /// (the sweeper's queue for evictions). Must not block. Nil by default.
        public var onEviction: (@Sendable (Eviction) -> Void)?

        /// Called after each sweep with its report, on the sweeper's queue. Nil by default.
        public var onSweepCompleted: (@Sendable (SweepReport) -> Void)?

        /// Whether other instances may open the directory while this one has it open.
        /// `.shared` by default. Fixed at open.
        public var sharing: Sharing

        /// Shared mode: the longest a call waits for a lock another instance holds (a key's or
        /// the journal's, or the cache's while another instance opens or closes it) before it
        /// fails with ``DiskCacheError/Code/lockTimeout`` and changes nothing, as SQLite's busy
        /// timeout does; and the longest an open waits for the instances of a group whose
        /// `SHARED` file was removed or damaged to close. 10 seconds by default. Fixed at open.
        public var lockTimeout: Duration = .seconds(10)

        /// See ``Durability``. `.batched` (one group commit a second) by default.
        public var durability: Durability

        /// Whether every read checks the body against its XXH3-64 checksum. On by default;
        /// a corrupt entry then reads as a miss, is removed, and is counted.
        public var verifiesChecksums: Bool

        /// Bodies of at most this many bytes are stored inside the `.meta` file, so that a
        /// read or write touches one file instead of two (the file count per entry is what
        /// decides a store's write rate: see docs/benchmarks.md). 1 MiB by default; larger
        /// bodies get a raw `.body` file of their own, which any tool can read or map. 0 stores
        /// every body in its own file; the most a `.meta` file can hold is 4 MiB − 1 bytes with
        /// the key and metadata. Applies to later writes.
        public var inlineThreshold: Int

        /// Where the store reports what it repaired at open (a torn journal tail, orphan files).
        public var logger: Logger

        /// The version of what the application keeps in the cache (its keys and metadata), or
        /// nil (the default) to open any cache as it is. When set, it is written into `VERSION`,
        /// and a cache that names another version, or none, is emptied at open and then marked
        /// with this one: bump it when the application's records change shape, and every older
        /// cache starts empty instead of being misread. Tools that inspect caches leave it nil.
        public var applicationVersion: Int?

        /// What keeps its data in the cache: a short name (1 to 64 ASCII letters, digits, `-`,
        /// `_`, `.`) written into `VERSION` when the cache is made. An open that names another
        /// kind than the cache's mark throws ``DiskCacheError/Code/otherKind`` and changes
        /// nothing, so two components given one directory fail at once instead of one emptying
        /// or misreading the other's entries; ``applicationVersion`` then empties only a cache of
        /// the same kind. ``defaultKind`` (`"DiskCache"`) by default; `HTTPURLCache`, the
        /// Hummingbird and Vapor integrations name their own. Nil opens a cache of any kind as it
        /// is (what `diskcache` and other tools do). A cache marked before kinds were recorded
        /// takes the kind of the first open that names one, unless that open asks for an
        /// ``applicationVersion`` the mark does not carry: then it is refused the same way (see
        /// docs/on-disk-format.md). Fixed at open.
        public var kind: String? = DiskCache.Configuration.defaultKind

        /// The ``kind`` of a cache opened with the default configuration: `"DiskCache"`.
        public static let defaultKind = "DiskCache"

        #if canImport(Darwin)
        /// Apple platforms: the data protection class of the cache's files, or nil (the default)
        /// for the system's default. Set at every open on the cache directory and the
        /// directories in it, so the files made afterwards inherit it; files made earlier keep
        /// theirs (set it when the cache is made to cover them all). A class that
        /// locks files while the device is locked (`.complete`) makes opens, reads and writes
        /// fail with ``DiskCacheError/Code/permissionDenied`` or
        /// ``DiskCacheError/Code/ioFailure`` until it is unlocked: a cache used in the
        /// background wants `.completeUntilFirstUserAuthentication`. Not on Linux, which has no
        /// such classes. (The cache's directory is also excluded from backups there:
        /// `isExcludedFromBackup`, as `CACHEDIR.TAG` does for Linux's backup tools.)
        public var fileProtection: FileProtectionType?
        #endif

        // Test hooks, internal on purpose.
        /// Milliseconds since 1970.
        var clock: @Sendable () -> Int64 = { DiskCache.systemMilliseconds() }
        var keyHasher: KeyHasher = .xxh3
        /// What the kept files share with other caches: the process's budget, or a group's own.
        var keptFilesBudget: KeptFiles.Budget = .shared
        /// How often the background thread looks for work (access-time batches, group commit,
        /// compaction). Idle ticks touch no file.
        var maintenanceInterval: Duration = .seconds(1)
        /// `.immediate` mode: how often the files of PUT+FILE records are made durable and a
        /// CHECKPOINT record says so (``DiskCache/checkpoint()``).
        var checkpointInterval: Duration = .seconds(1)
        /// Bytes of zeros written ahead of the journal's appends at a time (see
        /// `CacheState.writeAhead(for:)`); tests make it small, so that their files stay small
        /// and their appends cross many chunk boundaries.
        var journalWriteAhead: Int = 1 << 20
        /// When the journal is rewritten: at least this many redundant records, and at least as many as live entries.
        var compactionThreshold: Int = 2000
        /// The `statfs` type of the cache's filesystem; tests pretend it is a network one.
        var filesystemTypeProbe: (@Sendable (String) -> Int?)?
        #if DEBUG
        /// Tests: a compaction stops right after renaming its file over the journal, as if its
        /// process were killed there (the shared page is not told).
        var stopsCompactionAfterRename = false
        /// Tests: following another instance's compaction fails (as when no file descriptor is
        /// left to open the new journal) while this returns true.
        var failsJournalSwitch: (@Sendable () -> Bool)?
        #endif
        /// The volume's free space; tests inject a fake volume.
        var volumeSpaceProbe: (@Sendable (String) -> VolumeSpace?)?

        public init(
            diskCapacity: Int64 = 512 << 20,
            countLimit: Int? = nil,
            durability: Durability = .batched,
            verifiesChecksums: Bool = true,
            inlineThreshold: Int = 1 << 20,
            lowWatermark: Double = 0.999,
            evictionPolicy: EvictionPolicy = .s3FIFO,
            minimumFreeSpace: Int64 = 256 << 20,
            minimumFreeFraction: Double = 0.02,
            sweepInterval: Duration? = .seconds(10),
            onEviction: (@Sendable (Eviction) -> Void)? = nil,
            logger: Logger = Logger(label: "DiskCache"),
            sharing: Sharing = .shared
        ) {
            self.sharing = sharing
            self.diskCapacity = diskCapacity
            self.countLimit = countLimit
            self.lowWatermark = min(1, max(0, lowWatermark))
            self.evictionPolicy = evictionPolicy
            self.minimumFreeSpace = minimumFreeSpace
            self.minimumFreeFraction = minimumFreeFraction
            self.sweepInterval = sweepInterval
            self.onEviction = onEviction
            self.durability = durability
            self.verifiesChecksums = verifiesChecksums
            self.inlineThreshold = inlineThreshold
            self.logger = logger
        }
    }
}

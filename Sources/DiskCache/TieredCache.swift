public import Foundation
import MemoryCache
import DiskCacheLocking

/// A `MemoryCache` in front of a ``DiskCache``, with `URLCache`'s capacities and storage
/// policies: what the HTTP layer stores its responses in, and a general two-tier cache.
///
/// - Writes go through to disk (unless the policy says memory only) and into memory.
/// - Reads try memory, then disk; a disk hit is promoted into memory.
/// - Expiry is checked in both tiers: an expired record is never returned.
///
/// - Bodies larger than ``largeBodyThreshold`` are kept on disk only; large bodies can be
///   stored and read without loading them (``store(contentsOf:for:metadata:expires:transfer:policy:)-5brdm``,
///   ``chunks(for:chunkSize:)``, ``withFile(for:_:)``).
///
/// **Threads.** All methods may be called from any thread. The synchronous calls do their disk
/// I/O on the caller's thread, the `async` ones on the caches' I/O threads.
/// Writes, removals and the promotion of a disk hit into memory are serialised per key (by a
/// lock per group of keys), so memory never holds a value the disk has since replaced or lost.
///
/// **Sharing.** When the disk tier is shared with other instances (the default, see
/// ``DiskCache/Sharing``), each call first drops from memory the keys the others
/// stored or removed since, so the memory tier never serves a value another process replaced.
public final class TieredCache: Sendable {
    /// Where a record may be kept: `URLCache.StoragePolicy`'s three values.
    public enum StoragePolicy: String, Sendable, Hashable, CaseIterable {
        /// Memory and disk.
        case allowed
        /// Memory only: gone after a restart, never written to disk.
        case allowedInMemoryOnly
        /// Not kept at all: storing with it removes any earlier value of the key.
        case notAllowed
    }

    /// A stored value with what was stored beside it.
    public struct Record: Sendable, Hashable {
        public var data: Data
        public var metadata: [String: String]
        public var created: Date
        public var expires: Date?

        public init(data: Data, metadata: [String: String] = [:], created: Date = Date(), expires: Date? = nil) {
            self.data = data
            self.metadata = metadata
            self.created = created
            self.expires = expires
        }
    }

    /// Hits, misses and evictions per tier, since the cache was created.
    public struct Statistics: Sendable, Hashable {
        public var memoryHits = 0
        public var diskHits = 0
        public var misses = 0
        /// Values the memory tier dropped to stay under ``TieredCache/memoryCapacity``.
        public var memoryEvictions = 0
        /// Entries the disk tier removed for capacity, count, free space, expiry or corruption.
        public var diskEvictions = 0
    }

    struct State {
        /// Creation date of every key the memory tier holds, for ``removeEntries(modifiedSince:)``.
        var memoryKeys: [String: Date] = [:]
        var statistics = Statistics()
        var memoryCapacity: Int
        var largeBodyThreshold: Int?
        /// With a shared disk tier: the key of each hash the memory tier holds, to drop what
        /// other instances changed (see ``TieredCache/dropWhatOthersChanged()``).
        var memoryHashes: [KeyHash: String] = [:]
        /// Bumped each time changes by other instances are taken: a promotion into memory that
        /// overlapped one drops what it promoted.
        var externalEpoch = 0
    }

    /// The lock-protected state, in a class so that eviction callbacks can hold it.
    final class Shared: Sendable {
        let state: PthreadMutex<State>
        init(_ state: State) { self.state = PthreadMutex(state) }
    }

    /// The disk tier, nil for a memory-only cache.
    public let disk: DiskCache?
    let memory: MemoryCache<String, Record>
    let shared: Shared
    /// The disk tier's key hasher when that tier is shared (changes by others are followed), else nil.
    let sharedHasher: KeyHasher?
    /// The time both tiers go by: the disk configuration's clock (``DiskCache/Configuration``),
    /// which tests set.
    private let clock: @Sendable () -> Int64
    private let stripes: [StripeLock] = (0..<64).map { _ in StripeLock() }

    func stripe(_ key: String) -> StripeLock {
        stripes[Int(UInt(bitPattern: key.hashValue) % UInt(stripes.count))]
    }

    /// Runs `body` holding every key's lock (for the operations that touch all keys).
    private func withAllStripes(_ body: () throws -> Void) throws {
        func lock(_ i: Int) throws {
            if i == stripes.count { return try body() }
            try stripes[i].mutex.withLock { _ in try lock(i + 1) }
        }
        try lock(0)
    }

    /// - Parameters:
    ///   - memoryCapacity: bytes of values (and metadata) the memory tier may hold; 0 keeps nothing in memory.
    ///   - diskCapacity: overrides `configuration.diskCapacity`.
    ///   - directory: the disk tier's directory; nil for a memory-only cache.
    ///   - configuration: the disk tier's configuration (its `diskCapacity` replaced by the one above).
    /// - Throws: ``DiskCacheError`` when the disk tier cannot be opened.
    public init(memoryCapacity: Int, diskCapacity: Int64, directory: URL?,
                configuration: DiskCache.Configuration = .init()) throws {
        let shared = Shared(State(memoryCapacity: max(0, memoryCapacity)))
        self.shared = shared
        clock = configuration.clock
        let hasher = directory != nil && configuration.sharing == .shared ? configuration.keyHasher : nil
        memory = MemoryCache(name: "TieredCache", totalCostLimit: max(1, memoryCapacity)) { eviction in
            // A replaced value's key lives on with its new value.
            guard eviction.reason != .replaced else { return }
            shared.state.withLock { state in
                state.memoryKeys[eviction.key] = nil
                if let hasher { state.memoryHashes[hasher.hash(eviction.key)] = nil }
                state.statistics.memoryEvictions += 1
            }
        }
        if let directory {
            var configuration = configuration
            configuration.diskCapacity = diskCapacity
            let userCallback = configuration.onEviction
            configuration.onEviction = { eviction in
                if eviction.reason != .explicit { shared.state.withLock { $0.statistics.diskEvictions += 1 } }
                userCallback?(eviction)
            }
            let disk = try DiskCache(directory: directory, configuration: configuration)
            self.disk = disk
            // Opened exclusively after all (a network filesystem): nothing to follow.
            sharedHasher = disk.sharedRegion == nil ? nil : hasher
            if sharedHasher != nil { disk.trackExternalChanges() }
        } else {
            disk = nil
            sharedHasher = nil
        }
    }

    /// Drops from memory the keys other instances sharing the disk tier stored or removed since
    /// the last look (all of them after a `removeAll` there). Called before the memory tier is
    /// read; costs a lock and two atomic loads when nothing changed.
    func dropWhatOthersChanged() {
        guard sharedHasher != nil, let disk else { return }
        let dropped = shared.state.withLock { state -> [String]? in
            guard let changes = disk.takeExternalChanges() else { return [] }
            state.externalEpoch += 1
            if changes.everything { return nil }
            return changes.hashes.compactMap { state.memoryHashes[$0] }
        }
        guard let dropped else { return removeAllFromMemory() }
        for key in dropped { removeFromMemory(key) }
    }

    /// The epoch before a disk read or write whose result goes into memory (see ``State/externalEpoch``).
    func externalEpoch() -> Int {
        guard sharedHasher != nil else { return 0 }
        return shared.state.withLock { $0.externalEpoch }
    }

    /// A number that changes whenever changes by other instances were seen (after looking for
    /// them now): a cache of what this instance found stays good while it stays the same, as
    /// long as this instance's own stores tell that cache too. Always 0 for a cache no other
    /// instance shares.
    package func othersChangesEpoch() -> Int {
        dropWhatOthersChanged()
        return externalEpoch()
    }

    /// After a promotion into memory: when changes by others were taken since `epoch`, drops the
    /// key again (it may be one of them, its change taken before it was in memory to drop).
    func dropIfOthersChanged(_ key: String, since epoch: Int) {
        guard sharedHasher != nil, shared.state.withLock({ $0.externalEpoch }) != epoch else { return }
        removeFromMemory(key)
    }

    // MARK: - Capacities

    /// Bytes the memory tier may hold; 0 turns it off. Lowering it evicts at once.
    public var memoryCapacity: Int {
        get { shared.state.withLock { $0.memoryCapacity } }
        set {
            let capacity = max(0, newValue)
            shared.state.withLock { $0.memoryCapacity = capacity }
            if capacity == 0 { memory.removeAll() }
            memory.totalCostLimit = max(1, capacity)
        }
    }

    /// Bytes the disk tier may occupy (0 for a memory-only cache); see ``DiskCache/diskCapacity``.
    public var diskCapacity: Int64 {
        get { disk?.diskCapacity ?? 0 }
        set { disk?.diskCapacity = newValue }
    }

    /// Records whose body is larger than this many bytes are kept on disk only, never in the
    /// memory tier (one of them would push out many small ones); they are read from disk each
    /// time, or streamed with ``chunks(for:chunkSize:)`` and ``withFile(for:_:)``. `nil`
    /// (the default) means 5 % of ``memoryCapacity``, `URLCache`'s rule. A cache without a disk
    /// tier, and records stored `.allowedInMemoryOnly`, keep every body in memory: there is
    /// nowhere else for it.
    public var largeBodyThreshold: Int? {
        get { shared.state.withLock { $0.largeBodyThreshold } }
        set { shared.state.withLock { $0.largeBodyThreshold = newValue.map { max(0, $0) } } }
    }

    /// Bytes the memory tier holds now.
    public var currentMemoryUsage: Int { memory.totalCost }

    /// Bytes the disk tier occupies now (see ``DiskCache/totalSize``).
    public var currentDiskUsage: Int64 { disk?.totalSize ?? 0 }

    public var statistics: Statistics { shared.state.withLock { $0.statistics } }

    // MARK: - Reading and writing

    /// Stores `data` for `key` where `policy` allows, replacing any earlier value in both tiers.
    /// - Throws: ``DiskCacheError`` when the disk tier cannot store it; the disk tier then keeps
    ///   the earlier value (see ``DiskCache/store(_:for:metadata:expires:)-9xfei``) and the memory tier
    ///   drops the key, to read it from disk again.
    public func store(_ data: Data, for key: String, metadata: [String: String] = [:], expires: Date? = nil,
                      policy: StoragePolicy = .allowed) throws {
        let record = Record(data: data, metadata: metadata, created: now(), expires: expires)
        try stripe(key).mutex.withLock { _ in try store(record, for: key, policy: policy) }
    }

    func store(_ record: Record, for key: String, policy: StoragePolicy) throws {
        let (data, metadata, expires) = (record.data, record.metadata, record.expires)
        switch policy {
        case .allowed:
            let epoch = externalEpoch()
            do {
                try disk?.store(data, for: key, metadata: metadata, expires: expires)
            } catch {
                removeFromMemory(key)
                throw error
            }
            if !putInMemory(record, for: key, unlessLarge: disk != nil) { removeFromMemory(key) }
            dropIfOthersChanged(key, since: epoch)
        case .allowedInMemoryOnly:
            try disk?.removeValue(for: key)
            putInMemory(record, for: key)
        case .notAllowed:
            removeFromMemory(key)
            try disk?.removeValue(for: key)
        }
    }

    /// The record for `key`: from memory, else from disk (then kept in memory); nil on a miss
    /// or when it has expired.
    public func record(for key: String) -> Record? {
        record(for: key, pageCacheOnly: nil)
    }

    /// ``record(for:)``, reading the disk tier's files only from the page cache when
    /// `pageCacheOnly` is given (see `DiskCache.PageCacheOnly`).
    package func record(for key: String, pageCacheOnly: DiskCache.PageCacheOnly?) -> Record? {
        dropWhatOthersChanged()
        return memoryRecord(for: key) ?? diskRecord(for: key, pageCacheOnly: pageCacheOnly)
    }

    /// ``record(for:)`` after the memory tier missed: from disk (then kept in memory), counted
    /// as a disk hit or a miss (not counted when the read gave up rather than wait for the disk).
    func diskRecord(for key: String, pageCacheOnly: DiskCache.PageCacheOnly? = nil) -> Record? {
        // Read and promote under the key's lock, so that a store or removal of the key cannot
        // fall between the disk read and the promotion.
        let fromDisk: Record? = stripe(key).mutex.withLock { _ in
            if let record = memory.value(for: key), record.expires.map({ $0 > now() }) ?? true { return record }
            let epoch = externalEpoch()
            guard let (data, entry) = disk?.dataAndEntry(for: key, pageCacheOnly: pageCacheOnly) else { return nil }
            let record = Record(data: data, metadata: entry.metadata, created: entry.created, expires: entry.expires)
            putInMemory(record, for: key, unlessLarge: true)
            dropIfOthersChanged(key, since: epoch)
            return record
        }
        if let fromDisk {
            shared.state.withLock { $0.statistics.diskHits += 1 }
            return fromDisk
        }
        if pageCacheOnly?.gaveUp != true { shared.state.withLock { $0.statistics.misses += 1 } }
        return nil
    }

    /// The record for `key` if the memory tier has it and it has not expired (counted as a
    /// memory hit); an expired one is dropped.
    func memoryRecord(for key: String) -> Record? {
        guard let record = memory.value(for: key) else { return nil }
        if let expires = record.expires, expires <= now() {
            removeFromMemory(key)
            return nil
        }
        shared.state.withLock { $0.statistics.memoryHits += 1 }
        return record
    }

    /// True when a tier holds a record for `key`: memory by its keys, disk by its index (no file
    /// is read, so a record found here may still be missing or damaged when it is read).
    public func contains(_ key: String) -> Bool {
        dropWhatOthersChanged()
        if shared.state.withLock({ $0.memoryKeys[key] != nil }) { return true }
        return disk?.contains(key) ?? false
    }

    /// ``record(for:)`` when the memory tier holds the record (nothing is read from disk); nil otherwise.
    package func recordInMemory(for key: String) -> Record? {
        dropWhatOthersChanged()
        return memoryRecord(for: key)
    }

    /// The size of `key`'s body, from memory or the disk tier's index (no file is read); nil
    /// when neither holds it.
    package func storedSize(for key: String) -> Int64? {
        dropWhatOthersChanged()
        if let record = memory.valueWithoutUse(for: key) { return Int64(record.data.count) }
        return disk?.indexedSize(for: key)
    }

    /// ``contains(_:)`` of each of `keys`, looking at each tier once.
    package func containing(_ keys: [String]) -> [Bool] {
        dropWhatOthersChanged()
        let inMemory = shared.state.withLock { state in keys.map { state.memoryKeys[$0] != nil } }
        guard let disk, inMemory.contains(false) else { return inMemory }
        let onDisk = disk.containing(keys)
        return zip(inMemory, onDisk).map { $0 || $1 }
    }

    /// The record for `key` without its body (`data` is empty): from memory, else from the disk
    /// tier's metadata file alone. Nothing is promoted into memory and no statistic counts it.
    public func recordWithoutBody(for key: String) -> Record? {
        recordWithoutBody(for: key, pageCacheOnly: nil)
    }

    /// ``recordWithoutBody(for:)``, reading the metadata file only from the page cache when
    /// `pageCacheOnly` is given.
    package func recordWithoutBody(for key: String, pageCacheOnly: DiskCache.PageCacheOnly?) -> Record? {
        dropWhatOthersChanged()
        if let record = memory.valueWithoutUse(for: key), record.expires.map({ $0 > now() }) ?? true {
            return Record(data: Data(), metadata: record.metadata, created: record.created, expires: record.expires)
        }
        guard let entry = disk?.entry(for: key, pageCacheOnly: pageCacheOnly) else { return nil }
        return Record(data: Data(), metadata: entry.metadata, created: entry.created, expires: entry.expires)
    }

    /// Replaces the metadata of `key`'s record without rewriting its body, in the tiers
    /// `policy` stores in (see ``DiskCache/updateMetadata(_:for:)-8hehy``).
    ///
    /// - Returns: false when a tier that should hold the record does not (nothing on disk for
    ///   `.allowed`, nothing in memory for `.allowedInMemoryOnly`); store the whole record then.
    @discardableResult
    public func updateMetadata(_ metadata: [String: String], for key: String, policy: StoragePolicy = .allowed) throws -> Bool {
        dropWhatOthersChanged()
        return try stripe(key).mutex.withLock { _ in try updateMetadataLocked(metadata, for: key, policy: policy) }
    }

    private func updateMetadataLocked(_ metadata: [String: String], for key: String, policy: StoragePolicy) throws -> Bool {
        var updated = false
        let epoch = externalEpoch()
        if policy == .allowed, let disk {
            updated = try disk.updateMetadata(metadata, for: key)
            if !updated { removeFromMemory(key) }
        }
        if var record = memory.value(for: key) {
            record.metadata = metadata
            record.created = now()
            putInMemory(record, for: key)
            dropIfOthersChanged(key, since: epoch)
            if policy == .allowedInMemoryOnly || disk == nil { updated = true }
        }
        return updated
    }

    /// The value for `key`, as ``record(for:)-2w7bz`` finds it.
    public func data(for key: String) -> Data? { record(for: key)?.data }

    public func removeValue(for key: String) throws {
        try stripe(key).mutex.withLock { _ in
            removeFromMemory(key)
            try disk?.removeValue(for: key)
        }
    }

    public func removeAll() throws {
        try withAllStripes {
            removeAllFromMemory()
            try disk?.removeAll()
        }
    }

    /// Removes what was stored at or after `date`, from both tiers. Both go by the millisecond:
    /// what was stored in `date`'s millisecond goes, even just before it.
    public func removeEntries(modifiedSince date: Date) throws {
        let since = Date(milliseconds: date.millisecondsAsLowerBound)
        try withAllStripes {
            let keys = shared.state.withLock { state in state.memoryKeys.filter { $0.value >= since }.map(\.key) }
            for key in keys { removeFromMemory(key) }
            try disk?.removeEntries(modifiedSince: date)
        }
    }

    /// Now, by ``clock`` (to the millisecond, as the disk tier's entries): what a record's
    /// creation and expiry are measured against.
    func now() -> Date { Date(milliseconds: clock()) }

    // MARK: - Memory tier

    /// Keeps `record` in the memory tier, unless the tier is off or (with `unlessLarge`) its body
    /// is larger than ``largeBodyThreshold``; returns whether it did.
    @discardableResult
    func putInMemory(_ record: Record, for key: String, unlessLarge: Bool = false) -> Bool {
        let kept = shared.state.withLock { state -> Bool in
            guard state.memoryCapacity > 0 else { return false }
            if unlessLarge && record.data.count > state.largeBodyThreshold ?? state.memoryCapacity / 20 { return false }
            state.memoryKeys[key] = record.created
            if let sharedHasher { state.memoryHashes[sharedHasher.hash(key)] = key }
            return true
        }
        guard kept else { return false }
        let cost = record.data.count + record.metadata.reduce(key.utf8.count) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        memory.store(record, for: key, cost: cost)
        return true
    }

    func removeFromMemory(_ key: String) {
        memory.removeValue(for: key)
        shared.state.withLock { state in
            state.memoryKeys.removeValue(forKey: key)
            if let sharedHasher { state.memoryHashes.removeValue(forKey: sharedHasher.hash(key)) }
        }
    }

    private func removeAllFromMemory() {
        memory.removeAll()
        shared.state.withLock { state in
            state.memoryKeys.removeAll()
            state.memoryHashes.removeAll()
        }
    }
}

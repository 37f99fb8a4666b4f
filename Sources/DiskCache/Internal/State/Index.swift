import MemoryCache

@inline(__always)
func roundUp(_ value: Int64, _ block: Int64) -> Int64 {
    value == 0 ? 0 : (value + block - 1) / block * block
}

/// The in-memory index: every live entry by key hash, with running totals so that `count`
/// and `totalSize` are O(1) and the sweeper knows without a scan when it has work.
///
/// Entries are kept densely (each hash beside its value, in one record, so that a lookup's
/// last cache miss brings both; in insertion order until a removal moves the last one into
/// the hole), and found through an open-addressing table of 32-bit
/// positions probed linearly from the hash's low bits, at most half full. A million entries
/// take 56 MB of entries (with their places in the eviction order) and 8 MB of table, against ~100 MB for a `Dictionary` of the same.
/// Removal shifts later probes back instead of leaving tombstones, so lookups never slow down
/// with churn.
///
/// A bucket's 32 bits hold the position in its low `log2(buckets)` bits and, in the bits a
/// position of a table that size never needs, a tag: the same number of the hash's top bits.
/// A probe that meets another hash's bucket is then told apart by the tag without reading
/// `records` (a cache miss each, which made half the time of replaying a million records);
/// only a tag match reads the full hash. The tag shrinks as the table grows (11 bits at a
/// million entries, none past 2^30), so no count is ruled out.
struct Index {
    /// An entry, its hash and its place in the eviction order (Index+Eviction.swift).
    struct Record {
        var hash: KeyHash
        var entry: IndexEntry
        var links = QueueLinks()
    }
    /// Only this file and Index+Eviction.swift touch the storage.
    var records: [Record] = []
    /// Per bucket: the tag (see above) above the position in `records` plus one; 0 marks an
    /// empty bucket.
    private var table: [UInt32]
    private var mask: Int
    private(set) var logicalSize: Int64 = 0
    private(set) var diskUsage: Int64 = 0
    let blockSize: Int64
    /// The eviction order kept (Index+Eviction.swift), fixed at open.
    let policy: EvictionPolicy
    /// The eviction order's queues (LRU uses `main` alone) and S3-FIFO's ghost.
    var small = QueueEnds()
    var main = QueueEnds()
    var ghost = _GhostQueue<KeyHash>()

    init(blockSize: Int64, expectedCount: Int = 0, policy: EvictionPolicy = .s3FIFO) {
        self.blockSize = max(1, blockSize)
        self.policy = policy
        let buckets = Self.buckets(for: expectedCount)
        table = [UInt32](repeating: 0, count: buckets)
        mask = buckets - 1
        records.reserveCapacity(expectedCount)
    }

    /// The index a whole journal's bytes (header included) describe, and what the replay found.
    static func replaying(_ bytes: [UInt8], blockSize: Int64, policy: EvictionPolicy = .s3FIFO) -> (Index, Journal.ReplaySummary) {
        replaying(bytes, blockSize: blockSize, policy: policy) { _, _, _ in }
    }

    /// ``replaying(_:blockSize:)`` that also notes in `carried` where the PUT+FILE records no
    /// checkpoint covers are (what an open after an unclean shutdown checks).
    static func replaying(_ bytes: [UInt8], blockSize: Int64, policy: EvictionPolicy = .s3FIFO,
                          carried: inout Journal.CarriedFiles) -> (Index, Journal.ReplaySummary) {
        replaying(bytes, blockSize: blockSize, policy: policy) { record, type, offset in carried.note(record, type, at: offset) }
    }

    private static func replaying(_ bytes: [UInt8], blockSize: Int64, policy: EvictionPolicy,
                                  also note: (Journal.Record, Journal.RecordType, Int) -> Void) -> (Index, Journal.ReplaySummary) {
        var index = Index(blockSize: blockSize, expectedCount: bytes.count / 80, policy: policy)
        let summary = bytes.withUnsafeBytes {
            Journal.replay($0) { record, type, offset in
                index.apply(record)
                note(record, type, offset)
            }
        }
        return (index, summary)
    }

    /// The table size that keeps `count` entries at most half full.
    private static func buckets(for count: Int) -> Int {
        var buckets = 16
        while buckets < count * 2 { buckets <<= 1 }
        return buckets
    }

    var count: Int { records.count }

    /// Every live entry, as (key: hash, value: entry) pairs.
    var entries: some Sequence<(key: KeyHash, value: IndexEntry)> {
        records.lazy.map { (key: $0.hash, value: $0.entry) }
    }

    @inline(__always)
    private func home(_ hash: KeyHash) -> Int { Int(truncatingIfNeeded: hash.low ^ (hash.high >> 17)) & mask }

    /// log2 of the bucket count: how many low bits of a bucket hold the position.
    @inline(__always)
    private var positionBits: Int { Int.bitWidth - mask.leadingZeroBitCount }  // mask is 2^n - 1

    /// `hash`'s tag, placed above the position bits (0 when a position needs all 32 bits).
    @inline(__always)
    private func tag(_ hash: KeyHash) -> UInt32 {
        let tagBits = 32 - positionBits
        guard tagBits > 0 else { return 0 }
        return UInt32(truncatingIfNeeded: hash.high >> UInt64(64 - tagBits)) << UInt32(positionBits)
    }

    /// What a bucket holds for the entry at `position` with `hash`.
    @inline(__always)
    private func bucketValue(position: Int, hash: KeyHash) -> UInt32 {
        tag(hash) | UInt32(position + 1)
    }

    /// The low bits of a bucket that hold the position; the rest hold the tag. (A table has at
    /// most 2^32 buckets, so the bucket mask is that many bits.)
    @inline(__always)
    private var positionMask: UInt32 { UInt32(truncatingIfNeeded: mask) }

    /// The position in `records` a non-empty bucket value points at.
    @inline(__always)
    private func position(_ value: UInt32) -> Int {
        Int(value & positionMask) - 1
    }

    /// The bucket holding `hash`, or the empty bucket where it would go.
    @inline(__always)
    private func bucket(of hash: KeyHash) -> (bucket: Int, found: Bool) {
        var bucket = home(hash)
        let tag = tag(hash)
        let tagMask = ~positionMask
        while true {
            let value = table[bucket]
            if value == 0 { return (bucket, false) }
            if value & tagMask == tag, records[position(value)].hash == hash { return (bucket, true) }
            bucket = (bucket + 1) & mask
        }
    }

    subscript(hash: KeyHash) -> IndexEntry? {
        let (bucket, found) = bucket(of: hash)
        return found ? records[position(table[bucket])].entry : nil
    }

    /// The entry for `hash`, read at `time`: its access time set (kept to the second) and the
    /// read noted in the eviction order, in the same lookup. `touched` says whether that changed
    /// either, so that the read must be journaled for a replay to agree.
    mutating func entry(_ hash: KeyHash, touchingAt time: Int64) -> (entry: IndexEntry, touched: Bool)? {
        let (bucket, found) = bucket(of: hash)
        guard found else { return nil }
        let seconds = IndexEntry.seconds(time), position = position(table[bucket])
        let entry = records[position].entry
        var touched = noteRead(position)
        if entry.accessedSeconds != seconds {
            records[position].entry.accessedSeconds = seconds
            touched = true
        }
        return (entry, touched)
    }

    /// Inserts or replaces; returns the entry it replaced.
    ///
    /// A new entry joins the eviction order where `placement` says (a compacted journal's PUT)
    /// or where the policy puts a new key; replacing an entry counts as reading it.
    @discardableResult
    mutating func insert(_ entry: IndexEntry, for hash: KeyHash, placement: Placement? = nil) -> IndexEntry? {
        let (bucket, found) = bucket(of: hash)
        logicalSize += entry.size
        diskUsage += entry.diskUsage(blockSize: blockSize)
        if found {
            let position = position(table[bucket])
            let old = records[position].entry
            subtract(old)
            records[position].entry = entry
            noteReplaced(position, oldUsage: old.diskUsage(blockSize: blockSize))
            noteRead(position)
            return old
        }
        records.append(Record(hash: hash, entry: entry))
        table[bucket] = bucketValue(position: records.count - 1, hash: hash)
        if records.count * 2 > table.count { rehash(buckets: table.count * 2) }
        admit(records.count - 1, placement: placement)
        return nil
    }

    /// Removes the entry for `hash`, settling its queue first (see Index+Eviction.swift); a key
    /// not present is only remembered as recently evicted (S3-FIFO's ghost), as a compacted
    /// journal's REMOVE records ask.
    @discardableResult
    mutating func remove(_ hash: KeyHash) -> IndexEntry? {
        let (bucket, found) = bucket(of: hash)
        guard found else {
            remember(hash)
            return nil
        }
        let position = position(table[bucket])
        // Settling moves records within their queues, never within `records`.
        release(position)
        let old = records[position].entry
        subtract(old)
        deleteBucket(bucket)
        // Keep the storage dense: the last entry moves into the hole.
        let last = records.count - 1
        if position != last {
            let moved = records[last]
            let (movedBucket, _) = self.bucket(of: moved.hash)
            records[position] = moved
            table[movedBucket] = bucketValue(position: position, hash: moved.hash)
            relink(from: last, to: position)
        }
        records.removeLast()
        return old
    }

    /// Empties `bucket` and moves later entries of its probe run back, so that no lookup
    /// stops early at the hole (backward-shift deletion).
    private mutating func deleteBucket(_ bucket: Int) {
        var hole = bucket
        var next = (bucket + 1) & mask
        while table[next] != 0 {
            let wanted = home(records[position(table[next])].hash)
            // Move it back if its home is not in the (cyclic) range (hole, next].
            let distanceToNext = (next - wanted) & mask
            let distanceToHole = (hole - wanted) & mask
            if distanceToHole < distanceToNext {
                table[hole] = table[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        table[hole] = 0
    }

    private mutating func rehash(buckets: Int) {
        table = [UInt32](repeating: 0, count: buckets)
        mask = buckets - 1
        for (position, record) in records.enumerated() {
            var bucket = home(record.hash)
            while table[bucket] != 0 { bucket = (bucket + 1) & mask }
            table[bucket] = bucketValue(position: position, hash: record.hash)
        }
    }

    /// Sets the entry's access time; returns whether it changed (access times are kept to the
    /// second, so most reads of a busy entry change nothing).
    @discardableResult
    mutating func touch(_ hash: KeyHash, atMilliseconds time: Int64) -> Bool {
        entry(hash, touchingAt: time)?.touched ?? false
    }

    mutating func removeAll() {
        records = []
        table = [UInt32](repeating: 0, count: 16)
        mask = 15
        logicalSize = 0
        diskUsage = 0
        small = QueueEnds()
        main = QueueEnds()
        ghost.removeAll()
    }

    /// Gives back the spare capacity that growing left (up to half of the storage), as after
    /// replaying a journal: the index then takes what its entries need.
    mutating func shrinkToFit() {
        if records.capacity > records.count + records.count / 8 + 16 {
            records = Self.exactCopy(records)
        }
        let buckets = Self.buckets(for: records.count)
        if buckets < table.count { rehash(buckets: buckets) }
    }

    /// A copy with no spare capacity (`Array(array)` would share the same storage).
    private static func exactCopy<T>(_ array: [T]) -> [T] {
        [T](unsafeUninitializedCapacity: array.count) { buffer, initialized in
            _ = array.withUnsafeBufferPointer { buffer.initialize(from: $0) }
            initialized = array.count
        }
    }

    private mutating func subtract(_ entry: IndexEntry) {
        logicalSize -= entry.size
        diskUsage -= entry.diskUsage(blockSize: blockSize)
    }

    /// The most bytes the entries may claim together (body sizes, and disk usage): 4 EiB, more
    /// than any volume holds, so only a damaged or hostile journal reaches it; and low enough
    /// that no sum of sizes (totals plus the journal, a sweep's evictions) overflows `Int64`.
    static let maximumTotal: Int64 = 1 << 62

    /// Applies one journal record during replay.
    ///
    /// A PUT that would take a total past ``maximumTotal`` describes files no volume could
    /// hold: the entry is dropped (and the one it replaced, whose files the PUT superseded), as
    /// the files of a damaged record are.
    mutating func apply(_ record: Journal.Record) {
        switch record {
        case .put(let put):
            let entry = IndexEntry(put)
            let replaced = self[put.hash]
            // Each term is at most about 2^62: no step here can overflow.
            let otherSize = logicalSize - (replaced?.size ?? 0)
            let otherUsage = diskUsage - (replaced?.diskUsage(blockSize: blockSize) ?? 0)
            guard entry.size <= Self.maximumTotal - otherSize,
                  entry.diskUsage(blockSize: blockSize) <= Self.maximumTotal - otherUsage else {
                if replaced != nil { remove(put.hash) }
                return
            }
            insert(entry, for: put.hash, placement: put.placement)
        case .remove(let hash): remove(hash)
        case .access(let items): for (hash, time) in items { touch(hash, atMilliseconds: time) }
        case .clear: removeAll()
        case .close, .checkpoint: break
        }
    }
}

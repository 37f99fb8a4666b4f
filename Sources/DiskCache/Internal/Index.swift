/// What the index keeps for each entry: 32 bytes, so that a million entries fit in
/// well under 150 bytes an entry even right after the dictionary grows.
///
/// Everything a read needs before it touches a file (is there an entry, has it surely
/// expired, which checksum the journal vouches for) and everything the sweeper needs
/// (sizes, last access, expiry) is here; the rest lives in the `.meta` file, which every
/// read opens anyway to compare the key.
struct IndexEntry: Equatable, Sendable {
    /// Body size in the low 62 bits; the top bit says the body is inline in the `.meta` file,
    /// the next one that the files are in slot 1.
    private var sizeAndFlags: UInt64
    /// Creation time (ms since 1970) in the high 44 bits, the `.meta` file's size in the low 20.
    private var createdAndMetaSize: UInt64
    /// XXH3-64 of the body, as the journal vouches for it. A read accepts a `.meta` file only
    /// if its checksum is this one, so files the journal did not commit (a write interrupted
    /// between rename and journal append) are never served.
    var checksum: UInt64
    /// Last access, seconds since 1970 (LRU order needs no finer grain).
    var accessedSeconds: UInt32
    /// Expiry rounded up to the second, seconds since 1970; 0 = never. Reads check the exact
    /// expiry from the `.meta` file; the sweeper uses this one.
    var expiresSeconds: UInt32

    private static let inlineBit: UInt64 = 1 << 63
    private static let slotBit: UInt64 = 1 << 62
    /// The largest `.meta` file an entry may have (the low 20 bits of `createdAndMetaSize`).
    static let maximumMetaSize = (1 << 20) - 1

    init(size: Int64, isInline: Bool, slot: UInt8, created: Int64, checksum: UInt64, accessed: Int64, expires: Int64?, metaSize: UInt32) {
        precondition(Int(metaSize) <= Self.maximumMetaSize && size >= 0 && size < 1 << 62)
        self.sizeAndFlags = UInt64(size) | (isInline ? Self.inlineBit : 0) | (slot == 1 ? Self.slotBit : 0)
        let createdBits = UInt64(clamping: max(0, created)) & ((1 << 44) - 1)
        self.createdAndMetaSize = createdBits << 20 | UInt64(metaSize)
        self.checksum = checksum
        self.accessedSeconds = Self.seconds(accessed)
        self.expiresSeconds = expires.map { max(1, Self.secondsRoundedUp($0)) } ?? 0
    }

    init(_ put: Journal.Put) {
        self.init(size: put.size, isInline: put.isInline, slot: put.slot, created: put.created, checksum: put.checksum,
                  accessed: put.accessed, expires: put.expires, metaSize: put.metaSize)
    }

    var size: Int64 { Int64(sizeAndFlags & ~(Self.inlineBit | Self.slotBit)) }
    var isInline: Bool { sizeAndFlags & Self.inlineBit != 0 }
    var slot: UInt8 { sizeAndFlags & Self.slotBit != 0 ? 1 : 0 }
    /// When the value was stored, ms since 1970.
    var created: Int64 { Int64(createdAndMetaSize >> 20) }
    var metaSize: UInt32 { UInt32(createdAndMetaSize & UInt64(Self.maximumMetaSize)) }
    var accessedMilliseconds: Int64 { Int64(accessedSeconds) * 1000 }

    /// True when the entry has certainly expired at `nowMilliseconds`.
    func hasExpired(atMilliseconds now: Int64) -> Bool {
        expiresSeconds != 0 && Int64(expiresSeconds) * 1000 <= now
    }

    /// Bytes the entry occupies on disk, at the filesystem's block granularity.
    func diskUsage(blockSize: Int64) -> Int64 {
        let meta = roundUp(Int64(metaSize), blockSize)
        return isInline ? meta : meta + roundUp(size, blockSize)
    }

    static func seconds(_ milliseconds: Int64) -> UInt32 {
        UInt32(clamping: max(0, milliseconds / 1000))
    }

    static func secondsRoundedUp(_ milliseconds: Int64) -> UInt32 {
        UInt32(clamping: max(0, milliseconds / 1000 + (milliseconds % 1000 > 0 ? 1 : 0)))
    }
}

@inline(__always)
func roundUp(_ value: Int64, _ block: Int64) -> Int64 {
    value == 0 ? 0 : (value + block - 1) / block * block
}

/// The in-memory index: every live entry by key hash, with running totals so that
/// `count` and `totalSize` are O(1) and the sweeper knows without a scan when it has work.
struct Index {
    private(set) var entries: [KeyHash: IndexEntry] = [:]
    private(set) var logicalSize: Int64 = 0
    private(set) var diskUsage: Int64 = 0
    let blockSize: Int64

    init(blockSize: Int64, expectedCount: Int = 0) {
        self.blockSize = max(1, blockSize)
        entries.reserveCapacity(expectedCount)
    }

    var count: Int { entries.count }

    subscript(hash: KeyHash) -> IndexEntry? { entries[hash] }

    /// Inserts or replaces; returns the entry it replaced.
    @discardableResult
    mutating func insert(_ entry: IndexEntry, for hash: KeyHash) -> IndexEntry? {
        let old = entries.updateValue(entry, forKey: hash)
        if let old { subtract(old) }
        logicalSize += entry.size
        diskUsage += entry.diskUsage(blockSize: blockSize)
        return old
    }

    @discardableResult
    mutating func remove(_ hash: KeyHash) -> IndexEntry? {
        guard let old = entries.removeValue(forKey: hash) else { return nil }
        subtract(old)
        return old
    }

    mutating func touch(_ hash: KeyHash, atMilliseconds time: Int64) {
        entries[hash]?.accessedSeconds = IndexEntry.seconds(time)
    }

    mutating func removeAll() {
        entries.removeAll()
        logicalSize = 0
        diskUsage = 0
    }

    private mutating func subtract(_ entry: IndexEntry) {
        logicalSize -= entry.size
        diskUsage -= entry.diskUsage(blockSize: blockSize)
    }

    /// Applies one journal record during replay.
    mutating func apply(_ record: Journal.Record) {
        switch record {
        case .put(let put): insert(IndexEntry(put), for: put.hash)
        case .remove(let hash): remove(hash)
        case .access(let items): for (hash, time) in items { touch(hash, atMilliseconds: time) }
        case .clear: removeAll()
        case .close: break
        }
    }
}

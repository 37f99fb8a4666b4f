/// What the index keeps for each entry: 32 bytes (56 with its hash and its place in the
/// eviction order in the index's dense storage, 64 with its share of the hash table), so that a
/// million entries take about 64 MB.
///
/// Everything a read needs before it touches a file (is there an entry, has it surely
/// expired, which checksum the journal vouches for) and everything the sweeper needs
/// (sizes, last access, expiry) is here; the rest lives in the `.meta` file, which every
/// read opens anyway to compare the key.
struct IndexEntry: Equatable, Sendable {
    /// Body size in the low 62 bits; the top bit says the body is inline in the `.meta` file,
    /// the next one that the files are in slot 1.
    private var sizeAndFlags: UInt64
    /// Creation time (ms since 1970, good until 2109) in the high 42 bits, the `.meta` file's
    /// size in the low 22.
    private var createdAndMetaSize: UInt64
    /// XXH3-64 of the body, as the journal vouches for it. A read accepts a `.meta` file only
    /// if its checksum is this one, so files the journal did not commit (a write interrupted
    /// between rename and journal append) are never served.
    var checksum: UInt64
    /// Last access, seconds since 1970 (what `entry(for:)` reports; the eviction order is kept
    /// apart, see Index+Eviction.swift).
    var accessedSeconds: UInt32
    /// Expiry rounded up to the second, seconds since 1970; 0 = never. Reads check the exact
    /// expiry from the `.meta` file; the sweeper uses this one.
    var expiresSeconds: UInt32

    private static let inlineBit: UInt64 = 1 << 63
    private static let slotBit: UInt64 = 1 << 62
    /// The largest `.meta` file an entry may have (the low 22 bits of `createdAndMetaSize`).
    static let maximumMetaSize = (1 << metaSizeBits) - 1
    /// The largest body size an entry can record (the low 62 bits of its size field).
    static let maximumBodySize: Int64 = (1 << 62) - 1
    private static let metaSizeBits: UInt64 = 22

    init(size: Int64, isInline: Bool, slot: UInt8, created: Int64, checksum: UInt64, accessed: Int64, expires: Int64?, metaSize: UInt32) {
        // Unreachable from bytes on disk or another instance: every entry comes from a record
        // `Journal.decodeRecord` accepted (it refuses these sizes as damage), a file
        // `Opener.checkedEntry` accepted (same bounds), or a write that checked its sizes first
        // (`EntryMetadata.checkFits`, `commitBodyFile`).
        precondition(Int(metaSize) <= Self.maximumMetaSize && size >= 0 && size < 1 << 62)
        self.sizeAndFlags = UInt64(size) | (isInline ? Self.inlineBit : 0) | (slot == 1 ? Self.slotBit : 0)
        let createdBits = min(UInt64(clamping: max(0, created)), (1 << (64 - Self.metaSizeBits)) - 1)
        self.createdAndMetaSize = createdBits << Self.metaSizeBits | UInt64(metaSize)
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

    /// Whether this entry vouches for an entry file of its key in `slot` of `kind`: it uses the
    /// slot, and a body file only when its body is not inline.
    func vouches(forSlot slot: UInt8, kind: ShardScanner.FileKind) -> Bool {
        self.slot == slot && (kind == .meta || !isInline)
    }
    var slot: UInt8 { sizeAndFlags & Self.slotBit != 0 ? 1 : 0 }
    /// When the value was stored, ms since 1970.
    var created: Int64 { Int64(createdAndMetaSize >> Self.metaSizeBits) }
    var metaSize: UInt32 { UInt32(createdAndMetaSize & UInt64(Self.maximumMetaSize)) }
    var accessedMilliseconds: Int64 { Int64(accessedSeconds) * 1000 }

    /// True when `other` records the same commit as this entry (size, slot, placement, creation,
    /// checksum, expiry): the access time, which every read moves, is left out. Two commits of the
    /// same value into the same slot in the same millisecond compare equal, which is why a read
    /// that finds damage confirms it under the key's lock before removing anything
    /// (``DiskCache/removeIfUnchanged(_:_:key:)``).
    func isSameCommit(as other: IndexEntry) -> Bool {
        sizeAndFlags == other.sizeAndFlags && createdAndMetaSize == other.createdAndMetaSize
            && checksum == other.checksum && expiresSeconds == other.expiresSeconds
    }

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

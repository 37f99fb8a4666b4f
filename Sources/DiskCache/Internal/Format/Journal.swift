/// The journal: an append-only file of checksummed binary records, the source of truth
/// for the index. A write's journal record is its commit point.
///
/// ```
/// header (16 bytes)
///   "DCJOURNL"            magic, 8 bytes
///   version   u32 LE      journalVersion (2; version 1 has no PUT+FILE or CHECKPOINT records)
///   check     u32 LE      low 32 bits of XXH3-64 over the 12 bytes before it
/// record (13 + length bytes), repeated
///   length    u32 LE      payload length
///   type      u8          PUT 0x01, REMOVE 0x02, ACCESS 0x03, CLEAR 0x04, CLOSE 0x05,
///                         PUT+FILE 0x06, CHECKPOINT 0x07
///   payload   length bytes
///   checksum  u64 LE      XXH3-64 over length, type and payload
/// PUT payload (61 bytes)
///   hash      16 bytes    XXH3-128 of the key: high u64 LE, then low u64 LE
///   size      u64 LE      body bytes
///   metaSize  u32 LE      bytes of the .meta file
///   flags     u8          bit 0: body inline in .meta; bit 1: has expiry; bit 2: files in slot 1;
///                         bit 3: bits 4-6 place the entry in the eviction order (a compacted
///                         journal's PUTs): bit 4 main queue (else small), bits 5-6 frequency
///   checksum  u64 LE      XXH3-64 of the body
///   created   i64 LE      ms since 1970
///   accessed  i64 LE      ms since 1970
///   expires   i64 LE      ms since 1970 (0 when flag bit 1 is clear)
/// PUT+FILE payload (61 + metaSize bytes): a PUT payload, then the whole `.meta` file it commits
///   (`.immediate` puts of an inline body: the record is made durable, the file is not; see
///   `DiskCache.PlacedFiles`). After an unclean shutdown the open rewrites the file from here
///   when it does not match (`Opener.restoreCarriedFiles`).
/// CHECKPOINT payload: back u64 LE. Every PUT+FILE record that starts before the offset `back`
///   bytes before this record has its files durable (a `syncfs` finished after they were
///   written), so recovery need not look at them. Relative, so that a compaction copying the
///   records after its snapshot into a new file (at other offsets) keeps it true.
/// REMOVE payload: hash (16 bytes). Of a hash no entry has, in a compacted journal: a key
///   S3-FIFO's ghost remembers (see `Index+Eviction.swift`).
/// ACCESS records and REMOVE records also move the eviction order (see `Index+Eviction.swift`).
/// ACCESS payload: n × (hash 16 bytes, accessed i64 LE ms)
/// CLEAR, CLOSE: empty. CLOSE marks a clean shutdown; a journal that does not end in
/// CLOSE was not closed cleanly, and the next open looks for files it does not vouch for.
/// ```
///
/// A sample, a cache holding "greeting" then closed:
/// ```
/// 00000000  44 43 4a 4f 55 52 4e 4c  02 00 00 00 d0 e6 5c a2  |DCJOURNL......\.|
/// 00000010  3d 00 00 00 01 <61 payload bytes> <8 checksum bytes>
/// 0000005a  00 00 00 00 05 <8 checksum bytes>
/// ```
enum Journal {
    /// A point in the journal: the end of the records appended so far to the file of one
    /// generation (each compaction writes a new file, the next generation). A write's record is
    /// durable once the journal is synced through the position its append returned.
    struct Position: Sendable, Equatable {
        var generation: Int
        var end: Int64

        /// Whether a journal synced through `self` holds the record ending at `position`: the
        /// same file synced at least that far, or a later file (a compaction writes and syncs the
        /// new file whole, every record appended before it included).
        func covers(_ position: Position) -> Bool {
            generation > position.generation || (generation == position.generation && end >= position.end)
        }
    }

    static let journalFileName = "journal"
    static let journalTempFileName = "journal.tmp"
    /// Where a journal whose header cannot be read is moved before the recovery scan, for inspection.
    static let journalCorruptFileName = "journal.corrupt"
    static let magic: [UInt8] = Array("DCJOURNL".utf8)
    static let journalVersion: UInt32 = 2
    static let headerSize = 16
    /// length + type before the payload, checksum after it.
    static let recordOverhead = 13
    /// Anything longer is corruption, not a record.
    /// (The longest record written is an ACCESS batch of at most ~8,192 items, 196,608 bytes.)
    static let maximumPayload = 1 << 20

    enum RecordType: UInt8 {
        case put = 0x01
        case remove = 0x02
        case access = 0x03
        case clear = 0x04
        case close = 0x05
        case putWithFile = 0x06
        case checkpoint = 0x07
    }

    /// The largest `.meta` file a PUT+FILE record carries; a larger inline entry is committed
    /// with its files synced instead (see `DiskCache.PlacedFiles`).
    static let maximumCarriedFile = 256 << 10

    static let putPayloadSize = 61
    static let putRecordSize = recordOverhead + putPayloadSize
    static let accessItemSize = 24
    static let flagInline: UInt8 = 1
    static let flagExpires: UInt8 = 2
    static let flagSlot1: UInt8 = 4
    static let flagPlaced: UInt8 = 8
    static let flagMainQueue: UInt8 = 16
    static let frequencyShift: UInt8 = 5

    struct Put: Equatable {
        var hash: KeyHash
        var size: Int64
        var metaSize: UInt32
        var isInline: Bool
        /// Which pair of files holds the entry (see `Layout`).
        var slot: UInt8
        var checksum: UInt64
        var created: Int64
        var accessed: Int64
        var expires: Int64?
        /// Where the entry goes in the eviction order: given by a compacted journal, nil
        /// (the policy decides) for a store's PUT.
        var placement: Index.Placement? = nil
    }

    enum Record: Equatable {
        case put(Put)
        case remove(KeyHash)
        case access([(KeyHash, Int64)])
        case clear
        case close
        /// Files of PUT+FILE records that start more than this many bytes before this record
        /// are durable. (A PUT+FILE record reads as `.put`; its file bytes are found with
        /// ``carriedFile(_:at:)``.)
        case checkpoint(back: Int64)

        static func == (a: Record, b: Record) -> Bool {
            switch (a, b) {
            case let (.put(x), .put(y)): return x == y
            case let (.checkpoint(x), .checkpoint(y)): return x == y
            case let (.remove(x), .remove(y)): return x == y
            case let (.access(x), .access(y)): return x.count == y.count && zip(x, y).allSatisfy { $0 == $1 }
            case (.clear, .clear), (.close, .close): return true
            default: return false
            }
        }
    }

    // MARK: - Encoding

    static func header() -> [UInt8] {
        var out = magic
        appendLE(UInt64(journalVersion), size: 4, to: &out)
        let check = out.withUnsafeBytes { Checksum.xxh3($0) }
        appendLE(check, size: 4, to: &out)
        return out
    }

    static func encode(_ record: Record, into out: inout [UInt8]) {
        let start = out.count
        out.append(contentsOf: [0, 0, 0, 0])
        switch record {
        case .put(let put):
            out.append(RecordType.put.rawValue)
            appendHash(put.hash, to: &out)
            appendLE(UInt64(bitPattern: put.size), size: 8, to: &out)
            appendLE(UInt64(put.metaSize), size: 4, to: &out)
            var flags = (put.isInline ? flagInline : 0) | (put.expires != nil ? flagExpires : 0) | (put.slot == 1 ? flagSlot1 : 0)
            if let placement = put.placement {
                flags |= flagPlaced | (placement.queue == .main ? flagMainQueue : 0)
                    | min(placement.frequency, Index.maximumFrequency) << frequencyShift
            }
            out.append(flags)
            appendLE(put.checksum, size: 8, to: &out)
            appendLE(UInt64(bitPattern: put.created), size: 8, to: &out)
            appendLE(UInt64(bitPattern: put.accessed), size: 8, to: &out)
            appendLE(UInt64(bitPattern: put.expires ?? 0), size: 8, to: &out)
        case .remove(let hash):
            out.append(RecordType.remove.rawValue)
            appendHash(hash, to: &out)
        case .access(let items):
            out.append(RecordType.access.rawValue)
            for (hash, time) in items {
                appendHash(hash, to: &out)
                appendLE(UInt64(bitPattern: time), size: 8, to: &out)
            }
        case .clear:
            out.append(RecordType.clear.rawValue)
        case .close:
            out.append(RecordType.close.rawValue)
        case .checkpoint(let back):
            out.append(RecordType.checkpoint.rawValue)
            appendLE(UInt64(bitPattern: back), size: 8, to: &out)
        }
        finish(from: start, into: &out)
    }

    /// A PUT+FILE record: `put` and the `.meta` file's bytes, given in pieces (`put.metaSize`
    /// bytes in all).
    static func encodePut(_ put: Put, carrying file: [UnsafeRawBufferPointer]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(putRecordSize + Int(put.metaSize))
        encode(.put(put), into: &out)
        out.removeLast(8)
        out[4] = RecordType.putWithFile.rawValue
        for piece in file { out.append(contentsOf: piece) }
        finish(from: 0, into: &out)
        return out
    }

    /// Writes the payload length of the record that starts at `start`, and appends its checksum.
    private static func finish(from start: Int, into out: inout [UInt8]) {
        let length = UInt32(out.count - start - 5)
        out.withUnsafeMutableBytes { buffer in
            buffer.storeBytes(of: length.littleEndian, toByteOffset: start, as: UInt32.self)
        }
        let checksum = out.withUnsafeBytes { Checksum.xxh3(UnsafeRawBufferPointer(rebasing: $0[start...])) }
        appendLE(checksum, size: 8, to: &out)
    }

    static func encode(_ record: Record) -> [UInt8] {
        var out: [UInt8] = []
        if case .put = record { out.reserveCapacity(putRecordSize) }
        encode(record, into: &out)
        return out
    }

    @inline(__always)
    private static func appendLE(_ value: UInt64, size: Int, to out: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { out.append(contentsOf: $0.prefix(size)) }
    }

    @inline(__always)
    private static func appendHash(_ hash: KeyHash, to out: inout [UInt8]) {
        appendLE(hash.high, size: 8, to: &out)
        appendLE(hash.low, size: 8, to: &out)
    }

    // MARK: - Decoding

    enum HeaderStatus: Equatable {
        case valid
        /// A journal written by a newer version of this library.
        case newerVersion(UInt32)
        /// Not a journal, or a header too damaged to read.
        case unreadable
    }

    /// The version a journal's header names (call after ``checkHeader(_:)`` found it valid).
    static func version(of bytes: UnsafeRawBufferPointer) -> UInt32 {
        bytes.loadUnaligned(fromByteOffset: 8, as: UInt32.self).littleEndian
    }

    static func checkHeader(_ bytes: UnsafeRawBufferPointer) -> HeaderStatus {
        guard bytes.count >= headerSize, Array(bytes[0..<8]) == magic else { return .unreadable }
        let check = Checksum.xxh3(UnsafeRawBufferPointer(rebasing: bytes[0..<12]))
        guard UInt32(truncatingIfNeeded: check) == bytes.loadUnaligned(fromByteOffset: 12, as: UInt32.self).littleEndian
        else { return .unreadable }
        let version = bytes.loadUnaligned(fromByteOffset: 8, as: UInt32.self).littleEndian
        if version > journalVersion { return .newerVersion(version) }
        return .valid
    }

    /// What a replay found besides the records.
    struct ReplaySummary: Equatable {
        /// Offset just past the last good record: where the file is cut and appends resume.
        var validLength: Int = headerSize
        /// Records read and applied.
        var records = 0
        /// Byte ranges skipped in the middle because they held no valid record.
        var corruptRegions = 0
        var corruptBytes = 0
        /// Bytes after the last good record (a torn or corrupt tail), cut at open.
        var truncatedBytes = 0
        /// Zero bytes at the end of the file after the last good record and any torn tail: space
        /// an open cache wrote ahead for its appends (`CacheState.writeAhead(for:)`), not damage.
        /// Cut at open with the tail.
        var writtenAhead = 0
        /// The last record was CLOSE.
        var endedCleanly = false
        /// Where the last valid record starts.
        var lastRecordStart = headerSize
        /// PUT+FILE records read. (Where they are, for a recovery, is ``CarriedFiles``'s to
        /// note: only an unclean open needs it.)
        var carriedFiles = 0
    }

    /// The PUT+FILE records of a replay that no CHECKPOINT covers: where each key's last one
    /// starts. Whether that record still commits the key's entry is the index's to say. Noted
    /// by the replay at open (``Index/replaying(_:blockSize:carried:)``), not by every replay:
    /// a follower reading other processes' records needs no more than their count.
    struct CarriedFiles {
        /// Records that start before this offset have durable files (the furthest a CHECKPOINT
        /// covers).
        var covered = 0
        /// Where each key's last PUT+FILE record at or after `covered` starts.
        private var lastOffsets: [KeyHash: Int] = [:]

        mutating func note(_ record: Record, _ type: RecordType, at offset: Int) {
            switch record {
            case .put(let put) where type == .putWithFile:
                lastOffsets[put.hash] = offset
            case .checkpoint(let back):
                covered = max(covered, offset - Int(back))
                // Dropped as they are covered, so that this holds at most a checkpoint's worth.
                lastOffsets = lastOffsets.filter { $0.value >= covered }
            default:
                break
            }
        }

        /// The records' offsets, in journal order. (Every record noted after a checkpoint starts
        /// past what it covers, and those before it were dropped by it.)
        var uncovered: [Int] { lastOffsets.values.sorted() }
    }

    /// Reads every valid record after the header, calling `apply` for each.
    ///
    /// A record whose length, type or checksum is wrong is not trusted. The reader then looks
    /// for the next offset where a valid record starts (a corrupt record in the middle loses
    /// only the bytes it spans); if none follows, everything from the bad record on is a
    /// torn tail. Zeros at the very end are space written ahead (``ReplaySummary/writtenAhead``),
    /// neither a torn tail nor a place a record could start (a record's type byte is never 0).
    ///
    /// `start` is where the first record is: after the header for a whole journal, 0 for the
    /// records a follower reads from the middle of one.
    static func replay(_ bytes: UnsafeRawBufferPointer, from start: Int = headerSize, apply: (Record) -> Void) -> ReplaySummary {
        replay(bytes, from: start) { record, _, _ in apply(record) }
    }

    /// ``replay(_:from:apply:)`` that also hands `apply` each record's type and offset.
    static func replay(_ bytes: UnsafeRawBufferPointer, from start: Int = headerSize,
                       applyAt apply: (Record, RecordType, Int) -> Void) -> ReplaySummary {
        var summary = ReplaySummary(validLength: start, lastRecordStart: start)
        var offset = start
        var lastType: RecordType?
        // Where the zeros written ahead begin (a record may itself end in zeros: this can fall
        // inside the last one).
        var nonZeroEnd = bytes.count
        while nonZeroEnd > start && bytes[nonZeroEnd - 1] == 0 { nonZeroEnd -= 1 }
        while offset < bytes.count {
            if let (record, type, length) = decodeRecord(bytes, at: offset) {
                apply(record, type, offset)
                summary.records += 1
                if type == .putWithFile { summary.carriedFiles += 1 }
                summary.lastRecordStart = offset
                lastType = type
                offset += length
                summary.validLength = offset
                continue
            }
            guard offset < nonZeroEnd else {
                summary.writtenAhead = bytes.count - offset
                break
            }
            // Resynchronise: the next offset at which a whole valid record parses (its type
            // byte, 4 bytes in, before the zeros).
            var probe = offset + 1
            var found: Int?
            while probe + 4 < nonZeroEnd {
                if decodeRecord(bytes, at: probe) != nil { found = probe; break }
                probe += 1
            }
            guard let next = found else {
                summary.truncatedBytes = nonZeroEnd - offset
                summary.writtenAhead = bytes.count - nonZeroEnd
                break
            }
            summary.corruptRegions += 1
            summary.corruptBytes += next - offset
            offset = next
        }
        summary.endedCleanly = lastType == .close && summary.truncatedBytes == 0
        return summary
    }

    /// Decodes one record at `offset`: (record, type, total length) or nil if none is there.
    static func decodeRecord(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> (Record, RecordType, Int)? {
        guard offset + recordOverhead <= bytes.count else { return nil }
        let length = Int(bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self).littleEndian)
        guard length <= maximumPayload, offset + recordOverhead + length <= bytes.count,
              let type = RecordType(rawValue: bytes[offset + 4]) else { return nil }
        let payload = offset + 5
        switch type {
        case .put: guard length == putPayloadSize else { return nil }
        case .putWithFile:
            guard length > putPayloadSize, length - putPayloadSize <= maximumCarriedFile,
                  Int(bytes.loadUnaligned(fromByteOffset: payload + 24, as: UInt32.self).littleEndian) == length - putPayloadSize
            else { return nil }
        case .checkpoint: guard length == 8 else { return nil }
        case .remove: guard length == 16 else { return nil }
        case .access: guard length % accessItemSize == 0, length > 0 else { return nil }
        case .clear, .close: guard length == 0 else { return nil }
        }
        let stored = bytes.loadUnaligned(fromByteOffset: payload + length, as: UInt64.self).littleEndian
        let computed = Checksum.xxh3(UnsafeRawBufferPointer(rebasing: bytes[offset..<payload + length]))
        guard stored == computed else { return nil }

        func u64(_ at: Int) -> UInt64 { bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self).littleEndian }
        func hash(_ at: Int) -> KeyHash { KeyHash(high: u64(at), low: u64(at + 8)) }

        let record: Record
        switch type {
        case .put, .putWithFile:
            let flags = bytes[payload + 28]
            let size = Int64(bitPattern: u64(payload + 16))
            let metaSize = bytes.loadUnaligned(fromByteOffset: payload + 24, as: UInt32.self).littleEndian
            guard size >= 0, size < 1 << 62, Int(metaSize) <= IndexEntry.maximumMetaSize else { return nil }
            record = .put(Put(
                hash: hash(payload),
                size: size,
                metaSize: metaSize,
                isInline: flags & flagInline != 0,
                slot: flags & flagSlot1 != 0 ? 1 : 0,
                checksum: u64(payload + 29),
                created: Int64(bitPattern: u64(payload + 37)),
                accessed: Int64(bitPattern: u64(payload + 45)),
                expires: flags & flagExpires != 0 ? Int64(bitPattern: u64(payload + 53)) : nil,
                placement: flags & flagPlaced == 0 ? nil
                    : Index.Placement(queue: flags & flagMainQueue != 0 ? .main : .small, frequency: (flags >> frequencyShift) & 3)))
        case .remove:
            record = .remove(hash(payload))
        case .access:
            var items: [(KeyHash, Int64)] = []
            items.reserveCapacity(length / accessItemSize)
            var at = payload
            while at < payload + length {
                items.append((hash(at), Int64(bitPattern: u64(at + 16))))
                at += accessItemSize
            }
            record = .access(items)
        case .clear:
            record = .clear
        case .close:
            record = .close
        case .checkpoint:
            let back = Int64(bitPattern: u64(payload))
            guard back >= 0 else { return nil }
            record = .checkpoint(back: back)
        }
        return (record, type, recordOverhead + length)
    }

    /// Where the `.meta` file's bytes are in the PUT+FILE record that starts at `offset`.
    static func carriedFile(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Range<Int> {
        let length = Int(bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self).littleEndian)
        return (offset + 5 + putPayloadSize)..<(offset + 5 + length)
    }
}

// Fuzzes the journal replay (`Journal.replay`, the record decoder) and the index it feeds
// (`Index.apply`), as the open of a cache runs them on whatever the journal file holds.
//
// Each input is replayed twice: as it is, and "sealed", with the checksum of every record along
// its chain of lengths recomputed. Random bytes almost never carry a valid XXH3-64, so the
// first run exercises the checksum and resynchronisation paths and the second the decoding of
// fields and the index behind it.
//
// Invariants:
// - replay accepts exactly the records an independent reading of docs/on-disk-format.md
//   accepts (plausible length, known type, the size the type requires, a matching XXH3-64,
//   a PUT's size below 2^62 and `.meta` size below 2^22), at the same offsets, resynchronising
//   at the same places; so every record accepted has a valid checksum;
// - its summary (records, valid length, skipped regions and bytes, torn tail, clean end)
//   adds up with those offsets;
// - every record accepted encodes back to the bytes it was read from (PUT flags other than
//   the three defined bits and an expiry without its flag are dropped);
// - the index holds exactly what a dictionary fed the same records holds (a PUT that would
//   take the totals past 2^62 bytes drops its entry), its totals are the sums over its
//   entries, and removing every entry leaves it empty with zero totals.
@testable import DiskCache
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJournal(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    check(input)
    check(sealed(input))
    return 0
}

private func check(_ bytes: [UInt8]) {
    bytes.withUnsafeBytes { buffer in
        let header = Journal.checkHeader(buffer)
        if bytes.count < Journal.headerSize { require(header == .unreadable, "a short journal has no header") }

        var records: [Journal.Record] = []
        let summary = Journal.replay(buffer) { records.append($0) }
        let expected = ReferenceReader(bytes).replay()

        require(records.count == expected.records.count,
                "replay accepted \(records.count) records, the format allows \(expected.records.count)")
        for (record, (offset, reference)) in zip(records, expected.records) {
            require(record == reference, "record at \(offset): replay read \(record), the format says \(reference)")
            checkEncoding(record, at: offset, in: bytes)
        }
        require(summary.records == records.count, "summary counts \(summary.records) records, \(records.count) applied")
        require(summary.validLength == expected.validLength, "valid length \(summary.validLength), expected \(expected.validLength)")
        require(summary.lastRecordStart == expected.lastRecordStart,
                "last record at \(summary.lastRecordStart), expected \(expected.lastRecordStart)")
        require(summary.corruptRegions == expected.corruptRegions && summary.corruptBytes == expected.corruptBytes,
                "skipped \(summary.corruptRegions) regions of \(summary.corruptBytes) bytes, expected \(expected.corruptRegions) of \(expected.corruptBytes)")
        require(summary.truncatedBytes == expected.truncatedBytes,
                "torn tail of \(summary.truncatedBytes) bytes, expected \(expected.truncatedBytes)")
        require(summary.endedCleanly == expected.endedCleanly, "clean end \(summary.endedCleanly), expected \(expected.endedCleanly)")
        if bytes.count >= Journal.headerSize {
            require(summary.validLength + summary.truncatedBytes == bytes.count, "valid length and torn tail do not cover the file")
        }

        checkIndex(after: records)
    }
}

/// The bytes `encode` writes for `record` are the ones it was read from, but for what a PUT
/// does not keep: flag bits above the three defined ones, and the expiry without its flag.
private func checkEncoding(_ record: Journal.Record, at offset: Int, in bytes: [UInt8]) {
    var encoded = Journal.encode(record)
    var original = Array(bytes[offset..<offset + encoded.count])
    if case .put(let put) = record {
        let flags = 5 + 28
        original[flags] &= Journal.flagInline | Journal.flagExpires | Journal.flagSlot1
        if put.expires == nil {
            for i in 5 + 53..<5 + 61 { original[i] = 0 }
        }
        // The checksum covers the flags and the expiry, so only the payload is compared.
        encoded.removeLast(8)
        original.removeLast(8)
    }
    require(encoded == original, "record at \(offset) encodes to other bytes")
}

private func checkIndex(after records: [Journal.Record]) {
    var index = Index(blockSize: 4096)
    var model: [KeyHash: Journal.Put] = [:]
    // The model's totals, wide enough never to overflow, for the rule that no PUT may take them
    // past Index.maximumTotal (such a PUT drops the entry).
    func totals(_ entries: some Sequence<Journal.Put>) -> (size: Int128, usage: Int128) {
        entries.reduce((0, 0)) { sum, put in
            (sum.0 + Int128(put.size), sum.1 + Int128(IndexEntry(put).diskUsage(blockSize: index.blockSize)))
        }
    }
    for record in records {
        index.apply(record)
        switch record {
        case .put(let put):
            model[put.hash] = put
            let (size, usage) = totals(model.values)
            if size > Int128(Index.maximumTotal) || usage > Int128(Index.maximumTotal) { model[put.hash] = nil }
        case .remove(let hash): model[hash] = nil
        case .clear: model.removeAll()
        case .access, .close: break
        }
    }
    index.shrinkToFit()
    require(index.count == model.count, "the index has \(index.count) entries, the records leave \(model.count)")
    for (hash, put) in model {
        guard let entry = index[hash] else {
            require(false, "\(hash) is missing from the index")
            return
        }
        require(entry.size == put.size && entry.isInline == put.isInline && entry.slot == put.slot
                && entry.checksum == put.checksum && entry.metaSize == put.metaSize,
                "\(hash): the index holds \(entry), the last PUT says \(put)")
    }
    checkTotals(index)

    for hash in model.keys {
        require(index.remove(hash) != nil, "\(hash) could not be removed")
        require(index[hash] == nil, "\(hash) is still found after its removal")
    }
    require(index.count == 0 && index.logicalSize == 0 && index.diskUsage == 0,
            "an emptied index has \(index.count) entries, size \(index.logicalSize), disk usage \(index.diskUsage)")
}

/// The running totals are the sums over the entries.
private func checkTotals(_ index: Index) {
    var size: Int128 = 0
    var disk: Int128 = 0
    for (_, entry) in index.entries {
        size += Int128(entry.size)
        disk += Int128(entry.diskUsage(blockSize: index.blockSize))
    }
    require(Int128(index.logicalSize) == size, "logical size \(index.logicalSize), the entries sum to \(size)")
    require(Int128(index.diskUsage) == disk, "disk usage \(index.diskUsage), the entries sum to \(disk)")
}

/// `bytes` with the header's check and the checksum of each record along the chain of
/// lengths (from the header on, while a length fits) recomputed.
private func sealed(_ input: [UInt8]) -> [UInt8] {
    var bytes = input
    if bytes.count >= 16 {
        let check = bytes.withUnsafeBytes { Checksum.xxh3(UnsafeRawBufferPointer(rebasing: $0[0..<12])) }
        store(check, size: 4, at: 12, in: &bytes)
    }
    var offset = 16
    while offset + 13 <= bytes.count {
        let length = Int(load(bytes, at: offset, size: 4))
        guard length <= 1 << 20, offset + 13 + length <= bytes.count else { break }
        let checksum = bytes.withUnsafeBytes { Checksum.xxh3(UnsafeRawBufferPointer(rebasing: $0[offset..<offset + 5 + length])) }
        store(checksum, size: 8, at: offset + 5 + length, in: &bytes)
        offset += 13 + length
    }
    return bytes
}

private func load(_ bytes: [UInt8], at offset: Int, size: Int) -> UInt64 {
    var value: UInt64 = 0
    for i in 0..<size { value |= UInt64(bytes[offset + i]) << UInt64(8 * i) }
    return value
}

private func store(_ value: UInt64, size: Int, at offset: Int, in bytes: inout [UInt8]) {
    for i in 0..<size { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> UInt64(8 * i)) }
}

/// The record format and the replay rules as docs/on-disk-format.md states them, written
/// without the library's decoder.
private struct ReferenceReader {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    struct Result {
        var records: [(offset: Int, record: Journal.Record)] = []
        var validLength = 16
        var lastRecordStart = 16
        var corruptRegions = 0
        var corruptBytes = 0
        var truncatedBytes = 0
        var endedCleanly = false
    }

    func replay() -> Result {
        var result = Result()
        var offset = 16
        while offset < bytes.count {
            if let (record, length) = record(at: offset) {
                result.records.append((offset, record))
                result.lastRecordStart = offset
                offset += length
                result.validLength = offset
                continue
            }
            guard let next = (offset + 1..<max(offset + 1, bytes.count - 12)).first(where: { record(at: $0) != nil }) else {
                result.truncatedBytes = bytes.count - offset
                break
            }
            result.corruptRegions += 1
            result.corruptBytes += next - offset
            offset = next
        }
        if case .close? = result.records.last?.record, result.truncatedBytes == 0 { result.endedCleanly = true }
        return result
    }

    /// The record at `offset` and its length in bytes, or nil when none valid starts there.
    func record(at offset: Int) -> (Journal.Record, Int)? {
        guard offset + 13 <= bytes.count else { return nil }
        let length = Int(load(bytes, at: offset, size: 4))
        let type = bytes[offset + 4]
        guard length <= 1 << 20, offset + 13 + length <= bytes.count else { return nil }
        switch type {
        case 1: guard length == 61 else { return nil }
        case 2: guard length == 16 else { return nil }
        case 3: guard length > 0, length % 24 == 0 else { return nil }
        case 4, 5: guard length == 0 else { return nil }
        default: return nil
        }
        let checksum = bytes.withUnsafeBytes { Checksum.xxh3(UnsafeRawBufferPointer(rebasing: $0[offset..<offset + 5 + length])) }
        guard checksum == load(bytes, at: offset + 5 + length, size: 8) else { return nil }

        let payload = offset + 5
        func u64(_ at: Int) -> UInt64 { load(bytes, at: payload + at, size: 8) }
        func hash(_ at: Int) -> KeyHash { KeyHash(high: u64(at), low: u64(at + 8)) }
        let record: Journal.Record
        switch type {
        case 1:
            let size = Int64(bitPattern: u64(16))
            let metaSize = UInt32(load(bytes, at: payload + 24, size: 4))
            let flags = bytes[payload + 28]
            guard size >= 0, size < 1 << 62, metaSize < 1 << 22 else { return nil }
            record = .put(Journal.Put(
                hash: hash(0), size: size, metaSize: metaSize, isInline: flags & 1 != 0, slot: flags & 4 != 0 ? 1 : 0,
                checksum: u64(29), created: Int64(bitPattern: u64(37)), accessed: Int64(bitPattern: u64(45)),
                expires: flags & 2 != 0 ? Int64(bitPattern: u64(53)) : nil))
        case 2:
            record = .remove(hash(0))
        case 3:
            record = .access(stride(from: 0, to: length, by: 24).map { (hash($0), Int64(bitPattern: u64($0 + 16))) })
        case 4:
            record = .clear
        default:
            record = .close
        }
        return (record, 13 + length)
    }
}

// Fuzzes the journal replay (`Journal.replay`, the record decoder), the index it feeds
// (`Index.apply`) and the note of PUT+FILE records an unclean open checks
// (`Journal.CarriedFiles`), as the open of a cache runs them on whatever the journal file holds.
//
// Each input is replayed twice: as it is, and "sealed", with the checksum of every record along
// its chain of lengths recomputed (and a PUT+FILE record's metaSize set to the bytes it
// carries). Random bytes almost never carry a valid XXH3-64, so the first run exercises the
// checksum and resynchronisation paths and the second the decoding of fields and the index
// behind it.
//
// Invariants:
// - replay accepts exactly the records an independent reading of docs/on-disk-format.md
//   accepts (plausible length, known type, the size the type requires, a matching XXH3-64,
//   a PUT's size below 2^62 and `.meta` size below 2^22, a PUT+FILE's metaSize equal to the
//   bytes it carries, at most 256 KiB, a CHECKPOINT's distance below 2^63), at the same
//   offsets and of the same types, resynchronising at the same places and never inside the
//   final run of zeros (space written ahead); so every record accepted has a valid checksum;
// - its summary (records, PUT+FILE records, valid length, skipped regions and bytes, torn
//   tail, zeros written ahead, clean end) adds up with those offsets;
// - every record accepted encodes back to the bytes it was read from (PUT flag bit 7, the
//   placement bits without bit 3 and an expiry without its flag are dropped), a PUT+FILE with
//   the file bytes `Journal.carriedFile` finds in it;
// - the PUT+FILE records left to check are each key's last one at or after the furthest point
//   a CHECKPOINT covers, in journal order;
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

        var records: [(record: Journal.Record, type: Journal.RecordType, offset: Int)] = []
        var carried = Journal.CarriedFiles()
        let summary = Journal.replay(buffer) { record, type, offset in
            records.append((record, type, offset))
            carried.note(record, type, at: offset)
        }
        let expected = ReferenceReader(bytes).replay()

        require(records.count == expected.records.count,
                "replay accepted \(records.count) records, the format allows \(expected.records.count)")
        for (found, reference) in zip(records, expected.records) {
            require(found.offset == reference.offset && found.type.rawValue == reference.type,
                    "replay read a record of type \(found.type) at \(found.offset), the format one of type \(reference.type) at \(reference.offset)")
            require(found.record == reference.record,
                    "record at \(found.offset): replay read \(found.record), the format says \(reference.record)")
            checkEncoding(found.record, type: found.type, at: found.offset, in: buffer)
        }
        require(summary.records == records.count, "summary counts \(summary.records) records, \(records.count) applied")
        require(summary.carriedFiles == expected.carriedFiles,
                "summary counts \(summary.carriedFiles) PUT+FILE records, expected \(expected.carriedFiles)")
        require(summary.validLength == expected.validLength, "valid length \(summary.validLength), expected \(expected.validLength)")
        require(summary.lastRecordStart == expected.lastRecordStart,
                "last record at \(summary.lastRecordStart), expected \(expected.lastRecordStart)")
        require(summary.corruptRegions == expected.corruptRegions && summary.corruptBytes == expected.corruptBytes,
                "skipped \(summary.corruptRegions) regions of \(summary.corruptBytes) bytes, expected \(expected.corruptRegions) of \(expected.corruptBytes)")
        require(summary.truncatedBytes == expected.truncatedBytes,
                "torn tail of \(summary.truncatedBytes) bytes, expected \(expected.truncatedBytes)")
        require(summary.writtenAhead == expected.writtenAhead,
                "\(summary.writtenAhead) bytes written ahead, expected \(expected.writtenAhead)")
        require(summary.endedCleanly == expected.endedCleanly, "clean end \(summary.endedCleanly), expected \(expected.endedCleanly)")
        if bytes.count >= Journal.headerSize {
            require(summary.validLength + summary.truncatedBytes + summary.writtenAhead == bytes.count,
                    "valid length, torn tail and zeros written ahead do not cover the file")
        }
        require(carried.uncovered == expected.uncoveredCarriedFiles,
                "PUT+FILE records to check at \(carried.uncovered), expected \(expected.uncoveredCarriedFiles)")

        checkIndex(after: records.map(\.record))
    }
}

/// The bytes `encode` (or `encodePut` with the file the record carries) writes for `record` are
/// the ones it was read from, but for what a PUT does not keep: flag bit 7, the placement bits
/// 4-6 when bit 3 is clear, and the expiry without its flag.
private func checkEncoding(_ record: Journal.Record, type: Journal.RecordType, at offset: Int, in bytes: UnsafeRawBufferPointer) {
    var encoded: [UInt8]
    if type == .putWithFile, case .put(let put) = record {
        let file = Journal.carriedFile(bytes, at: offset)
        require(file.lowerBound == offset + 5 + Journal.putPayloadSize && file.count == Int(put.metaSize),
                "record at \(offset): the carried file is at \(file), the record holds \(put.metaSize) bytes after its PUT payload")
        encoded = Journal.encodePut(put, carrying: [UnsafeRawBufferPointer(rebasing: bytes[file])])
    } else {
        encoded = Journal.encode(record)
    }
    require(offset + encoded.count <= bytes.count, "record at \(offset) encodes to \(encoded.count) bytes, past the end")
    var original = Array(bytes[offset..<offset + encoded.count])
    if case .put(let put) = record {
        let flags = 5 + 28
        let before = original
        original[flags] &= 0x7F
        if original[flags] & Journal.flagPlaced == 0 { original[flags] &= 0x0F }
        if put.expires == nil {
            for i in 5 + 53..<5 + 61 { original[i] = 0 }
        }
        if original != before {
            // The checksum covers the flags and the expiry, so only the rest is compared.
            encoded.removeLast(8)
            original.removeLast(8)
        }
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
        case .access, .close, .checkpoint: break
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
/// lengths (from the header on, while a length fits) recomputed, and the metaSize of each
/// PUT+FILE record on it set to the bytes the record carries.
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
        if bytes[offset + 4] == 6, length > 61 {
            store(UInt64(length - 61), size: 4, at: offset + 5 + 24, in: &bytes)
        }
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
        var records: [(offset: Int, type: UInt8, record: Journal.Record)] = []
        var validLength = 16
        var lastRecordStart = 16
        var corruptRegions = 0
        var corruptBytes = 0
        var truncatedBytes = 0
        var writtenAhead = 0
        var endedCleanly = false
        var carriedFiles = 0
        var uncoveredCarriedFiles: [Int] = []
    }

    func replay() -> Result {
        var result = Result()
        // The final run of zero bytes (after the header): space written ahead, where no record
        // starts, since no record's type is 0.
        var zeros = bytes.count
        while zeros > 16, bytes[zeros - 1] == 0 { zeros -= 1 }
        var offset = 16
        while offset < bytes.count {
            if let (record, type, length) = record(at: offset) {
                result.records.append((offset, type, record))
                result.lastRecordStart = offset
                offset += length
                result.validLength = offset
                continue
            }
            if offset >= zeros {
                result.writtenAhead = bytes.count - offset
                break
            }
            // The next offset whose type byte is before the zeros and where a record is whole.
            guard let next = (offset + 1..<max(offset + 1, zeros - 4)).first(where: { record(at: $0) != nil }) else {
                result.truncatedBytes = zeros - offset
                result.writtenAhead = bytes.count - zeros
                break
            }
            result.corruptRegions += 1
            result.corruptBytes += next - offset
            offset = next
        }
        if case .close? = result.records.last?.record, result.truncatedBytes == 0 { result.endedCleanly = true }

        // PUT+FILE records: a CHECKPOINT at c with distance b covers those starting before c - b.
        let carried = result.records.filter { $0.type == 6 }
        result.carriedFiles = carried.count
        var covered = 0
        for (offset, _, record) in result.records {
            if case .checkpoint(let back) = record { covered = max(covered, offset - Int(back)) }
        }
        var last: [KeyHash: Int] = [:]
        for (offset, _, record) in carried {
            if case .put(let put) = record { last[put.hash] = offset }
        }
        result.uncoveredCarriedFiles = last.values.filter { $0 >= covered }.sorted()
        return result
    }

    /// The record at `offset`, its type and its length in bytes, or nil when none valid starts there.
    func record(at offset: Int) -> (Journal.Record, UInt8, Int)? {
        guard offset + 13 <= bytes.count else { return nil }
        let length = Int(load(bytes, at: offset, size: 4))
        let type = bytes[offset + 4]
        guard length <= 1 << 20, offset + 13 + length <= bytes.count else { return nil }
        switch type {
        case 1: guard length == 61 else { return nil }
        case 2: guard length == 16 else { return nil }
        case 3: guard length > 0, length % 24 == 0 else { return nil }
        case 4, 5: guard length == 0 else { return nil }
        case 6:
            guard length > 61, length - 61 <= 256 << 10, load(bytes, at: offset + 5 + 24, size: 4) == UInt64(length - 61)
            else { return nil }
        case 7: guard length == 8 else { return nil }
        default: return nil
        }
        let checksum = bytes.withUnsafeBytes { Checksum.xxh3(UnsafeRawBufferPointer(rebasing: $0[offset..<offset + 5 + length])) }
        guard checksum == load(bytes, at: offset + 5 + length, size: 8) else { return nil }

        let payload = offset + 5
        func u64(_ at: Int) -> UInt64 { load(bytes, at: payload + at, size: 8) }
        func hash(_ at: Int) -> KeyHash { KeyHash(high: u64(at), low: u64(at + 8)) }
        let record: Journal.Record
        switch type {
        case 1, 6:
            let size = Int64(bitPattern: u64(16))
            let metaSize = UInt32(load(bytes, at: payload + 24, size: 4))
            let flags = bytes[payload + 28]
            guard size >= 0, size < 1 << 62, metaSize < 1 << 22 else { return nil }
            let placement = flags & 8 == 0 ? nil
                : Index.Placement(queue: flags & 16 != 0 ? .main : .small, frequency: flags >> 5 & 3)
            record = .put(Journal.Put(
                hash: hash(0), size: size, metaSize: metaSize, isInline: flags & 1 != 0, slot: flags & 4 != 0 ? 1 : 0,
                checksum: u64(29), created: Int64(bitPattern: u64(37)), accessed: Int64(bitPattern: u64(45)),
                expires: flags & 2 != 0 ? Int64(bitPattern: u64(53)) : nil, placement: placement))
        case 2:
            record = .remove(hash(0))
        case 3:
            record = .access(stride(from: 0, to: length, by: 24).map { (hash($0), Int64(bitPattern: u64($0 + 16))) })
        case 4:
            record = .clear
        case 5:
            record = .close
        default:
            let back = u64(0)
            guard back < 1 << 63 else { return nil }
            record = .checkpoint(back: Int64(back))
        }
        return (record, type, 13 + length)
    }
}

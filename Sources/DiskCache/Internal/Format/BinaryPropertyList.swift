/// A small writer and reader for the subset of Apple's binary property list format
/// (`bplist00`) that entry metadata uses: integers, reals, dates, data, strings,
/// arrays and dictionaries with string keys.
///
/// Why not `PropertyListEncoder`: it costs ~13 µs to encode and ~19 µs to decode a
/// metadata record, more than the file write itself on a warm cache. The output here is
/// a valid binary property list that Foundation's `PropertyListSerialization` reads
/// (a test checks it); anything this reader does not understand is reported as
/// `nil`, never trusted.
///
/// Layout: "bplist00", the objects, an offset table, and a 32-byte trailer
/// (offset size, reference size, object count, top object, offset table offset),
/// all big-endian.
///
/// `.meta` files have one writer (`EntryMetadata.encodedParts`) and one reader
/// (`EntryMetadata.ReadView.parse`, which `EntryMetadata.decode` builds on), both over the
/// ``Reader`` and the helpers here. The general ``encodeSplit(_:)`` and ``decode(_:)`` of a
/// whole ``Value`` tree are not on any path of the store: they are the reference the tests and
/// the fuzzer (FuzzMetadata) check that codec against.
enum BinaryPropertyList {
    indirect enum Value: Equatable, Sendable {
        case integer(Int64)
        case real(Double)
        /// Seconds since 2001-01-01 00:00:00 UTC (the property-list epoch).
        case date(Double)
        case data([UInt8])
        /// Only for ``BinaryPropertyList/encodeSplit(_:)``: a data object whose `count` bytes
        /// the caller writes itself. The reader never produces it.
        case externalData(count: Int)
        case string(String)
        case array([Value])
        /// Keys in the order they were written.
        case dictionary([(String, Value)])

        static func == (a: Value, b: Value) -> Bool {
            switch (a, b) {
            case let (.integer(x), .integer(y)): return x == y
            case let (.real(x), .real(y)): return x == y || (x.isNaN && y.isNaN)
            case let (.date(x), .date(y)): return x == y
            case let (.data(x), .data(y)): return x == y
            case let (.string(x), .string(y)): return x == y
            case let (.array(x), .array(y)): return x == y
            case let (.dictionary(x), .dictionary(y)):
                return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
            default: return false
            }
        }

        subscript(key: String) -> Value? {
            guard case .dictionary(let pairs) = self else { return nil }
            return pairs.first(where: { $0.0 == key })?.1
        }
    }

    static let magic: [UInt8] = Array("bplist00".utf8)
    /// The magic as the 8 bytes load it, for a comparison without allocating.
    static let magicWord: UInt64 = magic.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }

    // MARK: - Writing

    /// Encodes `root` in two parts, for a gathered write: the payload of its one
    /// `.externalData(count)` object (if any) is in neither part and goes between them (`head`,
    /// the payload, `tail` is the whole property list), so an entry's body is written without
    /// being copied. Objects are written in the order they are first referred to, breadth first.
    /// `.meta` files are written by `EntryMetadata.encodedParts`, a writer for their one shape,
    /// which a test checks against this general one.
    static func encodeSplit(_ root: Value) -> (head: [UInt8], tail: [UInt8]) {
        let total = countObjects(root)
        let refSize = total < 256 ? 1 : (total < 65536 ? 2 : 4)
        var result = magic
        result.reserveCapacity(256)
        var offsets: [Int] = []
        offsets.reserveCapacity(total)
        // Objects are numbered as they are first referred to and written in that order, so each
        // one is final when its turn comes: write it straight into the output.
        var pending: [Value] = [root]
        pending.reserveCapacity(total)
        var external = 0
        var split: Int?
        var cursor = 0
        while cursor < pending.count {
            let value = pending[cursor]
            cursor += 1
            offsets.append(result.count + external)
            switch value {
            case .integer(let v):
                result.append(0x13)
                appendBigEndian(UInt64(bitPattern: v), size: 8, to: &result)
            case .real(let v):
                result.append(0x23)
                appendBigEndian(v.bitPattern, size: 8, to: &result)
            case .date(let v):
                result.append(0x33)
                appendBigEndian(v.bitPattern, size: 8, to: &result)
            case .data(let bytes):
                appendMarker(0x40, count: bytes.count, to: &result)
                result.append(contentsOf: bytes)
            case .externalData(let count):
                precondition(split == nil, "one external data object at most")  // values the tests and fuzzer build, never read ones
                appendMarker(0x40, count: count, to: &result)
                external = count
                split = result.count
            case .string(let string):
                appendString(string, to: &result)
            case .array(let values):
                appendMarker(0xA0, count: values.count, to: &result)
                for v in values {
                    appendBigEndian(UInt64(pending.count), size: refSize, to: &result)
                    pending.append(v)
                }
            case .dictionary(let pairs):
                appendMarker(0xD0, count: pairs.count, to: &result)
                for (k, _) in pairs {
                    appendBigEndian(UInt64(pending.count), size: refSize, to: &result)
                    pending.append(.string(k))
                }
                for (_, v) in pairs {
                    appendBigEndian(UInt64(pending.count), size: refSize, to: &result)
                    pending.append(v)
                }
            }
        }
        let tail = finishSplit(&result, split: split, external: external, offsets: offsets, refSize: refSize)
        return (result, tail)
    }

    /// Cuts `result` (the magic and every object, less the `external` bytes the caller writes
    /// itself at `split`) at `split`, and returns what followed with the offset table and
    /// trailer appended: the tail.
    static func finishSplit(_ result: inout [UInt8], split: Int?, external: Int, offsets: [Int], refSize: Int) -> [UInt8] {
        let tableOffset = result.count + external
        let offsetSize = tableOffset < 256 ? 1 : (tableOffset < 65536 ? 2 : (tableOffset < 1 << 32 ? 4 : 8))
        var tail: [UInt8] = []
        if let split {
            tail = Array(result[split...])
            result.removeSubrange(split...)
        }
        tail.reserveCapacity(tail.count + offsets.count * offsetSize + 32)
        for offset in offsets { appendBigEndian(UInt64(offset), size: offsetSize, to: &tail) }
        tail.append(contentsOf: [0, 0, 0, 0, 0, 0])
        tail.append(UInt8(offsetSize))
        tail.append(UInt8(refSize))
        appendBigEndian(UInt64(offsets.count), size: 8, to: &tail)
        appendBigEndian(0, size: 8, to: &tail)
        appendBigEndian(UInt64(tableOffset), size: 8, to: &tail)
        return tail
    }

    static func isStringObject(_ marker: UInt8) -> Bool { marker & 0xF0 == 0x50 || marker & 0xF0 == 0x60 }

    /// The bytes `encode` writes for a string object: ASCII (0x5n) when it can, else UTF-16BE (0x6n).
    static func encodeString(_ string: String) -> [UInt8] {
        var out: [UInt8] = []
        appendString(string, to: &out)
        return out
    }

    static func appendString(_ string: String, to out: inout [UInt8]) {
        if string.utf8.allSatisfy({ $0 < 0x80 }) {
            appendMarker(0x50, count: string.utf8.count, to: &out)
            out.append(contentsOf: string.utf8)
        } else {
            let units = Array(string.utf16)
            appendMarker(0x60, count: units.count, to: &out)
            out.reserveCapacity(out.count + units.count * 2)
            for unit in units {
                out.append(UInt8(unit >> 8))
                out.append(UInt8(unit & 0xFF))
            }
        }
    }

    private static func countObjects(_ value: Value) -> Int {
        switch value {
        case .array(let values): return 1 + values.reduce(0) { $0 + countObjects($1) }
        case .dictionary(let pairs): return 1 + pairs.reduce(0) { $0 + 1 + countObjects($1.1) }
        default: return 1
        }
    }

    static func appendMarker(_ high: UInt8, count: Int, to out: inout [UInt8]) {
        if count < 15 {
            out.append(high | UInt8(count))
        } else {
            out.append(high | 0x0F)
            out.append(0x13)
            appendBigEndian(UInt64(count), size: 8, to: &out)
        }
    }

    @inline(__always)
    static func appendBigEndian(_ value: UInt64, size: Int, to out: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { out.append(contentsOf: $0[(8 - size)...]) }
    }

    // MARK: - Reading

    /// Decodes a binary property list, or returns nil if the bytes are not one this reader
    /// understands. Every offset and count is bounds-checked: the input may be hostile.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> Value? {
        var reader = Reader(bytes: bytes)
        return reader.decodeTop()
    }

    struct Reader {
        let bytes: UnsafeRawBufferPointer
        var offsetSize = 0
        var refSize = 0
        var objectCount = 0
        var tableOffset = 0
        var depth = 0
        var visited = 0
        /// File bytes that strings and data decoded so far were copied from, shared objects
        /// counted each time.
        var copied = 0

        init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        /// The unsigned big-endian integer of `size` bytes at `offset`; nil outside the file.
        /// The widths the format uses (1, 2, 4, 8) are one load each: every field a read looks
        /// at takes several of these.
        @inline(__always)
        func readBigEndian(at offset: Int, size: Int) -> UInt64? {
            guard size > 0, size <= 8, offset >= 0, offset + size <= bytes.count else { return nil }
            switch size {
            case 1: return UInt64(bytes.load(fromByteOffset: offset, as: UInt8.self))
            case 2: return UInt64(UInt16(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self)))
            case 4: return UInt64(UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
            case 8: return UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            default:
                var value: UInt64 = 0
                for i in 0..<size { value = value << 8 | UInt64(bytes[offset + i]) }
                return value
            }
        }

        mutating func decodeTop() -> Value? {
            guard let top = readTrailer() else { return nil }
            return object(top)
        }

        /// Reads the header and trailer; returns the top object's index.
        mutating func readTrailer() -> Int? {
            guard bytes.count >= 8 + 32,
                  bytes.loadUnaligned(as: UInt64.self) == BinaryPropertyList.magicWord else { return nil }
            let trailer = bytes.count - 32
            offsetSize = Int(bytes[trailer + 6])
            refSize = Int(bytes[trailer + 7])
            guard let count = readBigEndian(at: trailer + 8, size: 8),
                  let top = readBigEndian(at: trailer + 16, size: 8),
                  let table = readBigEndian(at: trailer + 24, size: 8),
                  offsetSize.nonzeroBitCount == 1, offsetSize <= 8, refSize.nonzeroBitCount == 1, refSize <= 8,
                  count > 0, count < UInt64(bytes.count), top < count,
                  table >= 8, table < UInt64(trailer),
                  UInt64(trailer) - table >= count * UInt64(offsetSize)
            else { return nil }
            objectCount = Int(count)
            tableOffset = Int(table)
            return Int(top)
        }

        /// The byte range of a whole object (marker through payload), for strings, data and
        /// fixed-size scalars; nil for containers and anything malformed.
        func objectRange(_ index: Int) -> Range<Int>? {
            guard let start = offset(of: index) else { return nil }
            let marker = bytes[start]
            let end: Int
            switch marker & 0xF0 {
            case 0x10, 0x20:
                end = start + 1 + (1 << Int(marker & 0x0F))
            case 0x30:
                end = start + 9
            case 0x40, 0x50:
                guard let (n, payload) = count(at: start) else { return nil }
                end = payload + n
            case 0x60:
                guard let (n, payload) = count(at: start) else { return nil }
                end = payload + 2 * n
            default:
                return nil
            }
            guard end <= tableOffset else { return nil }
            return start..<end
        }

        /// A dictionary object's entry count and where its references start; nil when `index`
        /// is not a well-formed dictionary. Its entries are read with ``entry(_:of:)``, without
        /// decoding anything.
        func dictionary(_ index: Int) -> (count: Int, payload: Int)? {
            guard let start = offset(of: index), bytes[start] & 0xF0 == 0xD0,
                  let (n, payload) = count(at: start), payload + 2 * n * refSize <= tableOffset else { return nil }
            return (n, payload)
        }

        /// Entry `i` of `dictionary`: its key string's raw object and its value's index; nil
        /// when malformed.
        func entry(_ i: Int, of dictionary: (count: Int, payload: Int)) -> (key: UnsafeRawBufferPointer, value: Int)? {
            guard let keyRef = reference(at: dictionary.payload + i * refSize),
                  let valueRef = reference(at: dictionary.payload + (dictionary.count + i) * refSize),
                  let keyRange = objectRange(keyRef) else { return nil }
            return (UnsafeRawBufferPointer(rebasing: bytes[keyRange]), valueRef)
        }

        /// An integer object's value (8-byte integers are signed, shorter ones unsigned).
        func integer(_ index: Int) -> Int64? {
            guard let start = offset(of: index), bytes[start] & 0xF0 == 0x10 else { return nil }
            let size = 1 << Int(bytes[start] & 0x0F)
            guard size <= 8, let raw = readBigEndian(at: start + 1, size: size) else { return nil }
            return size == 8 ? Int64(bitPattern: raw) : Int64(raw)
        }

        /// A date object's seconds since 2001.
        func date(_ index: Int) -> Double? {
            guard let start = offset(of: index), bytes[start] == 0x33,
                  let raw = readBigEndian(at: start + 1, size: 8) else { return nil }
            return Double(bitPattern: raw)
        }

        /// A data object's payload range.
        func dataPayload(_ index: Int) -> Range<Int>? {
            guard let start = offset(of: index), bytes[start] & 0xF0 == 0x40,
                  let (n, payload) = count(at: start), payload + n <= tableOffset else { return nil }
            return payload..<payload + n
        }

        /// The object reference stored at `offset`, or nil when it names no object. References
        /// may be eight bytes wide: checked before they become an `Int`, which a value above
        /// `Int.max` would trap.
        func reference(at offset: Int) -> Int? {
            guard let ref = readBigEndian(at: offset, size: refSize), ref < UInt64(objectCount) else { return nil }
            return Int(ref)
        }

        func offset(of index: Int) -> Int? {
            guard index >= 0, index < objectCount,
                  let offset = readBigEndian(at: tableOffset + index * offsetSize, size: offsetSize),
                  offset >= 8, offset < UInt64(tableOffset)
            else { return nil }
            return Int(offset)
        }

        /// Reads a marker's count, which may follow as an integer object; returns (count, start of payload).
        func count(at offset: Int) -> (Int, Int)? {
            let low = Int(bytes[offset] & 0x0F)
            if low != 0x0F { return (low, offset + 1) }
            guard offset + 1 < bytes.count else { return nil }
            let marker = bytes[offset + 1]
            guard marker & 0xF0 == 0x10 else { return nil }
            let size = 1 << Int(marker & 0x0F)
            // No count can exceed the file's size; checking it here keeps every later
            // `payload + n * refSize` far from overflowing.
            guard let value = readBigEndian(at: offset + 2, size: size), value < UInt64(bytes.count) else { return nil }
            return (Int(value), offset + 2 + size)
        }

        /// Whether `count` more bytes may be copied out of the file. The visit budget bounds
        /// objects, not bytes: references to one large string or data object would otherwise
        /// make a file of S bytes decode into about S²/18 (a terabyte for a 4 MiB `.meta`). A
        /// file this library writes copies each byte once; four times the file is plenty.
        mutating func copy(_ count: Int) -> Bool {
            copied += count
            return copied <= 4 * bytes.count
        }

        mutating func object(_ index: Int) -> Value? {
            // Shared references could make a small file expand exponentially: a well-formed
            // file visits each object about once, so a few times the object count is plenty.
            visited += 1
            guard visited <= 4 * objectCount + 16 else { return nil }
            depth += 1
            defer { depth -= 1 }
            guard depth < 32, let start = offset(of: index) else { return nil }
            let marker = bytes[start]
            switch marker & 0xF0 {
            case 0x10:
                let size = 1 << Int(marker & 0x0F)
                guard size <= 8, let raw = readBigEndian(at: start + 1, size: size) else { return nil }
                // 1, 2 and 4-byte integers are unsigned; 8-byte ones are signed.
                return .integer(size == 8 ? Int64(bitPattern: raw) : Int64(raw))
            case 0x20:
                let size = 1 << Int(marker & 0x0F)
                guard let raw = readBigEndian(at: start + 1, size: size) else { return nil }
                if size == 8 { return .real(Double(bitPattern: raw)) }
                if size == 4 { return .real(Double(Float(bitPattern: UInt32(raw)))) }
                return nil
            case 0x30:
                guard marker == 0x33, let raw = readBigEndian(at: start + 1, size: 8) else { return nil }
                return .date(Double(bitPattern: raw))
            case 0x40:
                guard let (n, payload) = count(at: start), payload + n <= tableOffset, copy(n) else { return nil }
                return .data(Array(bytes[payload..<payload + n]))
            case 0x50:
                guard let (n, payload) = count(at: start), payload + n <= tableOffset, copy(n) else { return nil }
                let slice = UnsafeRawBufferPointer(rebasing: bytes[payload..<payload + n])
                guard slice.allSatisfy({ $0 < 0x80 }) else { return nil }
                return .string(String(decoding: slice, as: UTF8.self))
            case 0x60:
                guard let (n, payload) = count(at: start), payload + 2 * n <= tableOffset, copy(2 * n) else { return nil }
                var units: [UInt16] = []
                units.reserveCapacity(n)
                for i in 0..<n {
                    units.append(UInt16(bytes[payload + 2 * i]) << 8 | UInt16(bytes[payload + 2 * i + 1]))
                }
                return .string(String(decoding: units, as: UTF16.self))
            case 0xA0:
                guard let (n, payload) = count(at: start), payload + n * refSize <= tableOffset else { return nil }
                var values: [Value] = []
                for i in 0..<n {
                    guard let ref = reference(at: payload + i * refSize), let value = object(ref) else { return nil }
                    values.append(value)
                }
                return .array(values)
            case 0xD0:
                guard let (n, payload) = count(at: start), payload + 2 * n * refSize <= tableOffset else { return nil }
                var pairs: [(String, Value)] = []
                for i in 0..<n {
                    guard let keyRef = reference(at: payload + i * refSize),
                          let valueRef = reference(at: payload + (n + i) * refSize),
                          case .string(let key)? = object(keyRef),
                          let value = object(valueRef) else { return nil }
                    pairs.append((key, value))
                }
                return .dictionary(pairs)
            default:
                return nil
            }
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The contents of an entry's `.meta` file: a binary property list dictionary.
///
/// ```
/// {
///   "format":   1                         integer, the entry format version
///   "key":      "greeting"                string, the full key (compared on every read)
///   "size":     5                         integer, body size in bytes
///   "checksum": -3942215733470264621      integer, XXH3-64 of the body (UInt64 bit pattern)
///   "created":  2026-11-22T02:00:00Z      date, when this value was stored
///   "accessed": 2026-11-22T02:00:00Z      date, last access known when the file was written
///   "expires":  2026-11-23T02:00:00Z      date, optional
///   "metadata": { "content-type": "..." } dictionary of strings, the caller's metadata
///   "body":     <68656c6c 6f>             data, optional: the body itself when stored inline
/// }
/// ```
/// The journal, not this file, is the source of truth for the last access time.
struct EntryMetadata: Equatable, Sendable {
    static let formatVersion: Int64 = 1

    var key: String
    var size: Int64
    var checksum: UInt64
    /// Milliseconds since 1970.
    var created: Int64
    var accessed: Int64
    /// Milliseconds since 1970; nil = never expires.
    var expires: Int64?
    var metadata: [String: String]
    /// The body, when it is small enough to live in this file.
    var inlineBody: [UInt8]?

    private static let secondsFrom1970To2001 = 978_307_200.0

    static func milliseconds(_ value: BinaryPropertyList.Value?) -> Int64? {
        guard case .date(let seconds)? = value, seconds.isFinite,
              abs(seconds) < 1e13 else { return nil }
        return Int64(((seconds + secondsFrom1970To2001) * 1000).rounded())
    }

    /// Throws `invalidArgument` when a `.meta` file of `size` bytes (`about` that many, when only
    /// estimated) cannot be an entry's: the index keeps the size in 20 bits.
    static func checkFits(_ size: Int, about: Bool = false) throws(DiskCacheError) {
        guard size > IndexEntry.maximumMetaSize else { return }
        throw DiskCacheError(code: .invalidArgument,
                             message: "The key and metadata take \(about ? "about " : "")\(size) bytes; an entry's metadata may take at most \(IndexEntry.maximumMetaSize)")
    }

    /// The whole file: ``encodedParts(inlineBodyCount:)`` with the inline body, if any, between them.
    func encoded() -> [UInt8] {
        let (head, tail) = encodedParts(inlineBodyCount: inlineBody?.count)
        return head + (inlineBody ?? []) + tail
    }

    /// The file's bytes before and after an inline body of `inlineBodyCount` bytes that the
    /// caller writes between them (`inlineBody` is ignored), or the whole file in `head` and
    /// `tail` without a body when `inlineBodyCount` is nil. A store writes head, body and tail
    /// with one gathered write and never copies the body.
    ///
    /// Writes the bytes `BinaryPropertyList.encodeSplit` writes for the same dictionary (a test
    /// compares them), without building a `Value` tree first: on every store, that tree's
    /// boxes and the generic walk over it cost as much as the journal append ("The cheaper put"
    /// in docs/benchmarks.md as of 35decb3: `git show 35decb3:docs/benchmarks.md`).
    func encodedParts(inlineBodyCount: Int?) -> (head: [UInt8], tail: [UInt8]) {
        typealias PList = BinaryPropertyList
        var fields: [StaticString] = ["format", "key", "size", "checksum", "created", "accessed"]
        fields.reserveCapacity(9)
        if expires != nil { fields.append("expires") }
        fields.append("metadata")
        if inlineBodyCount != nil { fields.append("body") }
        let n = fields.count
        let pairs = metadata.count <= 1 ? Array(metadata) : metadata.sorted { $0.key < $1.key }
        // Objects in the order the generic writer numbers them (breadth first): the top
        // dictionary, its n keys, its n values, then the metadata dictionary's keys and values.
        let total = 1 + 2 * n + 2 * pairs.count
        let refSize = total < 256 ? 1 : (total < 65536 ? 2 : 4)
        var out = PList.magic
        out.reserveCapacity(128 + key.utf8.count + refSize * 2 * n)
        var offsets: [Int] = []
        offsets.reserveCapacity(total)
        var external = 0
        var split: Int?
        func begin() { offsets.append(out.count + external) }
        func reference(_ object: Int) { PList.appendBigEndian(UInt64(object), size: refSize, to: &out) }
        func integer(_ value: Int64) {
            begin()
            out.append(0x13)
            PList.appendBigEndian(UInt64(bitPattern: value), size: 8, to: &out)
        }
        func date(_ milliseconds: Int64) {
            begin()
            out.append(0x33)
            PList.appendBigEndian((Double(milliseconds) / 1000 - Self.secondsFrom1970To2001).bitPattern, size: 8, to: &out)
        }
        func string(_ value: String) {
            begin()
            PList.appendString(value, to: &out)
        }
        begin()
        PList.appendMarker(0xD0, count: n, to: &out)
        for object in 1...(2 * n) { reference(object) }
        for field in fields {
            begin()
            PList.appendMarker(0x50, count: field.utf8CodeUnitCount, to: &out)
            out.append(contentsOf: UnsafeBufferPointer(start: field.utf8Start, count: field.utf8CodeUnitCount))
        }
        integer(Self.formatVersion)
        string(key)
        integer(size)
        integer(Int64(bitPattern: checksum))
        date(created)
        date(accessed)
        if let expires { date(expires) }
        begin()
        PList.appendMarker(0xD0, count: pairs.count, to: &out)
        for object in 0..<(2 * pairs.count) { reference(1 + 2 * n + object) }
        if let inlineBodyCount {
            begin()
            PList.appendMarker(0x40, count: inlineBodyCount, to: &out)
            external = inlineBodyCount
            split = out.count
        }
        for pair in pairs { string(pair.key) }
        for pair in pairs { string(pair.value) }
        let tail = PList.finishSplit(&out, split: split, external: external, offsets: offsets, refSize: refSize)
        return (out, tail)
    }

    /// Parses a `.meta` file; nil if it is not a well-formed entry of a format this version reads.
    ///
    /// The one reader of the format: ``ReadView/parse(_:)`` finds and checks every field (a
    /// read of the value stops there), and this decodes the key, the dates and the caller's
    /// metadata it found. So whatever this accepts, a read accepts the same way (a read does not
    /// look at the dates or the caller's metadata, so it may serve a file whose dates this
    /// rejects). Fields this version does not know are not looked at; a `metadata` field that
    /// is not a dictionary of strings is damage.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> EntryMetadata? {
        guard let view = ReadView.parse(bytes), let created = view.created, let accessed = view.accessed else { return nil }
        var reader = BinaryPropertyList.Reader(bytes: bytes)
        guard reader.readTrailer() != nil,
              case .string(let key)? = reader.object(view.key),
              let created = reader.date(created).flatMap({ milliseconds(.date($0)) }),
              let accessed = reader.date(accessed).flatMap({ milliseconds(.date($0)) })
        else { return nil }
        var metadata: [String: String] = [:]
        if let index = view.metadata {
            guard case .dictionary(let pairs)? = reader.object(index) else { return nil }
            for (name, value) in pairs {
                guard case .string(let text) = value else { return nil }
                metadata[name] = text
            }
        }
        return EntryMetadata(key: key, size: view.size, checksum: view.checksum, created: created, accessed: accessed,
                             expires: view.expires, metadata: metadata, inlineBody: view.inlineBody.map { Array(bytes[$0]) })
    }
}

extension EntryMetadata {
    /// Every field of a `.meta` file, found and checked in place: the key, size, checksum, exact
    /// expiry and inline body a read of the value needs, and where the dates and the caller's
    /// metadata are, for ``EntryMetadata/decode(_:)``. No strings, arrays or dictionaries are
    /// built, so a read does not pay for decoding the caller's metadata.
    struct ReadView {
        /// The key's object index.
        var key: Int
        /// The key's string object, marker through payload, compared as bytes with the encoding
        /// of the key asked for (the encoder writes one canonical form for each string).
        var keyObject: Range<Int>
        var size: Int64
        var checksum: UInt64
        var expires: Int64?
        /// The inline body's bytes.
        var inlineBody: Range<Int>?
        /// The object indexes of the creation and access dates and of the metadata dictionary,
        /// when present (checked by ``EntryMetadata/decode(_:)``, which needs them).
        var created: Int?
        var accessed: Int?
        var metadata: Int?

        /// Which field a dictionary key names, as the bits `parse` uses (key 1, size 2,
        /// checksum 4, format 8, expires 16, body 32, created 64, accessed 128, metadata 256),
        /// or 0 for a name this version does not know.
        /// `name` is the key's whole string object, marker first (`"key"` is 0x53 k e y), and is
        /// compared as little-endian words loaded from it: no stored names, so no lazy global to
        /// check on every read.
        @inline(__always)
        static func field(named name: UnsafeRawBufferPointer) -> UInt16 {
            func word(_ a: UInt8, _ b: Unicode.Scalar, _ c: Unicode.Scalar, _ d: Unicode.Scalar) -> UInt32 {
                UInt32(a) | UInt32(UInt8(ascii: b)) << 8 | UInt32(UInt8(ascii: c)) << 16 | UInt32(UInt8(ascii: d)) << 24
            }
            func word(_ a: UInt32, _ b: UInt32) -> UInt64 { UInt64(a) | UInt64(b) << 32 }
            let head = name.count >= 4 ? UInt32(littleEndian: name.loadUnaligned(as: UInt32.self)) : 0
            switch name.count {
            case 4:
                return head == word(0x53, "k", "e", "y") ? 1 : 0
            case 5:
                if head == word(0x54, "s", "i", "z"), name[4] == UInt8(ascii: "e") { return 2 }
                if head == word(0x54, "b", "o", "d"), name[4] == UInt8(ascii: "y") { return 32 }
                return 0
            case 7:
                let tail = UInt32(littleEndian: name.loadUnaligned(fromByteOffset: 3, as: UInt32.self))
                return head == word(0x56, "f", "o", "r") && tail == word(UInt8(ascii: "r"), "m", "a", "t") ? 8 : 0
            case 8:
                let whole = UInt64(littleEndian: name.loadUnaligned(as: UInt64.self))
                if whole == word(word(0x57, "e", "x", "p"), word(UInt8(ascii: "i"), "r", "e", "s")) { return 16 }
                return whole == word(word(0x57, "c", "r", "e"), word(UInt8(ascii: "a"), "t", "e", "d")) ? 64 : 0
            case 9:
                guard name[0] == 0x58 else { return 0 }
                let rest = UInt64(littleEndian: name.loadUnaligned(fromByteOffset: 1, as: UInt64.self))
                if rest == word(word(UInt8(ascii: "c"), "h", "e", "c"), word(UInt8(ascii: "k"), "s", "u", "m")) { return 4 }
                if rest == word(word(UInt8(ascii: "a"), "c", "c", "e"), word(UInt8(ascii: "s"), "s", "e", "d")) { return 128 }
                return rest == word(word(UInt8(ascii: "m"), "e", "t", "a"), word(UInt8(ascii: "d"), "a", "t", "a")) ? 256 : 0
            default:
                return 0
            }
        }

        /// Nil when the file is not a well-formed entry of a format this version reads.
        static func parse(_ bytes: UnsafeRawBufferPointer) -> ReadView? {
            var reader = BinaryPropertyList.Reader(bytes: bytes)
            guard let top = reader.readTrailer() else { return nil }
            var key: Int?
            var keyObject: Range<Int>?
            var size: Int64?
            var checksum: Int64?
            var format: Int64?
            var expires: Int64??
            var body: Range<Int>??
            var created: Int?
            var accessed: Int?
            var metadata: Int?
            // A field named twice makes the file invalid: neither occurrence wins. Fields this
            // version does not know are not looked at. A plain loop, not a closure: the fields
            // it sets would otherwise be boxed and checked for exclusive access at run time, a
            // tenth of a small read's time in user space.
            var seen: UInt16 = 0
            var repeated = false
            guard let dictionary = reader.dictionary(top) else { return nil }
            for i in 0..<dictionary.count {
                guard let (name, value) = reader.entry(i, of: dictionary) else { return nil }
                let field = Self.field(named: name)
                if field == 0 { continue }
                if seen & field != 0 { repeated = true }
                seen |= field
                guard !repeated else { continue }
                switch field {
                case 1:
                    key = value
                    keyObject = reader.objectRange(value)
                case 2: size = reader.integer(value)
                case 4: checksum = reader.integer(value)
                case 8: format = reader.integer(value)
                case 16: expires = .some(reader.date(value).flatMap { EntryMetadata.milliseconds(.date($0)) })
                case 32: body = .some(reader.dataPayload(value))
                case 64: created = value
                case 128: accessed = value
                default: metadata = value
                }
            }
            guard !repeated, let key, let keyObject, let size, size >= 0, let checksum,
                  let format, format >= 1, format <= EntryMetadata.formatVersion,
                  BinaryPropertyList.isStringObject(bytes[keyObject.lowerBound])
            else { return nil }
            if case .some(nil) = expires { return nil }  // present but not a date
            if case .some(nil) = body { return nil }  // present but not data
            let inline = body ?? nil
            if let inline, inline.count != Int(size) { return nil }
            return ReadView(key: key, keyObject: keyObject, size: size, checksum: UInt64(bitPattern: checksum),
                            expires: expires ?? nil, inlineBody: inline, created: created, accessed: accessed,
                            metadata: metadata)
        }

        func hasKey(_ encodedKey: [UInt8], in bytes: UnsafeRawBufferPointer) -> Bool {
            UnsafeRawBufferPointer(rebasing: bytes[keyObject]).elementsEqual(encodedKey)
        }

        /// True if the file's key is `key`: for an ASCII key, compared in place with no
        /// allocation (marker, then the bytes), else through ``BinaryPropertyList/encodeString(_:)``.
        func hasKey(_ key: String, in bytes: UnsafeRawBufferPointer) -> Bool {
            var key = key
            let object = UnsafeRawBufferPointer(rebasing: bytes[keyObject])
            let ascii: Bool? = key.withUTF8 { utf8 in
                guard !utf8.contains(where: { $0 >= 0x80 }) else { return nil }
                let count = utf8.count
                let markerSize = count < 15 ? 1 : 10
                guard object.count == markerSize + count else { return false }
                if count < 15 {
                    guard object[0] == 0x50 | UInt8(count) else { return false }
                } else {
                    guard object[0] == 0x5F, object[1] == 0x13 else { return false }
                    for i in 0..<8 where object[2 + i] != UInt8(truncatingIfNeeded: UInt64(count) >> UInt64(8 * (7 - i))) {
                        return false
                    }
                }
                return count == 0 || memcmp(object.baseAddress! + markerSize, utf8.baseAddress!, count) == 0
            }
            return ascii ?? hasKey(BinaryPropertyList.encodeString(key), in: bytes)
        }
    }
}

@testable import DiskCache
import Foundation
import Testing

/// The hand-written binary property list coder of `.meta` files.
struct MetadataCodingTests {
    static let samples: [EntryMetadata] = [
        EntryMetadata(key: "k", size: 0, checksum: 0, created: 0, accessed: 0, expires: nil, metadata: [:], inlineBody: []),
        EntryMetadata(key: "greeting", size: 5, checksum: .max, created: 1_800_000_000_123, accessed: 1_800_000_001_000,
                      expires: 1_900_000_000_000, metadata: ["type": "text/plain"], inlineBody: Array("hello".utf8)),
        EntryMetadata(key: "キー🔑", size: 1 << 40, checksum: 0x8000_0000_0000_0001, created: 1, accessed: 2,
                      expires: nil, metadata: ["ü": "✓", "": ""], inlineBody: nil),
        // Enough objects for two-byte references, enough bytes for four-byte offsets.
        EntryMetadata(key: String(repeating: "x", count: 70_000), size: 3, checksum: 42, created: 5, accessed: 6, expires: 7,
                      metadata: Dictionary(uniqueKeysWithValues: (0..<300).map { ("k\($0)", "v\($0)") }),
                      inlineBody: [1, 2, 3]),
    ]

    @Test(arguments: 0..<samples.count)
    func encodedMetadataDecodesBackAndReadsInPlace(index: Int) throws {
        let meta = Self.samples[index]
        let bytes = meta.encoded()
        let decoded = bytes.withUnsafeBytes { EntryMetadata.decode($0) }
        #expect(decoded == meta)
        let view = try #require(bytes.withUnsafeBytes { EntryMetadata.ReadView.parse($0) })
        #expect(view.size == meta.size)
        #expect(view.checksum == meta.checksum)
        #expect(view.expires == meta.expires)
        bytes.withUnsafeBytes { buffer in
            #expect(view.hasKey(BinaryPropertyList.encodeString(meta.key), in: buffer))
            #expect(!view.hasKey(BinaryPropertyList.encodeString(meta.key + "!"), in: buffer))
            #expect(view.inlineBody.map { Array(buffer[$0]) } == meta.inlineBody)
        }
        // Foundation reads the same file.
        let plist = try PropertyListSerialization.propertyList(from: Data(bytes), format: nil) as? [String: Any]
        #expect(plist?["key"] as? String == meta.key)
        #expect((plist?["metadata"] as? [String: String]) == meta.metadata)
    }

    /// The in-place reader tells the fields it reads by loading words from the name's string
    /// object: each of its names, and only those, is recognised, whatever byte differs.
    /// A store writes `.meta` files with a writer of its own (no `Value` tree): it must write the
    /// generic writer's bytes exactly, with and without an inline body between head and tail.
    @Test(arguments: 0..<samples.count)
    func theStoresWriterWritesTheGenericWritersBytes(index: Int) throws {
        let meta = Self.samples[index]
        for inline in [nil, 0, 5, 14, 15, 255, 70_000] as [Int?] {
            let parts = meta.encodedParts(inlineBodyCount: inline)
            let generic = BinaryPropertyList.encodeSplit(meta.plist(body: inline.map { .externalData(count: $0) }))
            #expect(parts.head == generic.head, "inline \(String(describing: inline))")
            #expect(parts.tail == generic.tail, "inline \(String(describing: inline))")
        }
        // The whole file, as `updateMetadata` writes it, is the general writer's too.
        if let body = meta.inlineBody {
            let generic = BinaryPropertyList.encodeSplit(meta.plist(body: .data(body)))
            #expect(meta.encoded() == generic.head + generic.tail)
        }
        // And what it writes decodes back, with the body put between the parts.
        var expected = meta
        expected.inlineBody = meta.inlineBody ?? Array("body".utf8)
        expected.size = Int64(expected.inlineBody!.count)
        let parts = expected.encodedParts(inlineBodyCount: expected.inlineBody!.count)
        let whole = parts.head + expected.inlineBody! + parts.tail
        #expect(whole.withUnsafeBytes { EntryMetadata.decode($0) } == expected)
    }

    @Test func theInPlaceReaderKnowsItsFieldNamesAndNoOthers() {
        let fields: [String: UInt16] = ["key": 1, "size": 2, "checksum": 4, "format": 8, "expires": 16, "body": 32,
                                        "created": 64, "accessed": 128, "metadata": 256]
        for (name, bit) in fields {
            BinaryPropertyList.encodeString(name).withUnsafeBytes {
                #expect(EntryMetadata.ReadView.field(named: $0) == bit, "\(name)")
            }
            var object = BinaryPropertyList.encodeString(name)
            for position in object.indices {
                for flip: UInt8 in [0x01, 0x20, 0x80] {
                    object[position] ^= flip
                    object.withUnsafeBytes {
                        #expect(EntryMetadata.ReadView.field(named: $0) == 0, "\(name), byte \(position) ^ \(flip)")
                    }
                    object[position] ^= flip
                }
            }
        }
        for other in ["", "k", "keys", "metadatas", "create", "accesses", "formats", "expire", "checksums"] {
            BinaryPropertyList.encodeString(other).withUnsafeBytes {
                #expect(EntryMetadata.ReadView.field(named: $0) == 0, "\(other)")
            }
        }
    }

    /// Every truncation and many corruptions of a valid file are rejected or decoded without a
    /// crash, and the in-place reader never accepts what the full decoder rejects.
    @Test func damagedMetadataIsRejectedWithoutCrashing() {
        let bytes = Self.samples[1].encoded()
        for length in 0..<bytes.count {
            let prefix = Array(bytes[0..<length])
            prefix.withUnsafeBytes { buffer in
                _ = EntryMetadata.decode(buffer)
                _ = EntryMetadata.ReadView.parse(buffer)
            }
        }
        var state: UInt64 = 1
        for _ in 0..<5000 {
            var damaged = bytes
            for _ in 0..<3 {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                damaged[Int(state >> 33) % damaged.count] = UInt8(truncatingIfNeeded: state >> 17)
            }
            damaged.withUnsafeBytes { buffer in
                let full = EntryMetadata.decode(buffer)
                let view = EntryMetadata.ReadView.parse(buffer)
                if let full, let view {
                    #expect(view.size == full.size && view.checksum == full.checksum)
                }
            }
        }
    }

    /// A file naming one of the entry's fields twice says two things about it: the full decoder
    /// (rebuild scan, verify, inspector) rejects it, and so does the read path, instead of each
    /// believing another occurrence. Found by fuzzing
    /// (FuzzMetadata): with "format" given twice the decoder took the first and accepted the
    /// file, the read path took the second and rejected it; with "key" or "size" twice they
    /// could read different values.
    @Test func aFieldGivenTwiceIsRejectedByBothReaders() throws {
        let bytes = Self.samples[1].encoded()
        // The top dictionary's marker (nine pairs), then its nine key references, then the values'.
        try #require(bytes[8] == 0xD9)
        let names = ["format", "key", "size", "checksum", "created", "accessed", "expires", "metadata", "body"]
        for field in 0..<9 {
            for other in 0..<9 where other != field {
                var damaged = bytes
                damaged[9 + other] = bytes[9 + field]
                damaged.withUnsafeBytes { buffer in
                    #expect(EntryMetadata.decode(buffer) == nil, "\(names[field]) named twice")
                    #expect(EntryMetadata.ReadView.parse(buffer) == nil, "\(names[field]) named twice")
                }
            }
        }
    }
}

struct HostilePropertyListTests {
    /// A trailer and offset table pointing at one object, then that object's bytes.
    func plist(object: [UInt8], extra: [[UInt8]] = [], refSize: UInt8 = 1) -> [UInt8] {
        var bytes = Array("bplist00".utf8)
        var offsets: [Int] = []
        for o in [object] + extra {
            offsets.append(bytes.count)
            bytes += o
        }
        let table = bytes.count
        for o in offsets { bytes += [UInt8(o >> 8), UInt8(o & 0xFF)] }
        bytes += [0, 0, 0, 0, 0, 0, 2, refSize]
        bytes += withUnsafeBytes(of: UInt64(offsets.count).bigEndian) { Array($0) }
        bytes += withUnsafeBytes(of: UInt64(0).bigEndian) { Array($0) }
        bytes += withUnsafeBytes(of: UInt64(table).bigEndian) { Array($0) }
        return bytes
    }

    @Test func hugeCountsAreRejectedNotTrapped() {
        // A dictionary claiming 2^60 entries; a string claiming 2^60 characters.
        let counts: [[UInt8]] = [[0xDF, 0x13, 0x10, 0, 0, 0, 0, 0, 0, 0], [0x6F, 0x13, 0x10, 0, 0, 0, 0, 0, 0, 0]]
        for object in counts {
            let bytes = plist(object: object)
            bytes.withUnsafeBytes { buffer in
                #expect(BinaryPropertyList.decode(buffer) == nil)
                #expect(EntryMetadata.ReadView.parse(buffer) == nil)
            }
        }
    }

    /// Found by fuzzing (FuzzMetadata): with eight-byte references, one above `Int.max` trapped
    /// when it was converted to an object index.
    @Test func referencesBeyondIntAreRejectedNotTrapped() {
        let huge = [UInt8](repeating: 0xFF, count: 8)
        let zero = [UInt8](repeating: 0, count: 8)
        let objects: [[UInt8]] = [
            [0xA1] + huge,  // an array of one reference
            [0xD1] + huge + zero,  // a dictionary whose key is that reference
            [0xD1] + zero + huge,  // ... whose value is
        ]
        for object in objects {
            let bytes = plist(object: object, refSize: 8)
            bytes.withUnsafeBytes { buffer in
                #expect(BinaryPropertyList.decode(buffer) == nil)
                #expect(EntryMetadata.decode(buffer) == nil)
                #expect(EntryMetadata.ReadView.parse(buffer) == nil)
            }
        }
    }

    /// Shared references to one large object must not multiply the memory a decode takes: a
    /// `.meta` of S bytes could decode into about S²/18 bytes (a terabyte for the largest
    /// `.meta` a cache accepts), as the visit budget bounds objects, not bytes. Here 18 KB
    /// would decode into 25 MB.
    @Test func sharedReferencesCannotMultiplyTheBytesDecoded() {
        let dataSize = 5000, references = 5000, objectCount = 1250
        var bytes = Array("bplist00".utf8)
        let arrayOffset = bytes.count
        bytes += [0xAF, 0x11, UInt8(references >> 8), UInt8(references & 0xFF)]
        for _ in 0..<references { bytes += [0, 1] }  // two-byte references, all to object 1
        let dataOffset = bytes.count
        bytes += [0x4F, 0x11, UInt8(dataSize >> 8), UInt8(dataSize & 0xFF)] + [UInt8](repeating: 0x61, count: dataSize)
        let table = bytes.count
        // Object 0 the array, every other entry the data object: enough objects for the visits.
        for index in 0..<objectCount {
            let offset = index == 0 ? arrayOffset : dataOffset
            bytes += [UInt8(offset >> 8), UInt8(offset & 0xFF)]
        }
        bytes += [0, 0, 0, 0, 0, 0, 2, 2]
        bytes += withUnsafeBytes(of: UInt64(objectCount).bigEndian) { Array($0) }
        bytes += withUnsafeBytes(of: UInt64(0).bigEndian) { Array($0) }
        bytes += withUnsafeBytes(of: UInt64(table).bigEndian) { Array($0) }
        bytes.withUnsafeBytes { buffer in
            #expect(BinaryPropertyList.decode(buffer) == nil)
        }
    }

    @Test func sharedReferencesCannotMakeDecodingExplode() {
        // Object i is an array holding 14 references to object i + 1: 30 levels would be 14^30
        // visits without a budget.
        var objects: [[UInt8]] = []
        for i in 0..<30 { objects.append([0xAE] + [UInt8](repeating: UInt8(i + 1), count: 14)) }
        objects.append([0x10, 1])
        let bytes = plist(object: objects[0], extra: Array(objects.dropFirst()))
        bytes.withUnsafeBytes { buffer in
            #expect(BinaryPropertyList.decode(buffer) == nil)
        }
    }
}

struct SessionMarkerTests {
    /// A session that dies after a clean close of the previous one is still recognised as a crash.
    @Test func openingCutsTheCloseRecordSoALaterCrashIsSeen() throws {
        let dir = TemporaryDirectory()
        try makeClosedCache(dir)
        let journalPath = dir.cache.appendingPathComponent("journal").path
        let closed = try readFile(journalPath)
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(!cache.statistics.recovery.wasUncleanShutdown)
        let open = try readFile(journalPath)
        #expect(open.count == closed.count - Journal.recordOverhead)
        #expect(open.withUnsafeBytes { Journal.replay($0) { _ in } }.endedCleanly == false)
        try cache.close()
        #expect(cache.data(for: "k") == nil)
        #expect(throws: DiskCacheError.self) { try cache.store(bytes("late"), for: "k") }
        let reopened = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(!reopened.statistics.recovery.wasUncleanShutdown)
        #expect(reopened.data(for: "k") == bytes("v"))
    }
}

extension EntryMetadata {
    /// The entry's dictionary as a `BinaryPropertyList.Value`, written out field by field as
    /// docs/on-disk-format.md lists them: what the store's own writer is checked against
    /// through the general writer (`BinaryPropertyList.encodeSplit`).
    func plist(body: BinaryPropertyList.Value?) -> BinaryPropertyList.Value {
        func date(_ milliseconds: Int64) -> BinaryPropertyList.Value { .date(Double(milliseconds) / 1000 - 978_307_200) }
        var pairs: [(String, BinaryPropertyList.Value)] = [
            ("format", .integer(Self.formatVersion)),
            ("key", .string(key)),
            ("size", .integer(size)),
            ("checksum", .integer(Int64(bitPattern: checksum))),
            ("created", date(created)),
            ("accessed", date(accessed)),
        ]
        if let expires { pairs.append(("expires", date(expires))) }
        pairs.append(("metadata", .dictionary(metadata.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })))
        if let body { pairs.append(("body", body)) }
        return .dictionary(pairs)
    }
}

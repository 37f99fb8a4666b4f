import Foundation
import ToolSupport

/// A request trace for `diskcache bench --trace`: which object each request asks for (objects
/// numbered densely from 0 in order of first appearance) and its size when the trace gives one.
///
/// Read from libCacheSim's `oracleGeneral` binary form (24 bytes a request: u32 time, u64 id,
/// u32 size, i64 next access, little-endian; chosen for files ending in `.bin`), its CSV form
/// (a header naming the id column, `obj_id`, `id`, `key` or `lbn`, and optionally `obj_size` or
/// `size`), a plain text form (one key a line, optionally followed by a size), or made up:
/// ``synthetic(_:)``.
package struct BenchTrace {
    package var name: String
    /// Per request: the object's number.
    var objects: [Int32]
    /// Per request: its size in bytes (all 1 when the trace gives none).
    var sizes: [UInt32]
    package var objectCount: Int
    var hasSizes: Bool

    package var requestCount: Int { objects.count }

    /// Per request: the position of the next request for the same object (`Int32.max`: none).
    func nextUses() -> [Int32] {
        var next = [Int32](repeating: Int32.max, count: objects.count)
        var seen = [Int32](repeating: Int32.max, count: objectCount)
        for position in stride(from: objects.count - 1, through: 0, by: -1) {
            let object = Int(objects[position])
            next[position] = seen[object]
            seen[object] = Int32(position)
        }
        return next
    }

    /// Objects requested exactly once.
    func oneHitWonders() -> Int {
        var counts = [UInt8](repeating: 0, count: objectCount)
        for object in objects where counts[Int(object)] < 2 { counts[Int(object)] += 1 }
        return counts.reduce(0) { $0 + ($1 == 1 ? 1 : 0) }
    }

    package struct Error: Swift.Error, CustomStringConvertible {
        package var description: String
    }

    // MARK: - Reading

    package static func load(_ argument: String) throws -> BenchTrace {
        if argument.hasPrefix("synthetic") { return try synthetic(argument) }
        guard let data = FileManager.default.contents(atPath: argument) else {
            throw Error(description: "--trace: cannot read \(argument)")
        }
        let name = (argument as NSString).lastPathComponent
        if argument.hasSuffix(".bin") { return try oracleGeneral(data, name: name) }
        if argument.hasSuffix(".csv") { return try csv(data, name: name) }
        return try text(data, name: name)
    }

    /// Numbers objects densely as they first appear.
    private struct Numbering {
        var numbers: [UInt64: Int32] = [:]
        mutating func number(_ id: UInt64) -> Int32 {
            if let number = numbers[id] { return number }
            let number = Int32(numbers.count)
            numbers[id] = number
            return number
        }
    }

    static func oracleGeneral(_ data: Data, name: String) throws -> BenchTrace {
        let recordSize = 24
        guard data.count % recordSize == 0, !data.isEmpty else {
            throw Error(description: "--trace: \(name) is not libCacheSim's oracleGeneral form (24-byte records)")
        }
        var numbering = Numbering()
        var objects: [Int32] = [], sizes: [UInt32] = []
        objects.reserveCapacity(data.count / recordSize)
        sizes.reserveCapacity(data.count / recordSize)
        try data.withUnsafeBytes { bytes in
            for offset in stride(from: 0, to: bytes.count, by: recordSize) {
                let id = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt64.self).littleEndian
                let size = bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self).littleEndian
                guard numbering.numbers.count < Int32.max - 1 else { throw Error(description: "--trace: too many objects") }
                objects.append(numbering.number(id))
                sizes.append(max(1, size))
            }
        }
        return BenchTrace(name: name, objects: objects, sizes: sizes, objectCount: numbering.numbers.count, hasSizes: true)
    }

    static func csv(_ data: Data, name: String) throws -> BenchTrace {
        var lines = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline)
        guard let header = lines.first else { throw Error(description: "--trace: \(name) is empty") }
        let columns = header.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        guard let idColumn = columns.firstIndex(where: { ["obj_id", "id", "key", "lbn", "object"].contains($0) }) else {
            throw Error(description: "--trace: \(name)'s header names no id column (obj_id, id, key, lbn or object)")
        }
        let sizeColumn = columns.firstIndex(where: { ["obj_size", "size"].contains($0) })
        lines.removeFirst()
        var numbering = Numbering()
        var objects: [Int32] = [], sizes: [UInt32] = []
        for line in lines {
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            guard idColumn < fields.count else { continue }
            objects.append(numbering.number(stableID(fields[idColumn])))
            let size = sizeColumn.flatMap { $0 < fields.count ? UInt32(fields[$0].trimmingCharacters(in: .whitespaces)) : nil }
            sizes.append(max(1, size ?? 1))
        }
        guard !objects.isEmpty else { throw Error(description: "--trace: \(name) has no requests") }
        return BenchTrace(name: name, objects: objects, sizes: sizes, objectCount: numbering.numbers.count, hasSizes: sizeColumn != nil)
    }

    static func text(_ data: Data, name: String) throws -> BenchTrace {
        var numbering = Numbering()
        var objects: [Int32] = [], sizes: [UInt32] = []
        var hasSizes = false
        for line in String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline) {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "," })
            guard let key = fields.first else { continue }
            objects.append(numbering.number(stableID(key)))
            if fields.count > 1, let size = UInt32(fields[1]) {
                sizes.append(max(1, size))
                hasSizes = true
            } else {
                sizes.append(1)
            }
        }
        guard !objects.isEmpty else { throw Error(description: "--trace: \(name) has no requests") }
        return BenchTrace(name: name, objects: objects, sizes: sizes, objectCount: numbering.numbers.count, hasSizes: hasSizes)
    }

    /// A key's number: itself when it is one, else a hash of its bytes.
    private static func stableID(_ field: Substring) -> UInt64 {
        let trimmed = field.trimmingCharacters(in: .whitespaces)
        if let number = UInt64(trimmed) { return number }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a
        for byte in trimmed.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }

    // MARK: - Synthetic

    /// `synthetic[:name=value,...]`: a CDN-like trace. Requests go to `objects` objects with
    /// Zipf(`zipf`) popularity, except a share `onehit` of them, each for an object never asked
    /// for again, and every `scan-every` requests a scan of `scan-length` objects from a cold
    /// range, each asked for once per scan (the range is walked across scans). Seeded by `seed`.
    /// Defaults: objects=100000, requests=1000000, zipf=0.8, onehit=0.03, scan-every=100000,
    /// scan-length=5000, seed=1.
    static func synthetic(_ argument: String) throws -> BenchTrace {
        var settings: [String: Double] = ["objects": 100_000, "requests": 1_000_000, "zipf": 0.8, "onehit": 0.03,
                                          "scan-every": 100_000, "scan-length": 5_000, "seed": 1]
        let specification = argument.dropFirst("synthetic".count).drop { $0 == ":" }
        for pair in specification.split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, settings[parts[0]] != nil, let value = Double(parts[1]), value >= 0 else {
                throw Error(description: "--trace synthetic: expected name=value pairs among \(settings.keys.sorted().joined(separator: ", ")); got '\(pair)'")
            }
            settings[parts[0]] = value
        }
        let objectCount = max(1, Int(settings["objects"]!)), requestCount = max(1, Int(settings["requests"]!))
        let scanEvery = Int(settings["scan-every"]!), scanLength = Int(settings["scan-length"]!)
        let oneHit = min(1, settings["onehit"]!)
        let seed = UInt64(settings["seed"]!)
        let zipf = BenchZipf(count: objectCount, exponent: settings["zipf"]!, seed: seed)
        var random = SplitMix64(seed: seed)
        var objects: [Int32] = []
        objects.reserveCapacity(requestCount)
        // Numbers past the popular objects: one-hit wonders and the scans' cold range.
        let coldRange = max(1, scanLength * 4)
        var nextWonder = objectCount + coldRange
        var scanCursor = 0
        while objects.count < requestCount {
            if scanEvery > 0, scanLength > 0, !objects.isEmpty, objects.count % scanEvery == 0 {
                for _ in 0..<min(scanLength, requestCount - objects.count) {
                    objects.append(Int32(objectCount + scanCursor % coldRange))
                    scanCursor += 1
                }
                continue
            }
            if random.unit() < oneHit {
                objects.append(Int32(nextWonder))
                nextWonder += 1
            } else {
                objects.append(Int32(zipf.next(&random)))
            }
        }
        // Renumber densely in order of first appearance.
        var numbering = Numbering()
        let dense = objects.map { numbering.number(UInt64($0)) }
        let name = "synthetic(objects=\(objectCount),requests=\(requestCount),zipf=\(settings["zipf"]!),onehit=\(oneHit),scan=\(scanLength)/\(scanEvery),seed=\(seed))"
        return BenchTrace(name: name, objects: dense, sizes: [UInt32](repeating: 1, count: dense.count),
                          objectCount: numbering.numbers.count, hasSizes: false)
    }
}

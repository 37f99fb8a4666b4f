@testable import DiskCache
import Foundation
import Testing

/// One flipped bit inside a stored body, inline in the `.meta` file or in its own `.body` file,
/// read back through every public read path: each must miss (or, for `verify`, report the
/// damage), never return the damaged bytes.
///
/// The damaged byte is found by content, not through the cache's layout: the file holding the
/// body's bytes (exactly, for a `.body` file; as a run inside the property list, for an inline
/// body), with the flip in the middle of that run, so that it always hits the body and never
/// the property list's structure.
struct InlineIntegrityTests {
    enum Placement: String, CaseIterable, CustomTestStringConvertible, Sendable {
        /// The body is inside the `.meta` file (its size is at most the inline threshold).
        case inline
        /// The body has a file of its own.
        case separateFile
        var testDescription: String { rawValue }
        var inlineThreshold: Int { self == .inline ? 4096 : 0 }
    }

    enum ReadPath: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case data = "DiskCache.data(for:)"
        case dataAndEntry = "DiskCache.dataAndEntry(for:)"
        case tieredData = "TieredCache.data(for:)"
        case tieredRecord = "TieredCache.record(for:)"
        case verify = "DiskCache.verify()"
        var testDescription: String { rawValue }
    }

    static let victim = "victim"
    static let bystander = "bystander"
    static let value = randomData(count: 1000, seed: 41)
    static let otherValue = randomData(count: 700, seed: 42)

    /// The regular files under `root`, recursively.
    static func files(under root: String) -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: root) else { return [] }
        var found: [String] = []
        while let relative = enumerator.nextObject() as? String {
            let path = root + "/" + relative
            if (try? FileManager.default.attributesOfItem(atPath: path)[.type] as? FileAttributeType) == .typeRegular {
                found.append(path)
            }
        }
        return found
    }

    /// Flips one bit in the middle of the one stored copy of `body` under `root`; returns the file.
    static func damage(_ body: Data, under root: String, placement: Placement) throws -> String {
        let needle = [UInt8](body)
        var hits: [(path: String, offset: Int)] = []
        for path in files(under: root) {
            let bytes = try readFile(path)
            switch placement {
            case .separateFile:
                if bytes == needle { hits.append((path, 0)) }
            case .inline:
                guard path.hasSuffix(".meta"), bytes.count > needle.count else { continue }
                for start in 0...(bytes.count - needle.count) where bytes[start] == needle[0] {
                    if bytes[start..<start + needle.count].elementsEqual(needle) { hits.append((path, start)) }
                }
            }
        }
        try #require(hits.count == 1, "expected the body in exactly one place, found \(hits)")
        var bytes = try readFile(hits[0].path)
        bytes[hits[0].offset + needle.count / 2] ^= 0x01
        try writeFile(hits[0].path, bytes)
        return hits[0].path
    }

    @Test(arguments: Placement.allCases, ReadPath.allCases)
    func damagedBodyIsNeverReturned(placement: Placement, path: ReadPath) throws {
        let dir = TemporaryDirectory()
        let configuration = DiskCache.Configuration.testing(inlineThreshold: placement.inlineThreshold)
        do {
            let cache = try DiskCache(directory: dir.cache, configuration: configuration)
            try cache.store(Self.value, for: Self.victim, metadata: ["m": "1"])
            try cache.store(Self.otherValue, for: Self.bystander)
            try cache.close()
        }
        let damaged = try Self.damage(Self.value, under: dir.cache.path, placement: placement)
        #expect(damaged.hasSuffix(placement == .inline ? ".meta" : ".body"))

        switch path {
        case .data, .dataAndEntry, .verify:
            let cache = try DiskCache(directory: dir.cache, configuration: configuration)
            switch path {
            case .data:
                #expect(cache.data(for: Self.victim) == nil)
            case .dataAndEntry:
                #expect(cache.dataAndEntry(for: Self.victim) == nil)
            default:
                let report = try cache.verify()
                #expect(!report.isHealthy)
                #expect(report.problems.map(\.kind) == [.checksumMismatch], "\(report.problems)")
                #expect(report.problems.first?.key == Self.victim)
                // Reported, not yet removed: a read then misses.
                #expect(cache.data(for: Self.victim) == nil)
            }
            #expect(cache.statistics.corruptEntriesRemoved == 1)
            #expect(cache.data(for: Self.victim) == nil)
            #expect(cache.data(for: Self.bystander) == Self.otherValue)
            try cache.close()
        case .tieredData, .tieredRecord:
            let tiered = try TieredCache(memoryCapacity: 1 << 20, diskCapacity: 1 << 30, directory: dir.cache,
                                         configuration: configuration)
            if path == .tieredData {
                #expect(tiered.data(for: Self.victim) == nil)
            } else {
                #expect(tiered.record(for: Self.victim) == nil)
            }
            // Nothing damaged was promoted into memory either.
            #expect(tiered.data(for: Self.victim) == nil)
            #expect(tiered.disk?.statistics.corruptEntriesRemoved == 1)
            #expect(tiered.record(for: Self.bystander)?.data == Self.otherValue)
            try tiered.disk?.close()
        }
    }
}

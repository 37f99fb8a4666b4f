@testable import DiskCache
import Testing

/// The in-memory index against a `Dictionary` doing the same operations, with hashes chosen so
/// that probes collide: many share a home bucket, and many share the tag kept beside the
/// position in the table, so every path of the lookup (empty bucket, other tag, same tag and
/// other hash, the hash itself) and of the backward-shift removal is taken.
struct IndexTests {
    static func entry(_ n: Int) -> IndexEntry {
        IndexEntry(size: Int64(n), isInline: n % 2 == 0, slot: UInt8(n % 2), created: Int64(n) * 1000,
                   checksum: UInt64(n) &* 0x9E37_79B9, accessed: 0, expires: nil, metaSize: 100)
    }

    /// A hash from a few random bits only: `low` and the high bits the home bucket reads take
    /// 16 values, the top bits (the tag) 4, so a few thousand keys collide everywhere.
    static func crowdedHash(_ random: inout SystemRandomNumberGenerator) -> KeyHash {
        let top = UInt64.random(in: 0..<4, using: &random) << 62
        let middle = UInt64.random(in: 0..<1024, using: &random) << 20
        return KeyHash(high: top | middle, low: UInt64.random(in: 0..<16, using: &random))
    }

    @Test func agreesWithADictionaryThroughInsertsRemovalsGrowthAndShrinking() {
        var random = SystemRandomNumberGenerator()
        var index = Index(blockSize: 4096)
        var model: [KeyHash: IndexEntry] = [:]
        var known: [KeyHash] = []
        for step in 0..<60_000 {
            let roll = Int.random(in: 0..<10, using: &random)
            let hash = roll < 7 || known.isEmpty ? Self.crowdedHash(&random) : known.randomElement(using: &random)!
            if roll < 6 {
                let entry = Self.entry(step)
                #expect(index.insert(entry, for: hash) == model.updateValue(entry, forKey: hash))
                known.append(hash)
            } else if roll < 9 {
                #expect(index.remove(hash) == model.removeValue(forKey: hash))
            } else {
                index.touch(hash, atMilliseconds: Int64(step) * 1000)
                model[hash]?.accessedSeconds = UInt32(step)
            }
            if step % 15_000 == 14_999 {
                // Emptied down to a few, then shrunk: the table's size (and the tag's width) changes.
                for hash in model.keys.shuffled(using: &random).dropFirst(50) {
                    #expect(index.remove(hash) == model.removeValue(forKey: hash))
                }
                index.shrinkToFit()
            }
        }
        #expect(index.count == model.count)
        for hash in Set(known) { #expect(index[hash] == model[hash]) }
        #expect(index.logicalSize == model.values.reduce(0) { $0 + $1.size })
        var seen = 0
        for (hash, entry) in index.entries {
            #expect(model[hash] == entry)
            seen += 1
        }
        #expect(seen == model.count)
    }

    @Test func findsEveryEntryOfALargeIndexAndNoneThatWasNotInserted() {
        var random = SystemRandomNumberGenerator()
        var index = Index(blockSize: 4096)
        var hashes: [KeyHash] = []
        for n in 0..<200_000 {
            let hash = KeyHash(high: random.next(), low: random.next())
            hashes.append(hash)
            index.insert(Self.entry(n), for: hash)
        }
        for (n, hash) in hashes.enumerated() { #expect(index[hash] == Self.entry(n)) }
        // The same top bits (tag) and home bucket as a stored hash, another hash: not found.
        for hash in hashes.prefix(1000) {
            #expect(index[KeyHash(high: hash.high, low: hash.low ^ 1 << 40)] == nil)
        }
    }
}

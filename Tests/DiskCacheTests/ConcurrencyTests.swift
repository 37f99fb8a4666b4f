@testable import DiskCache
import DiskCacheLocking
import Foundation
import Testing
import TestSupport

struct ConcurrencyTests {
    /// Many threads read, write and remove overlapping keys. Every value read must be one that
    /// was written for that key, and afterwards the index, the files and a reopen must agree.
    @Test(arguments: [0, 1 << 20])
    func concurrentReadersAndWritersKeepTheCacheConsistent(inlineThreshold: Int) throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: inlineThreshold))
        let keys = 40
        let threads = 8
        let operations = 400
        let wrongValues = LockedCounter()
        let failures = LockedCounter()
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            var state = UInt64(thread + 1)
            for _ in 0..<operations {
                state = state &* 6_364_136_223_846_793_005 &+ 1
                let k = Int(state >> 33) % keys
                let key = "key-\(k)"
                switch (state >> 20) % 10 {
                case 0:
                    do { try cache.removeValue(for: key) } catch { failures.increment() }
                case 1, 2, 3:
                    let value = Data("\(key)|\(thread)|\(state)|".utf8) + randomData(count: Int(state % 3000), seed: state)
                    do { try cache.store(value, for: key) } catch { failures.increment() }
                default:
                    if let value = cache.data(for: key) {
                        // Self-describing values: the prefix names the key, the rest follows from the seed.
                        // Split bytes, not Characters: a random byte after "|" may combine with it.
                        let parts = value.prefix(80).split(separator: UInt8(ascii: "|"), maxSplits: 3, omittingEmptySubsequences: false)
                            .map { String(decoding: $0, as: UTF8.self) }
                        let valid = parts.count == 4 && parts[0] == key && {
                            guard let seed = UInt64(parts[2]) else { return false }
                            let header = Data("\(key)|\(parts[1])|\(seed)|".utf8)
                            return value == header + randomData(count: Int(seed % 3000), seed: seed)
                        }()
                        if !valid { wrongValues.increment() }
                    }
                }
            }
        }
        #expect(wrongValues.value == 0)
        #expect(failures.value == 0)
        #expect(cache.statistics.corruptEntriesRemoved == 0)
        let live = (0..<keys).filter { cache.data(for: "key-\($0)") != nil }
        #expect(live.count == cache.count)
        // Every live entry's files exist, and no entry files exist beyond them.
        var entryFiles = 0
        ShardScanner(layout: cache.layout).forEachEntryFile { _, _, _, _ in entryFiles += 1; return true }
        let expectedFiles = inlineThreshold == 0 ? 2 * live.count : live.count
        #expect(entryFiles == expectedFiles)
        let logical = cache.logicalSize
        try cache.close()
        let reopened = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(reopened.count == live.count)
        #expect(reopened.logicalSize == logical)
    }

    /// A read that found a slot's file part way through being written (by a write of the same
    /// value into the same slot in the same millisecond, whose commit equals the one the reader
    /// looked up) must not remove the entry once that write has finished: the damage is
    /// confirmed by reading again under the key's lock. Played step by step: the half-written
    /// file is made by hand, then "finished".
    @Test(arguments: [0, 1 << 20])
    func aReadThatMetAWriteInProgressDoesNotRemoveTheEntry(inlineThreshold: Int) throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache,
                                  configuration: .testing(inlineThreshold: inlineThreshold, clock: ManualClock()))
        let value = randomData(count: 20_000, seed: 1)
        try cache.store(value, for: "k")
        let hash = cache.configuration.keyHasher.hash("k")
        let seen = try #require(cache.state.withLock { $0.index[hash] })
        let files = EntryFiles(cache, key: "k")
        let path = seen.isInline ? files.meta : files.body
        let whole = try readFile(path)
        try writeFile(path, Array(whole.prefix(100)))  // the write, part way
        guard case .damaged = cache.readValue(hash, key: "k", expected: seen) else {
            Issue.record("a half-written file read as whole")
            return
        }
        try writeFile(path, whole)  // the write, finished
        #expect(!cache.removeIfUnchanged(hash, seen, key: "k"))
        #expect(cache.data(for: "k") == value)
        #expect(cache.statistics.corruptEntriesRemoved == 0)

        // Damage that is still there when read again is removed.
        try writeFile(path, Array(whole.prefix(100)))
        #expect(cache.data(for: "k") == nil)
        #expect(cache.statistics.corruptEntriesRemoved == 1)
    }
}

final class LockedCounter: @unchecked Sendable {  // unchecked: `count` is guarded by `lock`
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

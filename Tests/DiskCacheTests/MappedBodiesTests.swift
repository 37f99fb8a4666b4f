import CDiskCacheSupport
@testable import DiskCache
import Foundation
import Testing

/// Body files kept mapped for `checkedBody(for:)` (`DiskCache.mappedBodyCapacity`): the check
/// hashes the mapping, still catches every damaged byte, survives a file cut short under its
/// mapping, and never keeps a removed file's blocks past the store's removal or the next sweep.
struct MappedBodiesTests {
    func openCache(_ dir: TemporaryDirectory, capacity: Int64) throws -> DiskCache {
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 0))
        cache.mappedBodyCapacity = capacity
        return cache
    }

    /// A cache (64 MiB mapped) holding `bodies` (random bytes of each size), each checked once.
    func cacheWithCheckedBodies(_ dir: TemporaryDirectory, _ bodies: [(key: String, size: Int)]) throws -> DiskCache {
        let cache = try openCache(dir, capacity: 64 << 20)
        for (index, body) in bodies.enumerated() { try cache.store(randomData(count: body.size, seed: UInt64(index + 3)), for: body.key) }
        for body in bodies { try expectWholeFile(cache, body.key, size: body.size) }
        return cache
    }

    /// `key`'s checked body, which must be a whole file of `size` bytes (its descriptor closed).
    func expectWholeFile(_ cache: DiskCache, _ key: String, size: Int, sourceLocation: SourceLocation = #_sourceLocation) throws {
        guard let checked = try cache.checkedBody(for: key) else {
            Issue.record("no body", sourceLocation: sourceLocation)
            return
        }
        #expect(checked.size == Int64(size), sourceLocation: sourceLocation)
        guard case .file(let file) = checked.takeSource() else {
            Issue.record("not a file", sourceLocation: sourceLocation)
            return
        }
        var bytes = [UInt8](repeating: 0, count: size + 1)
        #expect(pread(file.fd, &bytes, size + 1, 0) == size, sourceLocation: sourceLocation)
    }

    func status(_ path: String) throws -> stat {
        var info = stat()
        try #require(lstat(path, &info) == 0)
        return info
    }

    @Test func aCheckedBodyIsHashedFromItsMappingWhichStaysForTheNextCheck() throws {
        let dir = TemporaryDirectory()
        let cache = try openCache(dir, capacity: 64 << 20)
        let sizes = ["small": 10 << 10, "medium": 100 << 10, "large": 1 << 20]
        for (key, size) in sizes { try cache.store(randomData(count: size, seed: UInt64(size)), for: key) }
        for _ in 0..<3 {
            for (key, size) in sizes { try expectWholeFile(cache, key, size: size) }
            // The small body is read (below the 64 KiB a mapping is worth); the others mapped once.
            let usage = cache.mappedBodies.usage
            #expect(usage.count == 2 && usage.bytes == Int64((100 << 10) + (1 << 20)))
        }
        #expect(cache.mappedBodies.holds(try status(EntryFiles(cache, key: "large").body)))
        #expect(!cache.mappedBodies.holds(try status(EntryFiles(cache, key: "small").body)))
        #expect(cache.statistics.corruptEntriesRemoved == 0)
    }

    @Test(arguments: [0, 150_000, 299_999])
    func aByteChangedUnderTheMappingIsCaughtAndTheFileUnmapped(offset: Int) throws {
        let dir = TemporaryDirectory()
        let cache = try cacheWithCheckedBodies(dir, [("k", 300_000), ("other", 100_000)])
        #expect(cache.mappedBodies.usage.count == 2)

        // In place, the same inode: the mapping shows the changed byte.
        let body = EntryFiles(cache, key: "k").body
        let fd = open(body, O_RDWR)
        try #require(fd >= 0)
        var byte: UInt8 = 0
        #expect(pread(fd, &byte, 1, off_t(offset)) == 1)
        byte ^= 0x20
        #expect(pwrite(fd, &byte, 1, off_t(offset)) == 1)
        close(fd)

        #expect(try !cache.hasCheckedBody(for: "k"))
        #expect(cache.statistics.corruptEntriesRemoved == 1)
        #expect(!cache.contains("k") && !FileManager.default.fileExists(atPath: body))
        #expect(cache.mappedBodies.usage.count == 1)
        try expectWholeFile(cache, "other", size: 100_000)
    }

    @Test func aFileCutShortUnderItsMappingEndsTheHashWithAnErrorNotTheProcess() throws {
        let dir = TemporaryDirectory()
        try FileManager.default.createDirectory(at: dir.cache, withIntermediateDirectories: true)
        let path = dir.cache.appendingPathComponent("file").path
        let bytes = randomData(count: 1 << 20, seed: 9)
        try bytes.write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDWR)
        try #require(fd >= 0)
        defer { close(fd) }
        let mapped = try #require(mmap(nil, 1 << 20, PROT_READ, MAP_SHARED, fd, 0))
        try #require(mapped != MAP_FAILED)
        defer { munmap(mapped, 1 << 20) }

        var hash: UInt64 = 0
        #expect(cdiskcache_hash_mapped(mapped, 1 << 20, &hash, 0) == 0)
        #expect(hash == bytes.withUnsafeBytes { cdiskcache_xxh3_64($0.baseAddress, $0.count) })
        #expect(ftruncate(fd, 8192) == 0)
        // Twice: the handler stays in place after the first fault it caught.
        for _ in 0..<2 {
            errno = 0
            #expect(cdiskcache_hash_mapped(mapped, 1 << 20, &hash, 0) == -1)
            #expect(errno == EFAULT)
        }
        // What is still in the file hashes as before.
        #expect(cdiskcache_hash_mapped(mapped, 8192, &hash, 0) == 0)
        #expect(hash == bytes.prefix(8192).withUnsafeBytes { cdiskcache_xxh3_64($0.baseAddress, $0.count) })
        // Copying as it hashes: the same error, part way through the copy.
        let copy = UnsafeMutableRawPointer.allocate(byteCount: 1 << 20, alignment: 64)
        defer { copy.deallocate() }
        errno = 0
        #expect(cdiskcache_copy_hash_mapped(mapped, 1 << 20, copy, &hash, 0) == -1)
        #expect(errno == EFAULT)
        #expect(cdiskcache_copy_hash_mapped(mapped, 8192, copy, &hash, 0) == 0)
        #expect(hash == bytes.prefix(8192).withUnsafeBytes { cdiskcache_xxh3_64($0.baseAddress, $0.count) })
        #expect(Data(bytes: copy, count: 8192) == bytes.prefix(8192))
    }

    /// With `copying`, a body checked through its mapping comes out as a copy of its bytes made
    /// as they were hashed, counted in the copies in flight until freed; above the limit, over
    /// the budget, or not mapped, as its file. A damaged body is never copied out.
    @Test func aBodyCheckedThroughItsMappingIsCopiedAsItIsHashedWhenAsked() throws {
        let dir = TemporaryDirectory()
        let cache = try cacheWithCheckedBodies(dir, [("k", 300_001), ("large", 2 << 20)])
        try cache.store(randomData(count: 1000, seed: 1), for: "small")
        let expected = randomData(count: 300_001, seed: 3)
        let before = cdiskcache_copies_in_flight()
        let copying = DiskCache.BodyCopying(limit: 1 << 20, budget: 64 << 20)
        do {
            guard let checked = try cache.checkedBody(for: "k", copying: copying) else { Issue.record("no body"); return }
            let size = checked.size
            guard case .copy(let copy) = checked.takeSource() else {
                Issue.record("not a copy")
                return
            }
            #expect(copy.withBytes { Data(bytes: $0, count: 300_001) } == expected && size == 300_001)
            #expect(cdiskcache_copies_in_flight() >= before + 300_001)
        }  // the copy is freed here
        // Above the limit, too small to be mapped, or over the budget: the file.
        for (key, copying) in [("large", copying), ("small", copying), ("k", DiskCache.BodyCopying(limit: 1 << 20, budget: 1000))] {
            guard let body = try cache.checkedBody(for: key, copying: copying) else { Issue.record("no body for \(key)"); continue }
            if case .copy = body.takeSource() { Issue.record("\(key) was copied") }
        }
        // A byte changed in place: no copy comes out, and the entry goes.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: EntryFiles(cache, key: "k").body))
        try handle.seek(toOffset: 150_000)
        handle.write(Data([expected[150_000] ^ 0x80]))
        try handle.close()
        #expect(try !cache.hasCheckedBody(for: "k", copying: copying))
        #expect(!cache.contains("k"))
    }

    @Test func replacingOrRemovingAnEntryUnmapsItsOldBody() throws {
        let dir = TemporaryDirectory()
        let cache = try cacheWithCheckedBodies(dir, [("k", 200_000)])
        let first = try status(EntryFiles(cache, key: "k").body)
        #expect(cache.mappedBodies.holds(first))

        try cache.store(randomData(count: 250_000, seed: 2), for: "k")
        #expect(cache.mappedBodies.usage.count == 0)
        try expectWholeFile(cache, "k", size: 250_000)
        #expect(cache.mappedBodies.holds(try status(EntryFiles(cache, key: "k").body)))

        try cache.removeValue(for: "k")
        #expect(cache.mappedBodies.usage.count == 0)
        try cache.close()
    }

    @Test func aSweepUnmapsBodiesRemovedBehindTheCachesBack() throws {
        let dir = TemporaryDirectory()
        let cache = try cacheWithCheckedBodies(dir, [("gone", 200_000), ("kept", 200_000)])
        // As another process would remove it: not through this cache.
        try FileManager.default.removeItem(atPath: EntryFiles(cache, key: "gone").body)
        #expect(cache.mappedBodies.usage.count == 2)
        cache.sweep()
        #expect(cache.mappedBodies.usage.count == 1)
        #expect(cache.mappedBodies.holds(try status(EntryFiles(cache, key: "kept").body)))
    }

    @Test func theCapacityBoundsWhatIsMappedLeastRecentlyCheckedFirst() throws {
        let dir = TemporaryDirectory()
        let cache = try openCache(dir, capacity: 1 << 20)
        let size = 200 << 10
        for i in 0..<8 { try cache.store(randomData(count: size, seed: UInt64(i)), for: "k\(i)") }
        let mapped = cache.mappedBodies
        for i in 0..<5 { try expectWholeFile(cache, "k\(i)", size: size) }
        #expect(mapped.usage.count == 5)
        try expectWholeFile(cache, "k0", size: size)
        // k5 does not fit: the least recently checked go until an eighth of the capacity is free
        // besides k5 (k1 and k2), and k0, checked again, stays.
        try expectWholeFile(cache, "k5", size: size)
        #expect(mapped.usage.count == 4 && mapped.usage.bytes == Int64(4 * size))
        for (i, held) in [(0, true), (1, false), (2, false), (3, true), (4, true), (5, true)] {
            #expect(mapped.holds(try status(EntryFiles(cache, key: "k\(i)").body)) == held, "k\(i)")
        }
        // A body larger than the whole capacity is read, not mapped.
        try cache.store(randomData(count: 2 << 20, seed: 99), for: "huge")
        try expectWholeFile(cache, "huge", size: 2 << 20)
        #expect(mapped.usage.count == 4)
        // Capacity 0 unmaps everything, and checks go on by reading.
        cache.mappedBodyCapacity = 0
        #expect(mapped.usage.count == 0 && mapped.usage.bytes == 0)
        for i in 0..<8 { try expectWholeFile(cache, "k\(i)", size: size) }
        #expect(mapped.usage.count == 0)
    }
}

import CDiskCacheSupport
@testable import DiskCache
import DiskCacheLocking
import Foundation
import Testing

/// Large bodies without loading them: stored from a file, from chunks or through a writer;
/// read as chunks or as a file handed out for a closure. Every way keeps the store's promises:
/// nothing half-written is ever read, an abort or a crash leaves no trace, a damaged body is
/// never passed off as whole.
struct StreamingTests {
    /// The names in the cache's `tmp/`.
    func temporaryNames(_ cache: DiskCache) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: cache.layout.temp)
    }

    func allChunks(_ chunks: DiskCache.Chunks) async throws -> [Data] {
        var received: [Data] = []
        for try await chunk in chunks { received.append(chunk) }
        return received
    }

    /// A body brought in is hashed through a mapping from 64 KiB to `mappedHashLimit` and read
    /// through a buffer otherwise: both give the file's XXH3-64, at the edges and past them.
    @Test(arguments: [1, 4097, (64 << 10) - 1, 64 << 10, (64 << 10) + 4097, (1 << 20) + 3,
                      Int(FileIO.mappedHashLimit), Int(FileIO.mappedHashLimit) + 1])
    func aFileHashesTheSameMappedOrRead(size: Int) throws {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(at: directory.cache, withIntermediateDirectories: true)
        let path = directory.cache.appendingPathComponent("file").path
        let bytes = randomData(count: size, seed: UInt64(size))
        try bytes.write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        let (hashedSize, checksum) = try DiskCache.hashFile(fd, path: path)
        #expect(hashedSize == Int64(size))
        #expect(checksum == bytes.withUnsafeBytes { cdiskcache_xxh3_64($0.baseAddress, $0.count) })
    }

    @Test func aFileIsCopiedInAndLeftWhereItWas() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        let body = randomData(count: 3 << 20 | 17, seed: 1)
        let source = dir.url.appendingPathComponent("source.bin")
        try body.write(to: source)
        try cache.store(contentsOf: source, for: "copy", metadata: ["kind": "video"])
        #expect(cache.data(for: "copy") == body)
        #expect(cache.entry(for: "copy")?.metadata == ["kind": "video"])
        #expect(try Data(contentsOf: source) == body)
        // The cache's copy is its own: changing the original changes nothing stored.
        try Data("changed".utf8).write(to: source)
        #expect(cache.data(for: "copy") == body)
        #expect(try temporaryNames(cache).isEmpty)
        #expect(try cache.verify().isHealthy)
    }

    /// On the cache's filesystem a move is a rename: the entry's body file is the very inode
    /// that was given, and the name it had is gone.
    @Test func aFileOnTheSameFilesystemIsMovedWithoutCopying() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        let body = randomData(count: 1 << 20, seed: 2)
        let source = dir.url.appendingPathComponent("source.bin")
        try body.write(to: source)
        let inode = try FileManager.default.attributesOfItem(atPath: source.path)[.systemFileNumber] as? UInt64
        try cache.store(contentsOf: source, for: "moved", transfer: .move)
        #expect(!fileExists(source.path))
        #expect(cache.data(for: "moved") == body)
        let stored = try FileManager.default.attributesOfItem(atPath: EntryFiles(cache, key: "moved").body)
        #expect(stored[.systemFileNumber] as? UInt64 == inode)
        #expect((stored[.posixPermissions] as? Int) == 0o600)
    }

    /// A file moved in with the size and checksum its writer computed is not hashed again: what
    /// it says is stored. A size that is not the file's is ignored (the file is hashed); a
    /// checksum that is not the bytes' makes the entry's reads misses, never wrong bytes.
    @Test func aWrittenBodysChecksumStandsForTheHashWhenItsSizeIsRight() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        let body = randomData(count: 300_000, seed: 4)
        let checksum = body.withUnsafeBytes { cdiskcache_xxh3_64($0.baseAddress, $0.count) }
        func moveIn(_ key: String, _ written: DiskCache.WrittenBody) throws {
            let source = dir.url.appendingPathComponent("\(key).bin")
            try body.write(to: source)
            try cache.store(contentsOf: source, for: key, metadata: [:], expires: nil, transfer: .move, written: written)
            #expect(!fileExists(source.path))
        }
        try moveIn("right", .init(size: Int64(body.count), checksum: checksum))
        #expect(cache.data(for: "right") == body)
        try moveIn("wrong size", .init(size: Int64(body.count) + 1, checksum: checksum ^ 1))
        #expect(cache.data(for: "wrong size") == body)
        try moveIn("wrong checksum", .init(size: Int64(body.count), checksum: checksum ^ 1))
        #expect(cache.data(for: "wrong checksum") == nil)
        #expect(cache.data(for: "right") == body && cache.data(for: "wrong size") == body)
    }

    /// A file with a second name is copied, so that nobody can change what the cache holds
    /// through the other name; the given name is removed as a move promises.
    @Test func aFileWithAnotherNameIsCopiedNotMoved() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        let body = randomData(count: 200_000, seed: 3)
        let source = dir.url.appendingPathComponent("source.bin")
        let other = dir.url.appendingPathComponent("other.bin")
        try body.write(to: source)
        try FileManager.default.linkItem(at: source, to: other)
        try cache.store(contentsOf: source, for: "k", transfer: .move)
        #expect(!fileExists(source.path))
        try Data("changed through the other name".utf8).write(to: other, options: [])
        #expect(cache.data(for: "k") == body)
    }

    /// A move that is refused leaves the file where it was, and the earlier value stays.
    @Test func aFailedMoveGivesTheFileBack() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        try cache.store(bytes("earlier"), for: "k")
        let body = randomData(count: 100_000, seed: 4)
        let source = dir.url.appendingPathComponent("source.bin")
        try body.write(to: source)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: source.path)
        // Metadata too large for an entry: refused before the file is touched. (A failure after
        // the move, which gives the file back, is in RealVolumeTests.)
        let huge = ["x": String(repeating: "y", count: 5 << 20)]
        #expect(throws: DiskCacheError.self) {
            try cache.store(contentsOf: source, for: "k", metadata: huge, transfer: .move)
        }
        #expect(try Data(contentsOf: source) == body)
        #expect(try FileManager.default.attributesOfItem(atPath: source.path)[.posixPermissions] as? Int == 0o644)
        #expect(cache.data(for: "k") == bytes("earlier"))
        #expect(try temporaryNames(cache).isEmpty)
    }

    @Test func whatIsNotARegularFileIsRefusedClearly() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        try cache.store(bytes("earlier"), for: "k")
        do {
            try cache.store(contentsOf: dir.url.appendingPathComponent("missing"), for: "k")
            Issue.record("a missing file was stored")
        } catch let error as DiskCacheError {
            #expect(error.code == .notFound)
        }
        for transfer in [DiskCache.FileTransfer.copy, .move] {
            do {
                try cache.store(contentsOf: dir.cache, for: "k", transfer: transfer)
                Issue.record("a directory was stored")
            } catch let error as DiskCacheError {
                #expect(error.code == .invalidArgument)
            }
        }
        #expect(throws: DiskCacheError.self) { try cache.store(contentsOf: URL(string: "https://example.com/x")!, for: "k") }
        #expect(cache.data(for: "k") == bytes("earlier"))
        #expect(try temporaryNames(cache).isEmpty)
    }

    @Test func aWriterCommitsOnlyWhenToldAndAnAbortLeavesNoTrace() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        try cache.store(bytes("earlier"), for: "k")
        let body = randomData(count: 2 << 20, seed: 5)
        let writer = try cache.makeWriter(for: "k", metadata: ["part": "all"])
        for start in stride(from: 0, to: body.count, by: 300_000) {
            try writer.append(body[start..<min(body.count, start + 300_000)])
            #expect(cache.data(for: "k") == bytes("earlier"))
        }
        #expect(writer.size == Int64(body.count))
        try writer.commit()
        #expect(cache.data(for: "k") == body)
        #expect(cache.entry(for: "k")?.metadata == ["part": "all"])
        #expect(throws: DiskCacheError.self) { try writer.append(Data([1])) }
        #expect(throws: DiskCacheError.self) { try writer.commit() }

        let aborted = try cache.makeWriter(for: "k")
        try aborted.append(Data(repeating: 1, count: 100_000))
        #expect(try temporaryNames(cache).count == 1)
        aborted.abort()
        #expect(try temporaryNames(cache).isEmpty)
        #expect(cache.data(for: "k") == body)

        // Dropped without a commit: the same as an abort.
        do {
            let dropped = try cache.makeWriter(for: "k")
            try dropped.append(Data(repeating: 2, count: 1000))
        }
        #expect(try temporaryNames(cache).isEmpty)
        #expect(cache.data(for: "k") == body)
        #expect(try cache.verify().isHealthy)
    }

    /// A sequence that fails part way, or a task cancelled part way, stores nothing.
    @Test func aSequenceThatFailsStoresNothing() async throws {
        struct SourceFailed: Error {}
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        try await cache.store(bytes("earlier"), for: "k")
        let failing = AsyncThrowingStream<Data, any Error> { continuation in
            continuation.yield(Data(repeating: 1, count: 100_000))
            continuation.yield(Data(repeating: 2, count: 100_000))
            continuation.finish(throwing: SourceFailed())
        }
        await #expect(throws: SourceFailed.self) { try await cache.store(failing, for: "k") }
        #expect(try await cache.data(for: "k") == bytes("earlier"))
        #expect(try temporaryNames(cache).isEmpty)

        let (endless, continuation) = AsyncStream<Data>.makeStream()
        let task = Task { try await cache.store(endless, for: "k") }
        continuation.yield(Data(repeating: 3, count: 10_000))
        try await Task.sleep(for: .milliseconds(50))
        task.cancel()
        continuation.yield(Data(repeating: 4, count: 10_000))
        continuation.finish()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(try await cache.data(for: "k") == bytes("earlier"))
        #expect(try temporaryNames(cache).isEmpty)

        let parts = [randomData(count: 70_000, seed: 6), Data(), randomData(count: 1, seed: 7), randomData(count: 1 << 20, seed: 8)]
        try await cache.store(AsyncStream { continuation in
            for part in parts { continuation.yield(part) }
            continuation.finish()
        }, for: "k")
        #expect(try await cache.data(for: "k") == parts.reduce(Data(), +))
    }

    /// Chunks add up to the body, at most `chunkSize` each; an inline body and a body file both.
    @Test func chunksAddUpToTheBody() async throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 8 << 10))
        for (key, size) in [("inline", 5000), ("file", 1_000_003), ("empty", 0)] {
            let body = randomData(count: size, seed: UInt64(size))
            try await cache.store(body, for: key)
            let chunks = try #require(try await cache.chunks(for: key, chunkSize: 4096))
            #expect(chunks.size == Int64(size))
            let received = try await allChunks(chunks)
            #expect(received.reduce(Data(), +) == body)
            #expect(received.allSatisfy { $0.count <= 4096 })
        }
        #expect(try await cache.chunks(for: "absent") == nil)
        await #expect(throws: DiskCacheError.self) { try await cache.chunks(for: "file", chunkSize: 0) }
    }

    /// A damaged body ends the sequence with an error in place of its final chunk: every chunk
    /// before it arrives, the last one never does, and the entry is removed.
    @Test func aDamagedBodyEndsTheSequenceWithAnErrorInsteadOfItsLastChunk() async throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        let body = randomData(count: 10 * 4096, seed: 9)
        try await cache.store(body, for: "k")
        let path = EntryFiles(cache, key: "k").body
        var damaged = try readFile(path)
        damaged[5000] ^= 0x01
        try writeFile(path, damaged)

        let before = cache.statistics
        let chunks = try #require(try await cache.chunks(for: "k", chunkSize: 4096))
        var received: [Data] = []
        do {
            for try await chunk in chunks { received.append(chunk) }
            Issue.record("a damaged body was read to the end")
        } catch let error as DiskCacheError {
            #expect(error.code == .corruptEntry)
        }
        #expect(received.count == 9)
        #expect(!cache.contains("k"))
        #expect(cache.statistics.corruptEntriesRemoved == 1)
        // Counted as data(for:) counts a damaged entry: a miss, not a hit.
        #expect(cache.statistics.hits == before.hits)
        #expect(cache.statistics.misses == before.misses + 1)

        // Shorter than its entry records: the same.
        try await cache.store(body, for: "short")
        let shortPath = EntryFiles(cache, key: "short").body
        try writeFile(shortPath, Array(try readFile(shortPath).prefix(3 * 4096)))
        let short = try #require(try await cache.chunks(for: "short", chunkSize: 4096))
        await #expect(throws: DiskCacheError.self) { _ = try await allChunks(short) }
        #expect(!cache.contains("short"))
    }

    /// The chunks and the handed-out file are the value as it was when asked for, even if the
    /// entry is replaced or removed while they are being read.
    @Test func aReaderKeepsItsBytesWhileTheEntryIsReplacedOrRemoved() async throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        let first = randomData(count: 300_000, seed: 10)
        let second = randomData(count: 200_000, seed: 11)
        try await cache.store(first, for: "k")

        let chunks = try #require(try await cache.chunks(for: "k", chunkSize: 65536))
        var iterator = chunks.makeAsyncIterator()
        var received = try #require(try await iterator.next())
        try await cache.store(second, for: "k")
        try await cache.store(randomData(count: 1000, seed: 12), for: "k")  // the first slot is reused
        while let chunk = try await iterator.next() { received.append(chunk) }
        #expect(received == first)

        try await cache.store(first, for: "k")
        let seen = try await cache.withFile(for: "k") { file -> Data in
            try await cache.store(second, for: "k")
            try await cache.removeValue(for: "k")
            try await cache.compact()
            #expect(file.size == Int64(first.count))
            let byDescriptor = FileHandle(fileDescriptor: file.fileDescriptor, closeOnDealloc: false).readDataToEndOfFile()
            #expect(byDescriptor == first)
            return try Data(contentsOf: file.url)
        }
        #expect(seen == first)
        #expect(try temporaryNames(cache).isEmpty)
    }

    @Test func aHandedOutFileIsCheckedFirstAndGoesAfterwards() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 8 << 10))
        let small = randomData(count: 100, seed: 13)
        try cache.store(small, for: "inline")
        var handedOut: URL?
        let read = try cache.withFile(for: "inline") { file -> Data in
            handedOut = file.url
            return try Data(contentsOf: file.url)
        }
        #expect(read == small)
        #expect(!fileExists(try #require(handedOut).path))
        #expect(try cache.withFile(for: "absent") { _ in true } == nil)

        let body = randomData(count: 100_000, seed: 14)
        try cache.store(body, for: "k")
        let path = EntryFiles(cache, key: "k").body
        var damaged = try readFile(path)
        damaged[99_999] ^= 0x80
        try writeFile(path, damaged)
        var called = false
        #expect(try cache.withFile(for: "k") { _ in called = true } == nil)
        #expect(!called)
        #expect(!cache.contains("k"))
        #expect(try temporaryNames(cache).isEmpty)
    }

    /// A checked body (what a server sends with `sendfile`): inline as its bytes, else an open
    /// file whose bytes matched the checksum, which stay those bytes when the entry is replaced;
    /// a damaged or short file is refused and its entry removed.
    @Test func aCheckedBodyIsTheStoredBytesOrNothing() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 8 << 10))
        let small = randomData(count: 100, seed: 21)
        try cache.store(small, for: "inline", metadata: ["type": "small"])
        guard let inline = try cache.checkedBody(for: "inline") else { Issue.record("no inline body"); return }
        let (size, metadata) = (inline.size, inline.metadata)
        guard case .bytes(let bytes) = inline.takeSource() else { Issue.record("an inline body handed out as a file"); return }
        #expect(bytes == small && size == 100 && metadata == ["type": "small"])
        #expect(try !cache.hasCheckedBody(for: "absent"))

        let body = randomData(count: 300_000, seed: 22)
        try cache.store(body, for: "k")
        guard let checked = try cache.checkedBody(for: "k") else { Issue.record("no body"); return }
        let checkedSize = checked.size
        guard case .file(let file) = checked.takeSource() else { Issue.record("a body file handed out as bytes"); return }
        try cache.store(randomData(count: 200_000, seed: 23), for: "k")
        try cache.store(randomData(count: 100_000, seed: 24), for: "k")  // the first slot is reused
        let handle = FileHandle(fileDescriptor: file.fd, closeOnDealloc: false)  // `file` closes it
        #expect(checkedSize == Int64(body.count) && handle.readDataToEndOfFile() == body)

        for (key, damage) in [("flipped", { (bytes: inout [UInt8]) in bytes[150_000] ^= 0x04 }),
                              ("short", { (bytes: inout [UInt8]) in bytes.removeLast() })] {
            try cache.store(body, for: key)
            let path = EntryFiles(cache, key: key).body
            var bytes = try readFile(path)
            damage(&bytes)
            try writeFile(path, bytes)
            #expect(try !cache.hasCheckedBody(for: key), "\(key)")
            #expect(!cache.contains(key), "\(key)")
        }
        #expect(cache.statistics.corruptEntriesRemoved == 2)
    }

    /// A writer or handout that outlives its cache (closed, the directory opened again by
    /// another instance) never touches the new instance's files.
    @Test func aWriterOutlivingItsCacheLeavesTheNextInstanceAlone() throws {
        let dir = TemporaryDirectory()
        let first = try DiskCache(directory: dir.cache, configuration: .testing())
        let stale = try first.makeWriter(for: "k")
        try stale.append(Data(repeating: 1, count: 1000))
        try first.close()
        let second = try DiskCache(directory: dir.cache, configuration: .testing())
        let writer = try second.makeWriter(for: "k")
        try writer.append(Data(repeating: 2, count: 1000))
        stale.abort()
        try writer.commit()
        #expect(second.data(for: "k") == Data(repeating: 2, count: 1000))
    }

    /// Readers opening bodies while writers replace the entry over and over: every read is a
    /// whole value some writer stored, nothing healthy is reported or removed as corrupt.
    @Test func readersNeverMistakeAReplacementForDamage() async throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 0))
        @Sendable func value(_ version: Int) -> Data {
            var data = Data("version \(version)|".utf8)
            data.append(randomData(count: 20_000 + version % 7, seed: UInt64(version)))
            return data
        }
        @Sendable func isStoredValue(_ data: Data) -> Bool {
            guard let bar = data.firstIndex(of: UInt8(ascii: "|")),
                  let version = Int(String(decoding: data[data.startIndex..<bar], as: UTF8.self).dropFirst("version ".count))
            else { return false }
            return data == value(version)
        }
        try await cache.store(value(0), for: "k")
        // For 2 s and at least 51 reads of chunks (up to five minutes on a loaded machine).
        let deadline = Date().addingTimeInterval(2), cap = Date().addingTimeInterval(300)
        let stopped = PthreadMutex(false)
        // Plain threads, not tasks: the I/O pool has as few threads as the machine has cores,
        // which would let only two of these run at once.
        let results = PthreadMutex<(reads: Int, bad: Int, running: Int)>((0, 0, 4))
        for writer in 0..<3 {
            Thread.detachNewThread {
                var version = writer + 1
                while !stopped.withLock({ $0 }) {
                    _ = try? cache.store(value(version), for: "k")
                    version += 3
                }
                results.withLock { $0.running -= 1 }
            }
        }
        Thread.detachNewThread {
            var reads = 0, bad = 0
            while !stopped.withLock({ $0 }) {
                if let data = try? cache.withFile(for: "k", { file in try Data(contentsOf: file.url) }) {
                    if !isStoredValue(data) { bad += 1 }
                    reads += 1
                }
            }
            results.withLock { $0 = ($0.reads + reads, $0.bad + bad, $0.running - 1) }
        }
        var reads = 0, bad = 0
        while Date() < deadline || (reads <= 50 && Date() < cap) {
            guard let chunks = try await cache.chunks(for: "k", chunkSize: 4096) else { continue }
            var data = Data()
            do {
                for try await chunk in chunks { data.append(chunk) }
                if !isStoredValue(data) { bad += 1 }
            } catch {
                bad += 1
            }
            reads += 1
        }
        stopped.withLock { $0 = true }
        while results.withLock({ $0.running }) > 0 { try await Task.sleep(for: .milliseconds(10)) }
        let total = results.withLock { ($0.reads + reads, $0.bad + bad) }
        #expect(total.0 > 50)
        #expect(total.1 == 0)
        #expect(cache.statistics.corruptEntriesRemoved == 0)
        #expect(try await cache.verify().isHealthy)
    }

    /// `kill -9` while a writer is part way: the next open finds the earlier value whole and
    /// nothing of the writer's.
    @Test func aCrashPartWayThroughAWriterLeavesNoTrace() throws {
        let dir = TemporaryDirectory()
        let worker = try Worker(["stream", dir.cache.path])
        #expect(worker.waitFor { $0 == "APPENDED 20" } != nil)
        worker.kill()
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.cache.appendingPathComponent("tmp").path).count == 1)
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(cache.data(for: "big").map { String(decoding: $0.prefix(8), as: UTF8.self) } == "key-1|1|")
        #expect(try temporaryNames(cache).isEmpty)
        #expect(try cache.verify().isHealthy)
    }

    /// Storing and reading a 256 MiB body every streaming way grows the process's peak resident
    /// memory by less than 32 MiB (in a child process, which measures its own peak).
    @Test func largeBodiesAreStoredAndReadInBoundedMemory() throws {
        let dir = TemporaryDirectory()
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let lines = try Worker.run(["large", dir.url.path, "\(256 << 20)"])
        let phases = lines.filter { $0.hasPrefix("PHASE ") }.map { $0.split(separator: " ") }
        #expect(phases.map { String($0[1]) } == ["writer", "async-sequence", "file-copy", "chunks", "with-file", "file-move"],
                "\(lines)")
        for phase in phases {
            #expect(Int64(phase[3])! < 32 << 20, "\(phase)")
        }
    }
}

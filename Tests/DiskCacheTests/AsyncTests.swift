@testable import DiskCache
import DiskCacheLocking
import Foundation
import Testing

/// The async API does what the synchronous one does, on the I/O pool's threads, and a call
/// cancelled before its I/O starts reads and writes nothing. Serialized: one test fills the
/// shared pool with blocked jobs.
@Suite(.serialized)
struct AsyncTests {
    struct Note: Codable, Equatable, Sendable {
        var text: String
    }

    @Test func everyCallDoesWhatTheSynchronousOneDoes() async throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        try await cache.store(Data("one".utf8), for: "a", metadata: ["kind": "text"])
        try await cache.store(value: Note(text: "two"), for: "b")
        #expect(try await cache.data(for: "a") == Data("one".utf8))
        #expect(try await cache.value(Note.self, for: "b") == Note(text: "two"))
        #expect(try await cache.entry(for: "a")?.metadata == ["kind": "text"])
        #expect(try await cache.dataAndEntry(for: "a")?.entry.size == 3)
        #expect(try await cache.updateMetadata(["kind": "note"], for: "a"))
        #expect(try await cache.entry(for: "a")?.metadata == ["kind": "note"])
        try await cache.removeValue(for: "a")
        #expect(try await cache.data(for: "a") == nil)
        #expect(try await cache.verify().isHealthy)
        try await cache.compact()
        try await cache.flush()
        try await cache.removeAll()
        #expect(cache.count == 0)
        try await cache.close()
        #expect(throws: DiskCacheError.self) { try cache.store(Data(), for: "c") }
    }

    @Test func theIOHappensOnThePoolsThreadsNotTheCallers() async throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        let root = dir.cache.path
        // The thread of every entry file this cache opens from here on (the cache's own
        // background work, which opens the journal, runs on threads of its own).
        let names = PthreadMutex<[String]>([])
        let token = FileSystemObservers.add { event in
            if case .open(_, let path, _, _) = event, path.hasPrefix(root),
               path.hasSuffix(".meta") || path.hasSuffix(".body") {
                names.withLock { $0.append((Thread.current.name ?? "") + " " + path) }
            }
        }
        defer { FileSystemObservers.remove(token) }
        try await cache.store(Data("x".utf8), for: "k")
        _ = try await cache.data(for: "k")
        let seen = names.withLock { $0 }
        #expect(seen.count >= 2)
        #expect(seen.allSatisfy { $0.hasPrefix("DiskCache I/O") }, "\(seen)")
    }

    @Test func aCallCancelledBeforeItStartsWritesNothing() async throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await cache.store(Data("x".utf8), for: "k")
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(try await cache.data(for: "k") == nil)
    }

    @Test func aCallCancelledWhileItWaitsForAThreadWritesNothing() async throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        let pool = BlockingIOPool.shared
        // Every thread of the pool busy until released.
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        for _ in 0..<pool.threadCount {
            pool.submit {
                started.signal()
                release.wait()
            }
        }
        for _ in 0..<pool.threadCount { started.wait() }
        let task = Task { try await cache.store(Data("x".utf8), for: "k") }
        while pool.queuedJobs == 0 { try await Task.sleep(for: .milliseconds(1)) }
        task.cancel()
        for _ in 0..<pool.threadCount { release.signal() }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(try await cache.data(for: "k") == nil)
        #expect(cache.statistics.writes == 0)
    }

    @Test func theTieredCacheAnswersFromMemoryAndFromDisk() async throws {
        let dir = TemporaryDirectory()
        let tiered = try TieredCache(memoryCapacity: 1 << 20, diskCapacity: 8 << 20, directory: dir.cache,
                                     configuration: .testing())
        try await tiered.store(Data("memory".utf8), for: "m", policy: .allowedInMemoryOnly)
        try await tiered.store(value: Note(text: "disk"), for: "d")
        #expect(try await tiered.data(for: "m") == Data("memory".utf8))
        #expect(try await tiered.value(Note.self, for: "d") == Note(text: "disk"))
        #expect(try await tiered.record(for: "absent") == nil)
        try await tiered.removeValue(for: "d")
        #expect(try await tiered.data(for: "d") == nil)
        try await tiered.removeAll()
        #expect(try await tiered.data(for: "m") == nil)
    }
}

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

    /// A read and a write wait for a thread of the pool: while every one of them is held, the
    /// call does not progress on the caller's thread; once released, it completes.
    @Test func theIOWaitsForThePoolsThreadsNotTheCallers() async throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        try await cache.store(Data("x".utf8), for: "k")
        let pool = BlockingIOPool.shared
        let finished = PthreadMutex(0)
        var calls: [Task<Data?, any Error>] = []
        try await pool.holdingEveryThread {
            calls.append(Task {
                let value = try await cache.data(for: "k")
                finished.withLock { $0 += 1 }
                return value
            })
            calls.append(Task {
                try await cache.store(Data("y".utf8), for: "l")
                finished.withLock { $0 += 1 }
                return nil
            })
            // Until both calls wait in the queue (or one has finished without it), at most 5 s.
            let deadline = ContinuousClock.now + .seconds(5)
            while pool.queuedJobs < 2, finished.withLock({ $0 }) == 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(1))
            }
            try await Task.sleep(for: .milliseconds(50))
            #expect(finished.withLock { $0 } == 0)
            #expect(cache.count == 1)
        }
        #expect(try await calls[0].value == Data("x".utf8))
        _ = try await calls[1].value
        #expect(finished.withLock { $0 } == 2)
        #expect(cache.count == 2)
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
        var task: Task<Bool, any Error>?
        try await pool.holdingEveryThread {
            let call = Task { try await cache.store(Data("x".utf8), for: "k") }
            task = call
            let deadline = ContinuousClock.now + .seconds(5)
            while pool.queuedJobs == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
            call.cancel()
        }
        let cancelled = try #require(task)
        await #expect(throws: CancellationError.self) { try await cancelled.value }
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

    /// In async code a plain closure picks the async `withFile` (its blocking form is
    /// disfavoured): the file is prepared on the pool's threads, so while every one of them is
    /// held the call does not finish.
    @Test func withFileInAsyncCodeWaitsForThePool() async throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        try await cache.store(Data(repeating: 7, count: 100_000), for: "k")
        let finished = PthreadMutex(false)
        var call: Task<Int64?, any Error>?
        let finishedWhileHeld = try await BlockingIOPool.shared.holdingEveryThread {
            call = Task {
                let size = try await cache.withFile(for: "k") { file in file.size }
                finished.withLock { $0 = true }
                return size
            }
            try await Task.sleep(for: .milliseconds(100))
            return finished.withLock { $0 }
        }
        #expect(!finishedWhileHeld)
        #expect(try await #require(call).value == 100_000)
    }
}

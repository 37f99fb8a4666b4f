@testable import DiskCache
import DiskCacheLocking
import Foundation
import Testing
import TestSupport

/// The count limit and the disk capacity hold while writers run flat out: a writer whose put
/// takes the cache over a limit waits for the sweep that brings it back under, so the cache
/// never holds more than its limits plus one entry for each put in flight.
@Suite(.serialized)
struct LimitsHoldTests {
    /// Samples `measure` on a thread of its own every millisecond until `body` returns; the largest value seen.
    static func largest(_ measure: @escaping @Sendable () -> Int64, while body: () throws -> Void) rethrows -> Int64 {
        let state = PthreadMutex((done: false, largest: Int64(0)))
        let sampler = Thread {
            while true {
                let value = measure()
                let done = state.withLock { state -> Bool in
                    state.largest = max(state.largest, value)
                    return state.done
                }
                if done { return }
                usleep(1_000)
            }
        }
        sampler.start()
        defer { state.withLock { $0.done = true } }
        try body()
        return state.withLock { $0.largest }
    }

    /// Four threads put 4,000 new keys in all into a cache limited to 500 entries.
    @Test func theCountLimitHoldsUnderWritersOnManyThreads() throws {
        let dir = TemporaryDirectory()
        var configuration = DiskCache.Configuration.testing()
        configuration.countLimit = 500
        let cache = try DiskCache(directory: dir.cache, configuration: configuration)
        let writers = 4
        let largest = Self.largest({ Int64(cache.count) }) {
            let failures = PthreadMutex(0)
            DispatchQueue.concurrentPerform(iterations: writers) { writer in
                for i in 0..<1_000 where (try? cache.store(bytes("value \(i)"), for: "w\(writer)-\(i)")) == nil {
                    failures.withLock { $0 += 1 }
                }
            }
            #expect(failures.withLock { $0 } == 0)
        }
        #expect(largest <= 500 + Int64(writers), "the cache held \(largest) entries")
        #expect(cache.count <= 500)
        // What is stored last is kept.
        try cache.store(bytes("last"), for: "last")
        #expect(cache.data(for: "last") == bytes("last"))
        try cache.close()
    }

    /// 4 KiB entries into a cache of 1 MiB: the bytes on disk stay within one entry per writer of it.
    @Test func theDiskCapacityHoldsUnderWritersOnManyThreads() throws {
        let dir = TemporaryDirectory()
        var configuration = DiskCache.Configuration.testing()
        configuration.diskCapacity = 1 << 20
        let cache = try DiskCache(directory: dir.cache, configuration: configuration)
        let writers = 4
        let body = Data(repeating: 7, count: 4096)
        let largest = Self.largest({ cache.totalSize }) {
            DispatchQueue.concurrentPerform(iterations: writers) { writer in
                for i in 0..<500 { try? cache.store(body, for: "w\(writer)-\(i)") }
            }
        }
        // An entry is its metadata file holding the body inline: 8 KiB on disk at most.
        #expect(largest <= (1 << 20) + Int64(writers) * 8192, "the cache held \(largest) bytes")
        #expect(cache.totalSize <= 1 << 20)
        try cache.close()
    }

    /// Two processes put 3,000 new keys each into one shared cache limited to 300 entries; an
    /// instance of the test's own watches the count.
    @Test func theCountLimitHoldsUnderWritersInManyProcesses() async throws {
        // Blocking waits, on a thread of their own (see `onOwnThread`).
        try await onOwnThread {
            let dir = TemporaryDirectory()
            try FileManager.default.createDirectory(at: dir.cache, withIntermediateDirectories: true)
            var configuration = DiskCache.Configuration.testing()
            configuration.sweepInterval = nil
            let watcher = try DiskCache(directory: dir.cache, configuration: configuration)
            let largest = try Self.largest({ Int64(watcher.count) }) {
                let workers = try ["a", "b"].map { try Worker(["fill", dir.cache.path, "300", "3000", $0]) }
                for worker in workers {
                    #expect(worker.waitFor(timeout: 300) { $0 == "DONE" } != nil)
                    worker.process.waitUntilExit()
                    #expect(worker.process.terminationStatus == 0)
                }
            }
            #expect(largest <= 302, "the cache held \(largest) entries")
            #expect(watcher.count <= 300)
            try watcher.close()
        }
    }
}

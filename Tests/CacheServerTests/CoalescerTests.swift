#if Server
import DiskCacheLocking
import HTTPCache
import Testing

/// The coalescer behind the server's `gate` (one origin fetch per resource) and
/// `CachingHTTPClient`'s shared fetches: a waiter whose task is cancelled stops waiting at once,
/// while the work and the other waiters go on.
///
/// Each test cancels a waiter while the work is held, and only then lets the work go. A guard
/// lets it go after 30 s in any case: a waiter that ignored its cancellation would then get the
/// work's result instead of `CancellationError`, and the test fails rather than hangs.
struct CoalescerTests {
    /// Waits until `count()` is `expected`; false when it is not within 30 s.
    func reach(_ expected: Int, _ count: () -> Int) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while count() != expected {
            guard ContinuousClock.now < deadline else { return false }
            try await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    /// Cancels `waiter` and returns how it ended. The guard yields `go`, letting the held work
    /// go, if it has not ended within 30 s.
    func cancel<T>(_ waiter: Task<T, any Error>, guardedBy go: AsyncStream<Void>.Continuation) async -> Result<T, any Error> {
        waiter.cancel()
        let timeoutGuard = Task {
            try await Task.sleep(for: .seconds(30))
            go.yield()
        }
        defer { timeoutGuard.cancel() }
        return await waiter.result
    }

    @Test func aCancelledWaiterStopsWhileTheLeaderAndTheOtherWaiterGoOn() async throws {
        let gate = Coalescer<Int>()
        let (leaderEntered, entered) = AsyncStream<Void>.makeStream()
        let (goes, go) = AsyncStream<Void>.makeStream()
        let leader = Task {
            guard case .leads = try await gate.enter("k") else { return -1 }
            entered.yield()
            for await _ in goes { break }
            let result = Task.isCancelled ? -1 : 42
            gate.finish("k", with: .success(result))
            return result
        }
        for await _ in leaderEntered { break }
        let patient = Task { try await gate.enter("k") }
        let cancelled = Task { try await gate.enter("k") }
        #expect(try await reach(2) { gate.waiterCount(for: "k") })

        let stopped = await cancel(cancelled, guardedBy: go)
        #expect(throws: CancellationError.self) { try stopped.get() }
        // The leader still works, the other waiter still waits for it.
        #expect(gate.waiterCount(for: "k") == 1)

        go.yield()
        #expect(try await leader.value == 42)
        guard case .waited(let value) = try await patient.value else {
            Issue.record("The other waiter led instead of waiting")
            return
        }
        #expect(value == 42)
    }

    @Test func aCancelledCallerOfASharedOperationStopsWhileTheOperationAndTheOtherCallerGoOn() async throws {
        let coalescer = Coalescer<Int>()
        let runs = PthreadMutex(0)
        let (goes, go) = AsyncStream<Void>.makeStream()
        let operation: @Sendable () async throws -> Int = {
            runs.withLock { $0 += 1 }
            for await _ in goes { break }
            return Task.isCancelled ? -1 : 42
        }
        let patient = Task { try await coalescer.run(key: "k", operation: operation) }
        let cancelled = Task { try await coalescer.run(key: "k", operation: operation) }
        #expect(try await reach(2) { coalescer.waiterCount(for: "k") })

        let stopped = await cancel(cancelled, guardedBy: go)
        #expect(throws: CancellationError.self) { try stopped.get() }
        #expect(coalescer.waiterCount(for: "k") == 1)

        go.yield()
        #expect(try await patient.value == 42)
        #expect(runs.withLock { $0 } == 1)
    }
}
#endif

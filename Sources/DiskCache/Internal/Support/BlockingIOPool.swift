import DiskCacheLocking
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Threads that run the file I/O of the caches' `async` API, so that a call waiting for the
/// disk never occupies a thread of Swift's cooperative pool (on a 2-core machine that pool has
/// two threads: two slow reads would stall every other task of the process).
///
/// One pool serves every cache of the process: as many threads as the machine has cores, at
/// least 2 and at most 8, made on first use and kept for the life of the process (as
/// `NIOThreadPool.singleton` is). Jobs run in the order they were submitted. The lock and the
/// condition are `pthread` ones, which Thread Sanitizer sees.
package final class BlockingIOPool: @unchecked Sendable {  // every mutable field is guarded by `mutex`
    package typealias Job = @Sendable () -> Void

    package static let shared = BlockingIOPool(threads: min(8, max(2, ProcessInfo.processInfo.activeProcessorCount)),
                                       name: "DiskCache I/O")

    package let threadCount: Int
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// Submitted jobs from `head` on; the slots before `head` are spent.
    private var jobs: [Job?] = []
    private var head = 0

    init(threads: Int, name: String) {
        threadCount = threads
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
        for index in 0..<threads {
            let thread = Thread { [unowned self] in
                // Named from the thread itself: on Linux a name given before `start()` is not
                // applied, and the thread would keep the name of the one that made it.
                Thread.current.name = "\(name) \(index)"
                self.work()
            }
            thread.start()
        }
    }

    /// Never called for `shared`; a pool that is released must have no thread left in `work`.
    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Jobs submitted and not yet started.
    var queuedJobs: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return jobs.count - head
    }

    package func submit(_ job: @escaping Job) {
        pthread_mutex_lock(mutex)
        jobs.append(job)
        pthread_cond_signal(condition)
        pthread_mutex_unlock(mutex)
    }

    /// Runs `body` while every thread of the pool is held by a job that waits, so that no job
    /// submitted meanwhile can start until `body` returns. For tests that show a call waits for
    /// the pool instead of doing its I/O on the caller's thread.
    package func holdingEveryThread<T>(_ body: () async throws -> T) async rethrows -> T {
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        for _ in 0..<threadCount {
            submit {
                started.signal()
                release.wait()
            }
        }
        for _ in 0..<threadCount { started.wait() }
        defer { for _ in 0..<threadCount { release.signal() } }
        return try await body()
    }

    private func work() {
        while true {
            pthread_mutex_lock(mutex)
            while head == jobs.count { pthread_cond_wait(condition, mutex) }
            let job = jobs[head]
            jobs[head] = nil
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1024 && head * 2 >= jobs.count {
                jobs.removeFirst(head)
                head = 0
            }
            pthread_mutex_unlock(mutex)
            job?()
        }
    }

    /// Runs `body` on one of the pool's threads and returns (or throws) what it does.
    ///
    /// Cancellation is honoured until `body` starts: a task cancelled before the call, or while
    /// its job waits in the queue, gets `CancellationError` and `body` never runs. Once `body`
    /// has started it runs to the end (a file half written is not a state to leave behind) and
    /// its result is returned even if the task was cancelled meanwhile.
    package func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try Task.checkCancellation()
        let cancelled = PthreadMutex(false)  // set by the cancellation handler, read by the job
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                submit {
                    if cancelled.withLock({ $0 }) {
                        continuation.resume(throwing: CancellationError())
                    } else {
                        continuation.resume(with: Result { try body() })
                    }
                }
            }
        } onCancel: {
            cancelled.withLock { $0 = true }
        }
    }
}

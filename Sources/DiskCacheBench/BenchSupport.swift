import Foundation
import ToolSupport
import DiskCacheLocking
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Clock

/// Monotonic nanoseconds; cheap enough (vDSO) to call around every operation.
@inline(__always)
package func benchNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

// MARK: - Measurements

/// Runs `body` on `threads` threads (dispatch worker threads, never Swift's cooperative pool,
/// since every operation blocks on I/O), until `count` operations are done in total or
/// `deadline` seconds have passed, or `stop()` says so, whichever comes first.
/// `body(thread, n, &random)` performs operation `n` of its thread and returns the bytes it moved.
func benchRun(threads: Int, count: Int?, seconds: Double?, seed: UInt64, progress: BenchProgress,
              stop: (@Sendable () -> Bool)? = nil,
              _ body: @escaping @Sendable (_ thread: Int, _ n: Int, _ random: inout SplitMix64) -> Int) -> BenchMeasurement {
    let threads = max(1, threads)
    let results = PthreadMutex<[BenchMeasurement]>([])
    let start = benchNanoseconds()
    let deadline = seconds.map { start + UInt64($0 * 1e9) }
    DispatchQueue.concurrentPerform(iterations: threads) { thread in
        var random = SplitMix64(seed: seed &+ UInt64(thread) &* 7919)
        var local = BenchMeasurement()
        let share = count.map { ($0 - thread + threads - 1) / threads }
        if let share { local.latencies.reserveCapacity(share) } else { local.latencies.reserveCapacity(1 << 16) }
        var n = 0
        while true {
            if let share, n >= share { break }
            let before = benchNanoseconds()
            if let deadline, before >= deadline { break }
            if let stop, stop() { break }
            let moved = body(thread, n, &random)
            let after = benchNanoseconds()
            local.latencies.append(after - before)
            local.bytes += Int64(moved)
            n += 1
            if thread == 0, n & 31 == 0 {
                if let deadline {
                    progress.phaseFraction(Double(after - start) / Double(deadline - start))
                } else if let share {
                    progress.phaseFraction(Double(n) / Double(share))
                }
            }
        }
        local.operations = n
        let finished = local
        results.withLock { $0.append(finished) }
    }
    var total = BenchMeasurement()
    total.seconds = Double(benchNanoseconds() - start) / 1e9
    for part in results.withLock({ $0 }) { total.merge(part) }
    return total
}

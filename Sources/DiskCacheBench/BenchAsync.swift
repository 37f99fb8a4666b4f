import DiskCache
import DiskCacheLocking
import Foundation
import ToolSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// MARK: - The async API against blocking calls on Swift's cooperative pool

/// 64 tasks doing gets and puts (90 % / 10 %, uniform keys) for the phase's duration, once with
/// the synchronous API called from the tasks (it blocks the cooperative pool's threads) and once
/// with the async API (its I/O runs on the caches' own threads), while a probe task sleeps 1 ms
/// in a loop and records how late each wake-up is. The baseline for throughput is the
/// synchronous API on 2 plain threads, the most this machine's I/O would get without tasks.
extension BenchRunner {
    static let asyncTaskCount = 64

    func runAsync(size: Int, data: Data) throws -> [BenchRow] {
        let label = BenchSize.label(size)
        let count = plan.entries(size)
        let dir = plan.root + "/async-\(label)"
        defer { if !isKept { removeTree(dir) } }
        progress.phase("\(label): async: fill \(count) entries")
        let cache = try DiskCache(directory: URL(fileURLWithPath: dir), configuration: configuration(sweepInterval: nil))
        _ = benchRun(threads: 1, count: count, seconds: nil, seed: plan.seed, progress: progress) { _, n, _ in
            _ = try? cache.store(data, for: Self.key(n))
            return data.count
        }
        settle()
        let seconds = plan.seconds

        progress.phase("\(label): async: the synchronous API on 2 threads")
        let threads = benchRun(threads: 2, count: nil, seconds: seconds, seed: plan.seed &+ 7, progress: progress) { _, _, random in
            Self.syncOperation(cache, data: data, count: count, random: &random)
        }
        progress.phase("\(label): async: \(Self.asyncTaskCount) tasks, the synchronous API, and a 1 ms probe")
        let (blocking, blockingLateness) = Self.tasksWithProbe(seconds: seconds, seed: plan.seed &+ 8) { random in
            Self.syncOperation(cache, data: data, count: count, random: &random)
        }
        progress.phase("\(label): async: \(Self.asyncTaskCount) tasks, the async API, and a 1 ms probe")
        let (nonBlocking, nonBlockingLateness) = Self.tasksWithProbe(seconds: seconds, seed: plan.seed &+ 8) { random in
            let index = random.below(count)
            if random.below(10) == 0 {
                _ = try? await cache.store(data, for: Self.key(index))
                return data.count
            }
            return (try? await cache.data(for: Self.key(index)))?.count ?? 0
        }
        try cache.close()

        func lateness(_ samples: [UInt64]) -> String {
            guard let p = BenchMeasurement(latencies: samples).percentiles() else { return "no wake-ups" }
            return String(format: "probe lateness p50 %.2f ms, p99 %.2f ms, max %.2f ms over %d wake-ups",
                          p.p50 / 1000, p.p99 / 1000, p.max / 1000, samples.count)
        }
        let tasks = Self.asyncTaskCount
        var asyncRow = BenchRow(size: size, operation: "async", subject: "async API, \(tasks) tasks", entries: count,
                                threads: tasks, measurement: nonBlocking, note: lateness(nonBlockingLateness))
        var syncRow = BenchRow(size: size, operation: "async", subject: "sync API, \(tasks) tasks", entries: count,
                               threads: tasks, measurement: blocking, note: lateness(blockingLateness))
        let base = BenchRow(size: size, operation: "async", subject: "sync API, 2 threads", entries: count,
                            threads: 2, measurement: threads)
        if threads.opsPerSecond > 0 {
            asyncRow.ratioToBaseline = nonBlocking.opsPerSecond / threads.opsPerSecond
            syncRow.ratioToBaseline = blocking.opsPerSecond / threads.opsPerSecond
        }
        for (name, samples) in [("async", nonBlockingLateness), ("sync", blockingLateness)] {
            if let p = BenchMeasurement(latencies: samples).percentiles() {
                report.figures["\(label).async.\(name).probeLatenessP50Milliseconds"] = p.p50 / 1000
                report.figures["\(label).async.\(name).probeLatenessP99Milliseconds"] = p.p99 / 1000
            }
        }
        report.figures["\(label).async.throughputRatioToTwoThreads"] = asyncRow.ratioToBaseline ?? 0
        return [asyncRow, syncRow, base]
    }

    /// One operation through the synchronous API (a plain function: called from a task, it
    /// blocks the task's thread, which is what is measured).
    static func syncOperation(_ cache: DiskCache, data: Data, count: Int, random: inout SplitMix64) -> Int {
        let index = random.below(count)
        if random.below(10) == 0 {
            _ = try? cache.store(data, for: key(index))
            return data.count
        }
        return cache.data(for: key(index))?.count ?? 0
    }

    /// Runs `operation` in a loop in each of ``asyncTaskCount`` tasks on the cooperative pool for
    /// `seconds`, beside a probe task that sleeps 1 ms at a time; returns the tasks' measurement
    /// and the probe's lateness (nanoseconds past 1 ms) for each wake-up. Waits on this thread,
    /// which is not one of the pool's.
    static func tasksWithProbe(seconds: Double, seed: UInt64,
                               _ operation: @escaping @Sendable (inout SplitMix64) async -> Int)
        -> (BenchMeasurement, [UInt64]) {
        let result = PthreadMutex<(BenchMeasurement, [UInt64])>((BenchMeasurement(), []))
        let done = DispatchSemaphore(value: 0)
        let start = benchNanoseconds()
        let deadline = start + UInt64(seconds * 1e9)
        Task.detached {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    var lateness: [UInt64] = []
                    while benchNanoseconds() < deadline {
                        let before = benchNanoseconds()
                        try? await Task.sleep(for: .milliseconds(1))
                        let slept = benchNanoseconds() - before
                        lateness.append(slept > 1_000_000 ? slept - 1_000_000 : 0)
                    }
                    let samples = lateness
                    result.withLock { $0.1 = samples }
                }
                for task in 0..<asyncTaskCount {
                    group.addTask {
                        var random = SplitMix64(seed: seed &+ UInt64(task) &* 7919)
                        var local = BenchMeasurement()
                        while true {
                            let before = benchNanoseconds()
                            if before >= deadline { break }
                            let moved = await operation(&random)
                            local.latencies.append(benchNanoseconds() - before)
                            local.bytes += Int64(moved)
                            local.operations += 1
                        }
                        let finished = local
                        result.withLock { $0.0.merge(finished) }
                    }
                }
            }
            done.signal()
        }
        done.wait()
        var (measurement, lateness) = result.withLock { $0 }
        measurement.seconds = Double(benchNanoseconds() - start) / 1e9
        return (measurement, lateness)
    }
}

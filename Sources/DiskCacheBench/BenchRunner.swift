import DiskCache
import Foundation
import ToolSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs the phases of a plan and collects rows.
package final class BenchRunner {
    let plan: BenchPlan
    let progress: BenchProgress
    package var report: BenchReport

    package init(plan: BenchPlan, progress: BenchProgress, report: BenchReport) {
        self.plan = plan
        self.progress = progress
        self.report = report
    }

    static func key(_ index: Int) -> String { "https://example.com/resource/\(index)" }

    /// Puts at the start of a fill whose rate is set against the steady state's.
    static let warmUpPuts = 1000

    func configuration(sweepInterval: Duration? = .seconds(10)) -> DiskCache.Configuration {
        DiskCache.Configuration(diskCapacity: 1 << 50, durability: plan.durability,
                                inlineThreshold: plan.inlineThreshold, lowWatermark: plan.lowWatermark ?? DiskCache.Configuration().lowWatermark,
                                minimumFreeSpace: 0, minimumFreeFraction: 0, sweepInterval: sweepInterval)
    }

    func body(_ size: Int) -> Data {
        var random = SplitMix64(seed: plan.seed ^ UInt64(size))
        var bytes = [UInt8](repeating: 0, count: size)
        for i in stride(from: 0, to: size, by: 8) {
            let word = random.next()
            for j in 0..<min(8, size - i) { bytes[i + j] = UInt8(truncatingIfNeeded: word >> (8 * UInt64(j))) }
        }
        return Data(bytes)
    }

    /// How many phases the plan has, for the progress bar.
    package func phaseCount() -> Int {
        var phases = 0
        let ops = plan.operations
        let subjects = plan.compareSQLite ? 3 : 2
        for _ in plan.sizes {
            if !ops.isDisjoint(with: BenchOperation.main) { phases += 2 }  // floor probe, fill in turns
            for op in [BenchOperation.get, .cold, .mixed, .churn] where ops.contains(op) { phases += 1 }
            if ops.contains(.open) { phases += subjects }
            if ops.contains(.sweep) { phases += 2 }
            if ops.contains(.sweepGet) { phases += 3 }
            if ops.contains(.async) { phases += 4 }
            if ops.contains(.streaming) { phases += 5 }
            if plan.compareURLCache { phases += 6 }
        }
        if ops.contains(.idle) { phases += 2 }
        return phases
    }

    package func run() throws {
        if plan.compareSQLite && !plan.operations.isDisjoint(with: BenchOperation.main) {
            let mode = BenchSQLite.synchronous(immediate: plan.isImmediate)
            report.sqliteVersion = BenchSQLite.version
            report.notes.append("sqlite: SQLite \(BenchSQLite.version) through its C API in this process; one table (key TEXT PRIMARY KEY, "
                                + "value BLOB NOT NULL), journal_mode=WAL, synchronous=\(mode) (the store's durability is "
                                + "\(plan.durability)), prepared statements, one autocommit INSERT OR REPLACE per put, a SELECT per get "
                                + "copied into a fresh Data, the store's keys in the store's order; one connection per thread (NOMUTEX)")
        }
        if plan.isImmediate {
            report.notes.append("durability immediate: the floor fsyncs each file before it gets its name and its directory after")
        }
        for size in plan.sizes {
            try runSize(size)
        }
        if plan.operations.contains(.idle) {
            try runIdle()
        }
    }

    // MARK: - One body size

    private func runSize(_ size: Int) throws {
        let ops = plan.operations
        guard !ops.isDisjoint(with: BenchOperation.main) else {
            // Only the self-contained phases were asked for.
            var rows: [BenchRow] = []
            if ops.contains(.sweepGet) { rows += try runSweepGet(size: size, data: body(size)) }
            if ops.contains(.async) { rows += try runAsync(size: size, data: body(size)) }
            if ops.contains(.streaming) { rows += try runStreaming(size: size) }
            if plan.compareURLCache { rows += try runURLCacheComparison(size: size, data: body(size), mainRows: []) }
            report.rows += rows
            return
        }
        let run = try BenchSizeRun(self, size: size)
        try run.fill()
        for (phase, cold) in [(BenchOperation.get, plan.coldReads), (.cold, true)] where ops.contains(phase) {
            run.get(phase, cold: cold)
        }
        if ops.contains(.mixed) { run.mixed() }
        if ops.contains(.churn) { run.churn() }
        run.closeSQLite()
        if ops.contains(.open) { try run.open() }
        if ops.contains(.sweep) { try run.sweep() }
        try run.close()
        let data = run.data
        var rows = run.rows

        if ops.contains(.sweepGet) {
            rows += try runSweepGet(size: size, data: data)
        }
        if ops.contains(.async) {
            rows += try runAsync(size: size, data: data)
        }
        if ops.contains(.streaming) {
            rows += try runStreaming(size: size)
        }
        if plan.compareURLCache {
            rows += try runURLCacheComparison(size: size, data: data, mainRows: rows)
        }
        report.rows += rows
        if !isKept { removeTree(run.storeDir); removeTree(run.floorDir); removeTree(run.sqliteDir) }
    }

    /// `plan.openRepetitions` timed runs of `open`, which returns the entries it found; ops/s
    /// is entries per second, as for the store's replay.
    func timeOpens(trees: [String], _ open: () throws -> Int) rethrows -> BenchMeasurement {
        settle()
        var m = BenchMeasurement()
        var entries = 0
        for repetition in 0..<plan.openRepetitions {
            if plan.coldReads { _ = BenchProcess.dropPageCache(fallbackTrees: trees) }
            let start = benchNanoseconds()
            entries = try open()
            m.latencies.append(benchNanoseconds() - start)
            progress.phaseFraction(Double(repetition + 1) / Double(plan.openRepetitions))
        }
        m.operations = entries * m.latencies.count
        m.seconds = Double(m.latencies.reduce(0, +)) / 1e9
        return m
    }

    /// One subject's part of a phase: its turn number `slice`.
    typealias Turn = (_ slice: Int) -> BenchMeasurement

    /// Runs `turns` (one per subject) `slices` times each, alternating: slice 0 of every
    /// subject, then slice 1, and so on, the order rotating so that no subject always goes
    /// first. On a disk shared with other machines the rate can change several-fold within
    /// seconds; in turns, such a change weighs on every subject alike instead of on whichever
    /// ran then. `before(slice)` runs, untimed, before every turn. Returns each subject's
    /// turns merged, in slice order.
    func inTurns(_ turns: [Turn], slices: Int, before: (_ slice: Int) -> Void) -> [BenchMeasurement] {
        var merged = [BenchMeasurement](repeating: BenchMeasurement(), count: turns.count)
        for slice in 0..<slices {
            for position in turns.indices {
                let subject = (position + slice) % turns.count
                before(slice)
                let measured = turns[subject](slice)
                merged[subject].merge(measured)
                merged[subject].seconds += measured.seconds
                progress.phaseFraction(Double(slice * turns.count + position + 1) / Double(slices * turns.count))
            }
        }
        return merged
    }

    /// The rate of the first `warmUpPuts` puts of a fill (one thread's latencies, in order)
    /// and the steady state: the median rate of the following windows of as many puts (a
    /// last, partial window counts only when it is the only one). Nil when the fill is not
    /// longer than the first window.
    func warmUp(_ latencies: [UInt64]) -> (first: Double, steady: Double, windows: Int)? {
        let window = Self.warmUpPuts
        guard latencies.count > window else { return nil }
        func rate(_ slice: ArraySlice<UInt64>) -> Double {
            Double(slice.count) / max(Double(slice.reduce(0, +)) / 1e9, 1e-9)
        }
        var rates: [Double] = []
        for start in stride(from: window, to: latencies.count, by: window) {
            let end = min(start + window, latencies.count)
            if end - start == window || start == window { rates.append(rate(latencies[start..<end])) }
        }
        rates.sort()
        let steady = rates.count % 2 == 1 ? rates[rates.count / 2] : (rates[rates.count / 2 - 1] + rates[rates.count / 2]) / 2
        return (rate(latencies[..<window]), steady, rates.count)
    }

    package var isKept = false

    /// Writes back what earlier phases left dirty, so that a timed phase does not pay for the
    /// writeback of another (the data stays in the page cache: reads stay warm).
    func settle() {
        sync()
    }

    /// Sets `path` aside until the run ends (``BenchTrash``).
    func removeTree(_ path: String) {
        BenchTrash.setAside(path, root: plan.root)
    }

    // MARK: - Gets while the sweeper evicts

    private func runSweepGet(size: Int, data: Data) throws -> [BenchRow] {
        let label = BenchSize.label(size)
        let count = plan.entries(size)
        let dir = plan.root + "/sweep-get-\(label)"
        defer { if !isKept { removeTree(dir) } }
        let threads = plan.threads
        progress.phase("\(label): sweep-get: fill \(count) cold + \(count) hot entries")
        let cache = try DiskCache(directory: URL(fileURLWithPath: dir), configuration: configuration(sweepInterval: nil))
        _ = benchRun(threads: threads, count: count, seconds: nil, seed: plan.seed, progress: progress) { thread, n, _ in
            _ = try? cache.store(data, for: "cold-" + Self.key(n * threads + thread))
            return data.count
        }
        let hotStart = Double(cache.totalSize)
        _ = benchRun(threads: threads, count: count, seconds: nil, seed: plan.seed, progress: progress) { thread, n, _ in
            _ = try? cache.store(data, for: Self.key(n * threads + thread))
            return data.count
        }
        settle()
        progress.phase("\(label): sweep-get: gets, no sweep")
        // Warm-up, not measured: the first pass over fresh entries pays for lookups the rest do not.
        _ = benchRun(threads: threads, count: nil, seconds: min(1, plan.seconds), seed: plan.seed &+ 4, progress: progress) { _, _, random in
            cache.data(for: Self.key(random.below(count)))?.count ?? 0
        }
        let quiet = benchRun(threads: threads, count: nil, seconds: plan.seconds, seed: plan.seed &+ 3, progress: progress) { _, _, random in
            cache.data(for: Self.key(random.below(count)))?.count ?? 0
        }
        progress.phase("\(label): sweep-get: gets while a sweep evicts the cold half")
        let done = Atomic<Bool>(false)
        let sweepTime = Atomic<UInt64>(0)
        let before = cache.count
        let sweeper = Thread {
            let start = benchNanoseconds()
            // Evict (nearly) all of the cold half and none of the hot half.
            let target = Double(cache.totalSize) - hotStart * 0.98
            cache.diskCapacity = Int64(target / cache.configuration.lowWatermark)
            cache.sweep()
            sweepTime.store(benchNanoseconds() - start, ordering: .relaxed)
            done.store(true, ordering: .releasing)
        }
        sweeper.start()
        let busy = benchRun(threads: threads, count: nil, seconds: nil, seed: plan.seed &+ 3, progress: .silent,
                            stop: { done.load(ordering: .acquiring) }) { _, _, random in
            cache.data(for: Self.key(random.below(count)))?.count ?? 0
        }
        while !done.load(ordering: .acquiring) { usleep(1000) }
        let evicted = before - cache.count
        try cache.close()
        var during = BenchRow(size: size, operation: "get+sweep", subject: "diskcache", entries: count,
                              threads: threads, measurement: busy,
                              note: String(format: "gets of the hot half while one sweep evicted %d cold entries in %.0f ms",
                                           evicted, Double(sweepTime.load(ordering: .relaxed)) / 1e6))
        let base = BenchRow(size: size, operation: "get+sweep", subject: "no sweep", entries: count,
                            threads: threads, measurement: quiet)
        if quiet.opsPerSecond > 0 { during.ratioToBaseline = busy.opsPerSecond / quiet.opsPerSecond }
        report.figures["\(label).sweepGet.ratio"] = during.ratioToBaseline ?? 0
        return [during, base]
    }

    // MARK: - Foundation's URLCache

    private func runURLCacheComparison(size: Int, data: Data, mainRows: [BenchRow]) throws -> [BenchRow] {
        let label = BenchSize.label(size)
        let count = min(plan.entries(size), plan.urlcacheEntries)
        let threads = plan.threads
        var rows: [BenchRow] = []
        let dir = plan.root + "/urlcache-\(label)"
        let oursDir = plan.root + "/store-\(label)-\(count)"
        defer { if !isKept { removeTree(dir); removeTree(oursDir) } }
        let peer = try BenchURLCache(directory: dir, capacity: Int64(count) * Int64(size + 4096) * 2 + (64 << 20))
        let cache = try DiskCache(directory: URL(fileURLWithPath: oursDir), configuration: configuration())
        let zipf = BenchZipf(count: count, exponent: plan.zipfExponent, seed: plan.seed)

        progress.phase("\(label): put \(count) (diskcache, for URLCache)")
        let ourPut = benchRun(threads: threads, count: count, seconds: nil, seed: plan.seed, progress: progress) { thread, n, _ in
            _ = try? cache.store(data, for: Self.key(n * threads + thread))
            return data.count
        }
        progress.phase("\(label): put \(count) (URLCache)")
        let peerPut = benchRun(threads: threads, count: count, seconds: nil, seed: plan.seed, progress: progress) { thread, n, _ in
            peer.put(n * threads + thread, data)
        }
        progress.phase("\(label): get (diskcache, for URLCache)")
        let ourGet = benchRun(threads: threads, count: nil, seconds: plan.seconds, seed: plan.seed &+ 1, progress: progress) { _, _, random in
            cache.data(for: Self.key(random.below(count)))?.count ?? 0
        }
        progress.phase("\(label): get (URLCache)")
        let peerMisses = Atomic<Int>(0)
        let peerGet = benchRun(threads: threads, count: nil, seconds: plan.seconds, seed: plan.seed &+ 1, progress: progress) { _, _, random in
            let n = peer.get(random.below(count))
            if n == 0 { peerMisses.add(1, ordering: .relaxed) }
            return n
        }
        progress.phase("\(label): mixed (diskcache, for URLCache)")
        let ourMixed = benchRun(threads: threads, count: nil, seconds: plan.seconds, seed: plan.seed &+ 2, progress: progress) { _, _, random in
            let index = zipf.next(&random)
            if random.below(10) == 0 { _ = try? cache.store(data, for: Self.key(index)); return data.count }
            return cache.data(for: Self.key(index))?.count ?? 0
        }
        progress.phase("\(label): mixed (URLCache)")
        let peerMixed = benchRun(threads: threads, count: nil, seconds: plan.seconds, seed: plan.seed &+ 2, progress: progress) { _, _, random in
            let index = zipf.next(&random)
            if random.below(10) == 0 { return peer.put(index, data) }
            return peer.get(index)
        }
        try cache.close()
        let missed = peerMisses.load(ordering: .relaxed)
        for (op, ours, theirs) in [("put", ourPut, peerPut), ("get", ourGet, peerGet), ("mixed", ourMixed, peerMixed)] {
            var mine = BenchRow(size: size, operation: op, subject: "diskcache", entries: count,
                                threads: threads, measurement: ours)
            if theirs.opsPerSecond > 0 { mine.ratioToURLCache = ours.opsPerSecond / theirs.opsPerSecond }
            if let floorRow = mainRows.first(where: { $0.operation == op && $0.subject == "floor" }), count == floorRow.entries {
                mine.ratioToBaseline = ours.opsPerSecond / floorRow.opsPerSecond
            }
            let note = op == "get" && missed > 0 ? "\(missed) of \(theirs.operations) lookups missed" : nil
            rows.append(mine)
            rows.append(BenchRow(size: size, operation: op, subject: "urlcache", entries: count,
                                 threads: threads, measurement: theirs, note: note))
        }
        return rows
    }

    // MARK: - Idle sweeper CPU

    private func runIdle() throws {
        let dir = plan.root + "/idle"
        defer { if !isKept { removeTree(dir) } }
        let entries = plan.entries(1024)
        let interval = Duration.milliseconds(Int64(plan.sweepInterval * 1000))
        progress.phase("idle: \(entries) entries, sweeper every \(plan.sweepInterval) s, \(Int(plan.idleSeconds)) s")
        do {
            let filler = try DiskCache(directory: URL(fileURLWithPath: dir), configuration: configuration(sweepInterval: nil))
            let data = body(1024)
            for i in 0..<entries { try filler.store(data, for: Self.key(i)) }
            try filler.close()
        }
        var config = configuration(sweepInterval: interval)
        let sweeps = Atomic<Int>(0)
        config.onSweepCompleted = { _ in sweeps.add(1, ordering: .relaxed) }
        let cache = try DiskCache(directory: URL(fileURLWithPath: dir), configuration: config)
        let cacheCPU = idleCPU(seconds: plan.idleSeconds)
        try cache.close()
        progress.phase("idle: baseline, no cache open, \(Int(plan.idleSeconds)) s")
        let baseCPU = idleCPU(seconds: plan.idleSeconds)
        let note = String(format: "%.2f ms of CPU in %.0f s with a cache of %d entries open and sweepInterval %g s (%d sweeps were due); the same wait with no cache open: %.2f ms",
                          cacheCPU * 1000, plan.idleSeconds, entries, plan.sweepInterval, sweeps.load(ordering: .relaxed), baseCPU * 1000)
        report.notes.append("idle: " + note)
        report.figures["idle.cpuMilliseconds"] = cacheCPU * 1000
        report.figures["idle.baselineCpuMilliseconds"] = baseCPU * 1000
        report.figures["idle.seconds"] = plan.idleSeconds
    }

    private func idleCPU(seconds: Double) -> Double {
        let before = BenchProcess.cpuSeconds()
        let start = benchNanoseconds()
        let end = start + UInt64(seconds * 1e9)
        // Wake up as seldom as the progress bar allows, so that the wait itself costs nothing.
        let step: UInt64 = progress.isVisible ? 500_000_000 : UInt64.max
        while true {
            let now = benchNanoseconds()
            if now >= end { break }
            progress.phaseFraction(Double(now - start) / Double(end - start))
            var pause = timespec(tv_sec: Int(min(step, end - now) / 1_000_000_000), tv_nsec: Int(min(step, end - now) % 1_000_000_000))
            var remaining = timespec()
            while nanosleep(&pause, &remaining) != 0 && errno == EINTR { pause = remaining }
        }
        return BenchProcess.cpuSeconds() - before
    }
}

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
final class BenchRunner {
    let plan: BenchPlan
    let progress: BenchProgress
    var report: BenchReport

    init(plan: BenchPlan, progress: BenchProgress, report: BenchReport) {
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

    private func body(_ size: Int) -> Data {
        var random = SplitMix64(seed: plan.seed ^ UInt64(size))
        var bytes = [UInt8](repeating: 0, count: size)
        for i in stride(from: 0, to: size, by: 8) {
            let word = random.next()
            for j in 0..<min(8, size - i) { bytes[i + j] = UInt8(truncatingIfNeeded: word >> (8 * UInt64(j))) }
        }
        return Data(bytes)
    }

    /// How many phases the plan has, for the progress bar.
    func phaseCount() -> Int {
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

    func run() throws {
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
        let label = BenchSize.label(size)
        let count = plan.entries(size)
        let data = body(size)
        let storeDir = plan.root + "/store-\(label)"
        let floorDir = plan.root + "/floor-\(label)"
        let sqliteDir = plan.root + "/sqlite-\(label)"
        let sqlitePath = sqliteDir + "/cache.sqlite"
        let threads = plan.threads
        var rows: [BenchRow] = []
        /// Our row, then the floor's and SQLite's, with our rate over each of theirs.
        func add(_ ours: BenchRow, _ floor: BenchRow, _ sqlite: BenchRow? = nil) {
            var ours = ours
            if floor.opsPerSecond > 0 { ours.ratioToBaseline = ours.opsPerSecond / floor.opsPerSecond }
            if let sqlite, sqlite.opsPerSecond > 0 { ours.ratioToSQLite = ours.opsPerSecond / sqlite.opsPerSecond }
            rows += [ours, floor] + (sqlite.map { [$0] } ?? [])
        }
        func row(_ op: String, _ subject: String, _ m: BenchMeasurement, bytes: Bool = true, note: String? = nil) -> BenchRow {
            BenchRow(size: size, operation: op, subject: subject, entries: count, threads: threads,
                     measurement: m, withBytes: bytes, note: note)
        }

        // The floor: the fastest way this machine writes one file per entry, chosen now.
        progress.phase("\(label): floor probe (\(BenchFloor.Candidate.all.count) candidates × \(plan.floorProbeRounds) rounds)")
        let choice = try BenchFloor.probe(in: plan.root + "/floor-probe-\(label)", trash: plan.root, body: data, threads: threads,
                                          durable: plan.isImmediate, maxPuts: min(plan.floorProbePuts, count),
                                          seconds: plan.floorProbeSeconds, rounds: plan.floorProbeRounds,
                                          onProgress: progress.phaseFraction)
        report.floors.append(choice)
        report.notes.append("\(label) \(choice.note)")

        // Every subject is set up before any is timed, then each phase runs in turns (see
        // `inTurns`): a slice of the store's work, a slice of the floor's, a slice of SQLite's,
        // and again, so that a shared disk that speeds up or slows down mid-phase weighs on all.
        var cache: DiskCache? = try DiskCache(directory: URL(fileURLWithPath: storeDir), configuration: configuration())
        let store = cache!
        let floor = try BenchFloor(root: floorDir, bodySize: size, layout: choice.layout, strategy: choice.strategy,
                                   readMethod: choice.readMethod, durable: plan.isImmediate)
        var sqlite: BenchSQLite?
        if plan.compareSQLite {
            try FileManager.default.createDirectory(atPath: sqliteDir, withIntermediateDirectories: true)
            sqlite = try BenchSQLite(path: sqlitePath, threads: threads, synchronous: BenchSQLite.synchronous(immediate: plan.isImmediate))
        }
        let subjects = sqlite == nil ? "diskcache, floor" : "diskcache, floor, sqlite"

        // Fill: every phase needs the entries, so put always runs (its rows are shown when asked for).
        // Turn `slice` puts the entries of `range(slice)`, after a sync (nothing of another's
        // left to write back) and with as much just-freed memory as it will write.
        let fillSlices = max(1, min(10, count / 16))
        func range(_ slice: Int) -> Range<Int> { (slice * count / fillSlices)..<((slice + 1) * count / fillSlices) }
        let putFailures = Atomic<Int>(0)
        let seed = plan.seed
        func fill(_ put: @escaping @Sendable (_ thread: Int, _ index: Int) -> Bool) -> Turn {
            { slice in
                let entries = range(slice)
                return benchRun(threads: threads, count: entries.count, seconds: nil, seed: seed, progress: .silent) { thread, n, _ in
                    if !put(thread, entries.lowerBound + n * threads + thread) { putFailures.add(1, ordering: .relaxed) }
                    return data.count
                }
            }
        }
        progress.phase("\(label): put \(count) entries (\(subjects), in turns)")
        var fills = [
            fill { _, index in (try? store.store(data, for: Self.key(index))) != nil },
            fill { _, index in floor.put(index, body: data) > 0 },
        ]
        if let sqlite { fills.append(fill { thread, index in sqlite.put(thread: thread, key: Self.key(index), body: data) > 0 }) }
        let puts = inTurns(fills, slices: fillSlices) { slice in
            settle()
            BenchProcess.recyclePages(bytes: range(slice).count * size, in: plan.root)
        }
        if putFailures.load(ordering: .relaxed) > 0 {
            throw BenchError("\(putFailures.load(ordering: .relaxed)) puts failed at \(label)")
        }
        if ops.contains(.put) {
            var note: String?
            if threads == 1, let ours = warmUp(puts[0].latencies) {
                let floorWarmUp = warmUp(puts[1].latencies)
                let sqliteWarmUp = puts.count > 2 ? warmUp(puts[2].latencies) : nil
                note = String(format: "first %d puts into the empty cache: %.0f ops/s; steady state (median of %d windows of %d over the rest of the fill): %.0f ops/s; first/steady %.2f×",
                              Self.warmUpPuts, ours.first, ours.windows, Self.warmUpPuts, ours.steady, ours.first / ours.steady)
                let others = [("floor", floorWarmUp), ("sqlite", sqliteWarmUp)].compactMap { name, value in
                    value.map { name + String(format: " %.2f×", $0.first / $0.steady) }
                }
                if !others.isEmpty { note! += " (" + others.joined(separator: ", ") + ")" }
                for (subject, value) in [("", Optional(ours)), ("floor.", floorWarmUp), ("sqlite.", sqliteWarmUp)] {
                    guard let value else { continue }
                    report.figures["\(label).put.\(subject)first\(Self.warmUpPuts)OpsPerSecond"] = value.first
                    report.figures["\(label).put.\(subject)steadyOpsPerSecond"] = value.steady
                    report.figures["\(label).put.\(subject)firstToSteadyRatio"] = value.first / value.steady
                }
            }
            add(row("put", "diskcache", puts[0], note: note), row("put", "floor", puts[1]),
                puts.count > 2 ? row("put", "sqlite", puts[2]) : nil)
        }

        // Timed phases: `timedSlices` turns of each subject, turn `slice` drawing the same
        // random numbers (seeded by the phase and the slice) for every subject.
        let timedSlices = 4
        let sliceSeconds = plan.seconds / Double(timedSlices)
        func timed(phase: UInt64, _ operation: @escaping @Sendable (_ thread: Int, _ random: inout SplitMix64) -> Int) -> Turn {
            { slice in
                benchRun(threads: threads, count: nil, seconds: sliceSeconds,
                         seed: seed &+ phase &+ UInt64(slice) &* 1_000_003, progress: .silent) { thread, _, random in
                    operation(thread, &random)
                }
            }
        }

        /// A cold turn: the same work for every subject, half the entries, each read once in an
        /// order drawn per slice, so that no get is answered from what the turn itself brought
        /// into the page cache, and a subject that reads faster does not get further into warm
        /// blocks. A turn longer than four slices' time stops there.
        func coldTurn(phase: UInt64, _ read: @escaping @Sendable (_ thread: Int, _ index: Int) -> Int) -> Turn {
            { slice in
                var random = SplitMix64(seed: seed &+ phase &+ UInt64(slice) &* 1_000_003)
                var order = Array(0..<count)
                for i in stride(from: count - 1, to: 0, by: -1) { order.swapAt(i, random.below(i + 1)) }
                let shuffled = order
                return benchRun(threads: threads, count: max(1, count / 2), seconds: 4 * sliceSeconds, seed: 0,
                                progress: .silent) { thread, n, _ in
                    read(thread, shuffled[n * threads + thread])
                }
            }
        }

        // Get: uniformly random entries; cold, the page cache dropped before every turn and half
        // the entries read once each (``coldTurn``).
        for (phase, cold) in [(BenchOperation.get, plan.coldReads), (.cold, true)] where ops.contains(phase) {
            let operation = phase.rawValue
            let trees = [storeDir, floorDir, sqliteDir]
            var coldNote: String?
            progress.phase("\(label): \(operation == "cold" ? "cold get" : "get") (\(subjects), in turns)")
            let misses = Atomic<Int>(0)
            // Each subject's get of entry `index`.
            var reads: [@Sendable (_ thread: Int, _ index: Int) -> Int] = [
                { _, index in
                    guard let value = store.data(for: Self.key(index)) else {
                        misses.add(1, ordering: .relaxed)
                        return 0
                    }
                    return value.count
                },
                { _, index in floor.get(index) },
            ]
            if let sqlite { reads.append { thread, index in sqlite.get(thread: thread, key: Self.key(index)) } }
            var gets = reads.map { read in
                cold ? coldTurn(phase: 1, read) : timed(phase: 1) { thread, random in read(thread, random.below(count)) }
            }
            // Cold, what each subject's turns cost the device holding the caches.
            var deviceReads = [(requests: Int64, bytes: Int64)?](repeating: cold ? (0, 0) : nil, count: gets.count)
            if cold {
                gets = gets.enumerated().map { subject, turn in
                    { slice in
                        let before = BenchProcess.deviceReads(of: storeDir)
                        let measured = turn(slice)
                        if let before, let after = BenchProcess.deviceReads(of: storeDir), let sum = deviceReads[subject] {
                            deviceReads[subject] = (sum.requests + after.requests - before.requests, sum.bytes + after.bytes - before.bytes)
                        } else {
                            deviceReads[subject] = nil
                        }
                        return measured
                    }
                }
            }
            settle()
            let measured = inTurns(gets, slices: timedSlices) { _ in
                if cold { coldNote = BenchProcess.dropPageCache(fallbackTrees: trees) }
            }
            func note(_ subject: Int, _ notes: String?...) -> String? {
                var notes = notes.compactMap { $0 }
                if let reads = deviceReads[subject], measured[subject].operations > 0 {
                    let gets = Double(measured[subject].operations)
                    notes.append(String(format: "the device read %.1f KiB in %.2f requests a get (all processes)",
                                        Double(reads.bytes) / 1024 / gets, Double(reads.requests) / gets))
                }
                return notes.isEmpty ? nil : notes.joined(separator: "; ")
            }
            let missed = misses.load(ordering: .relaxed)
            add(row(operation, "diskcache", measured[0], note: note(0, coldNote, missed > 0 ? "\(missed) misses" : nil)),
                row(operation, "floor", measured[1], note: note(1)),
                measured.count > 2 ? row(operation, "sqlite", measured[2], note: note(2)) : nil)
        }

        // Mixed: 90 % get, 10 % put (replacing the value), Zipf-distributed entries.
        if ops.contains(.mixed) {
            let zipf = BenchZipf(count: count, exponent: plan.zipfExponent, seed: plan.seed)
            progress.phase("\(label): mixed 90/10 (\(subjects), in turns)")
            var mixes = [
                timed(phase: 2) { _, random in
                    let index = zipf.next(&random)
                    if random.below(10) == 0 {
                        _ = try? store.store(data, for: Self.key(index))
                        return data.count
                    }
                    return store.data(for: Self.key(index))?.count ?? 0
                },
                timed(phase: 2) { _, random in
                    let index = zipf.next(&random)
                    if random.below(10) == 0 { return floor.put(index, body: data, replacing: true) }
                    return floor.get(index)
                },
            ]
            if let sqlite {
                mixes.append(timed(phase: 2) { thread, random in
                    let index = zipf.next(&random)
                    if random.below(10) == 0 { return sqlite.put(thread: thread, key: Self.key(index), body: data) }
                    return sqlite.get(thread: thread, key: Self.key(index))
                })
            }
            let measured = inTurns(mixes, slices: timedSlices) { _ in settle() }
            add(row("mixed", "diskcache", measured[0]), row("mixed", "floor", measured[1]),
                measured.count > 2 ? row("mixed", "sqlite", measured[2]) : nil)
        }
        // Churn: at capacity. Each subject holds the fill's `count` entries and puts new keys
        // for the phase; the floor unlinks, and SQLite deletes, the oldest for each, the store
        // evicts through its `countLimit`. The store's count and size are sampled every 64 puts.
        var floorOldest = 0
        if ops.contains(.churn) {
            progress.phase("\(label): churn at \(count) entries (\(subjects), in turns)")
            let storeNext = Atomic<Int>(count), floorNext = Atomic<Int>(count), sqliteNext = Atomic<Int>(count)
            let peakCount = Atomic<Int>(0), peakBytes = Atomic<Int>(0)
            store.countLimit = count
            let storeTurn = timed(phase: 3) { _, _ in
                let index = storeNext.add(1, ordering: .relaxed).oldValue
                guard (try? store.store(data, for: Self.key(index))) != nil else { return 0 }
                if index % 64 == 0 {
                    peakCount.max(store.count, ordering: .relaxed)
                    peakBytes.max(Int(store.totalSize), ordering: .relaxed)
                }
                return data.count
            }
            var churns: [Turn] = [
                // The sweep a turn's puts started may go on after the turn (a writer waits only
                // until there is room): its time is the turn's, not the next subject's.
                { slice in
                    var measured = storeTurn(slice)
                    let start = benchNanoseconds()
                    store.sweep()
                    measured.seconds += Double(benchNanoseconds() - start) / 1e9
                    return measured
                },
                timed(phase: 3) { _, _ in
                    let index = floorNext.add(1, ordering: .relaxed).oldValue
                    let written = floor.put(index, body: data)
                    floor.remove(index - count)
                    return written
                },
            ]
            if let sqlite {
                churns.append(timed(phase: 3) { thread, _ in
                    let index = sqliteNext.add(1, ordering: .relaxed).oldValue
                    let written = sqlite.put(thread: thread, key: Self.key(index), body: data)
                    sqlite.remove(thread: thread, key: Self.key(index - count))
                    return written
                })
            }
            let measured = inTurns(churns, slices: timedSlices) { _ in settle() }
            store.countLimit = nil
            floorOldest = floorNext.load(ordering: .relaxed) - count
            let note = "each subject at \(count) entries, the oldest dropped for each new key; the store's countLimit \(count): "
                + "at most \(peakCount.load(ordering: .relaxed)) entries, \(BenchSize.label(peakBytes.load(ordering: .relaxed))) "
                + "seen (sampled every 64 puts); \(count) entries hold \(BenchSize.label(count * size)) of bodies"
            report.figures["\(label).churn.peakCount"] = Double(peakCount.load(ordering: .relaxed))
            report.figures["\(label).churn.peakBytes"] = Double(peakBytes.load(ordering: .relaxed))
            add(row("churn", "diskcache", measured[0], note: note), row("churn", "floor", measured[1]),
                measured.count > 2 ? row("churn", "sqlite", measured[2]) : nil)
        }
        sqlite?.close()
        sqlite = nil

        // Open: close, then reopen (journal replay) a few times; memory the index takes.
        if ops.contains(.open) {
            progress.phase("\(label): open/replay (diskcache)")
            try cache?.close()
            cache = nil
            settle()
            var opens = BenchMeasurement()
            var perEntry: [Double] = []
            var entriesSeen = 0
            var replayed = 0
            for repetition in 0..<plan.openRepetitions {
                if plan.coldReads { _ = BenchProcess.dropPageCache(fallbackTrees: [storeDir]) }
                let mallocBefore = BenchProcess.mallocedBytes()
                let start = benchNanoseconds()
                let reopened = try DiskCache(directory: URL(fileURLWithPath: storeDir), configuration: configuration())
                let elapsed = benchNanoseconds() - start
                let mallocAfter = BenchProcess.mallocedBytes()
                entriesSeen = reopened.count
                replayed = reopened.statistics.recovery.recordsReplayed
                if let before = mallocBefore, let after = mallocAfter, entriesSeen > 0 {
                    perEntry.append(Double(after - before) / Double(entriesSeen))
                }
                opens.latencies.append(elapsed)
                try reopened.close()
                progress.phaseFraction(Double(repetition + 1) / Double(plan.openRepetitions))
            }
            opens.operations = entriesSeen * opens.latencies.count
            opens.seconds = Double(opens.latencies.reduce(0, +)) / 1e9
            let median = perEntry.isEmpty ? 0 : perEntry.sorted()[perEntry.count / 2]
            report.figures["\(label).open.indexBytesPerEntry"] = median
            report.figures["\(label).open.medianMilliseconds"] = Double(opens.latencies.sorted()[opens.latencies.count / 2]) / 1e6

            progress.phase("\(label): open (floor: list the directories + stat)")
            let scans = timeOpens(trees: [floorDir]) { floor.scan() }
            var sqliteOpens: BenchMeasurement?
            if plan.compareSQLite {
                progress.phase("\(label): open (sqlite: open + SELECT count(*))")
                sqliteOpens = try timeOpens(trees: [sqliteDir]) { try BenchSQLite.openAndCount(path: sqlitePath) }
            }
            let note = String(format: "%d entries, %d journal records replayed; index memory %.0f bytes/entry (malloc'd bytes after open minus before, median of %d)",
                              entriesSeen, replayed, median, perEntry.count)
            add(row("open", "diskcache", opens, bytes: false, note: note), row("open", "floor", scans, bytes: false),
                sqliteOpens.map { row("open", "sqlite", $0, bytes: false) })
            cache = try DiskCache(directory: URL(fileURLWithPath: storeDir), configuration: configuration())
        }

        // Sweep: lower the capacity so that one pass evicts half of the entries.
        if ops.contains(.sweep) {
            progress.phase("\(label): sweep evicting half (diskcache)")
            try cache?.close()
            let sweeping = try DiskCache(directory: URL(fileURLWithPath: storeDir), configuration: configuration(sweepInterval: nil))
            settle()
            let before = sweeping.count
            let target = Double(sweeping.totalSize) * 0.5 / sweeping.configuration.lowWatermark
            let start = benchNanoseconds()
            sweeping.diskCapacity = Int64(target)  // schedules the pass at once
            sweeping.sweep()                        // waits for it (and finds nothing more to do)
            let elapsed = benchNanoseconds() - start
            let evicted = before - sweeping.count
            try sweeping.close()
            cache = nil
            var m = BenchMeasurement()
            m.latencies = [elapsed]
            m.operations = evicted
            m.seconds = Double(elapsed) / 1e9
            m.bytes = Int64(evicted) * Int64(size)

            progress.phase("\(label): sweep (floor: unlink)")
            settle()
            let floorStart = benchNanoseconds()
            for index in floorOldest..<(floorOldest + evicted) { floor.remove(index) }
            let floorElapsed = benchNanoseconds() - floorStart
            var f = BenchMeasurement()
            f.latencies = [floorElapsed]
            f.operations = evicted
            f.seconds = Double(floorElapsed) / 1e9
            f.bytes = Int64(evicted) * Int64(size)
            add(row("sweep", "diskcache", m, note: "evicted \(evicted) of \(before) entries in one pass"),
                row("sweep", "floor", f))
        }
        try cache?.close()
        cache = nil

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
        if !isKept { removeTree(storeDir); removeTree(floorDir); removeTree(sqliteDir) }
    }

    /// `plan.openRepetitions` timed runs of `open`, which returns the entries it found; ops/s
    /// is entries per second, as for the store's replay.
    private func timeOpens(trees: [String], _ open: () throws -> Int) rethrows -> BenchMeasurement {
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
    private func inTurns(_ turns: [Turn], slices: Int, before: (_ slice: Int) -> Void) -> [BenchMeasurement] {
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

    var isKept = false

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

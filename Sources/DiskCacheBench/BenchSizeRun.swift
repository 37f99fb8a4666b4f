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

/// One body size's main phases (put, get, cold, mixed, churn, open, sweep): the store, the
/// floor and SQLite set up and filled alike, then each operation run in turns
/// (``BenchRunner/inTurns(_:slices:before:)``), one method each, adding its rows.
final class BenchSizeRun {
    let runner: BenchRunner
    let size: Int
    let label: String
    let count: Int
    let data: Data
    let storeDir: String
    let floorDir: String
    let sqliteDir: String
    let sqlitePath: String
    let threads: Int
    let seed: UInt64
    /// Open while the store is (closed and opened again by `open`, closed by `sweep`).
    var cache: DiskCache?
    let store: DiskCache
    let floor: BenchFloor
    var sqlite: BenchSQLite?
    let subjects: String
    var rows: [BenchRow] = []
    /// The floor's oldest entry once churn has dropped some (`sweep` removes from there).
    var floorOldest = 0

    var plan: BenchPlan { runner.plan }
    var progress: BenchProgress { runner.progress }
    var report: BenchReport {
        get { runner.report }
        set { runner.report = newValue }
    }
    static func key(_ index: Int) -> String { BenchRunner.key(index) }

    /// Sets up every subject for `size` (the floor chosen by probing now); nothing is timed yet.
    init(_ runner: BenchRunner, size: Int) throws {
        self.runner = runner
        self.size = size
        let plan = runner.plan, progress = runner.progress
        label = BenchSize.label(size)
        count = plan.entries(size)
        data = runner.body(size)
        storeDir = plan.root + "/store-\(label)"
        floorDir = plan.root + "/floor-\(label)"
        sqliteDir = plan.root + "/sqlite-\(label)"
        sqlitePath = sqliteDir + "/cache.sqlite"
        threads = plan.threads
        seed = plan.seed

        // The floor: the fastest way this machine writes one file per entry, chosen now.
        progress.phase("\(label): floor probe (\(BenchFloor.Candidate.all.count) candidates × \(plan.floorProbeRounds) rounds)")
        let choice = try BenchFloor.probe(in: plan.root + "/floor-probe-\(label)", trash: plan.root, body: data, threads: threads,
                                          durable: plan.isImmediate, maxPuts: min(plan.floorProbePuts, count),
                                          seconds: plan.floorProbeSeconds, rounds: plan.floorProbeRounds,
                                          onProgress: progress.phaseFraction)
        runner.report.floors.append(choice)
        runner.report.notes.append("\(label) \(choice.note)")

        // Every subject is set up before any is timed, then each phase runs in turns (see
        // `inTurns`): a slice of the store's work, a slice of the floor's, a slice of SQLite's,
        // and again, so that a shared disk that speeds up or slows down mid-phase weighs on all.
        cache = try DiskCache(directory: URL(fileURLWithPath: storeDir), configuration: runner.configuration())
        store = cache!
        floor = try BenchFloor(root: floorDir, bodySize: size, layout: choice.layout, strategy: choice.strategy,
                               readMethod: choice.readMethod, durable: plan.isImmediate)
        if plan.compareSQLite {
            try FileManager.default.createDirectory(atPath: sqliteDir, withIntermediateDirectories: true)
            sqlite = try BenchSQLite(path: sqlitePath, threads: threads, synchronous: BenchSQLite.synchronous(immediate: plan.isImmediate))
        }
        subjects = sqlite == nil ? "diskcache, floor" : "diskcache, floor, sqlite"
    }

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

    func settle() { runner.settle() }
    func warmUp(_ latencies: [UInt64]) -> (first: Double, steady: Double, windows: Int)? { runner.warmUp(latencies) }
    func inTurns(_ turns: [BenchRunner.Turn], slices: Int, before: (_ slice: Int) -> Void) -> [BenchMeasurement] {
        runner.inTurns(turns, slices: slices, before: before)
    }

    // MARK: - Turns

    /// Timed phases: `timedSlices` turns of each subject, turn `slice` drawing the same
    /// random numbers (seeded by the phase and the slice) for every subject.
    let timedSlices = 4
    var sliceSeconds: Double { plan.seconds / Double(timedSlices) }

    func timed(phase: UInt64, _ operation: @escaping @Sendable (_ thread: Int, _ random: inout SplitMix64) -> Int) -> BenchRunner.Turn {
        let threads = threads, sliceSeconds = sliceSeconds, seed = seed
        return { slice in
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
    func coldTurn(phase: UInt64, _ read: @escaping @Sendable (_ thread: Int, _ index: Int) -> Int) -> BenchRunner.Turn {
        let threads = threads, sliceSeconds = sliceSeconds, seed = seed, count = count
        return { slice in
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

    // MARK: - Operations

    /// Put: every phase needs the entries, so the fill always runs; its rows are added when
    /// `put` was asked for.
    func fill() throws {
        let store = store, floor = floor, sqlite = sqlite, data = data, threads = threads, seed = seed, count = count, size = size
        // Turn `slice` puts the entries of `range(slice)`, after a sync (nothing of another's
        // left to write back) and with as much just-freed memory as it will write.
        let fillSlices = max(1, min(10, count / 16))
        func range(_ slice: Int) -> Range<Int> { (slice * count / fillSlices)..<((slice + 1) * count / fillSlices) }
        let putFailures = Atomic<Int>(0)
        func fill(_ put: @escaping @Sendable (_ thread: Int, _ index: Int) -> Bool) -> BenchRunner.Turn {
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
        if plan.operations.contains(.put) {
            var note: String?
            if threads == 1, let ours = warmUp(puts[0].latencies) {
                let floorWarmUp = warmUp(puts[1].latencies)
                let sqliteWarmUp = puts.count > 2 ? warmUp(puts[2].latencies) : nil
                note = String(format: "first %d puts into the empty cache: %.0f ops/s; steady state (median of %d windows of %d over the rest of the fill): %.0f ops/s; first/steady %.2f×",
                              BenchRunner.warmUpPuts, ours.first, ours.windows, BenchRunner.warmUpPuts, ours.steady, ours.first / ours.steady)
                let others = [("floor", floorWarmUp), ("sqlite", sqliteWarmUp)].compactMap { name, value in
                    value.map { name + String(format: " %.2f×", $0.first / $0.steady) }
                }
                if !others.isEmpty { note! += " (" + others.joined(separator: ", ") + ")" }
                for (subject, value) in [("", Optional(ours)), ("floor.", floorWarmUp), ("sqlite.", sqliteWarmUp)] {
                    guard let value else { continue }
                    report.figures["\(label).put.\(subject)first\(BenchRunner.warmUpPuts)OpsPerSecond"] = value.first
                    report.figures["\(label).put.\(subject)steadyOpsPerSecond"] = value.steady
                    report.figures["\(label).put.\(subject)firstToSteadyRatio"] = value.first / value.steady
                }
            }
            add(row("put", "diskcache", puts[0], note: note), row("put", "floor", puts[1]),
                puts.count > 2 ? row("put", "sqlite", puts[2]) : nil)
        }

    }

    /// Get: uniformly random entries; cold, the page cache dropped before every turn and half
    /// the entries read once each (``coldTurn(phase:_:)``).
    func get(_ phase: BenchOperation, cold: Bool) {
        let store = store, floor = floor, sqlite = sqlite, count = count, storeDir = storeDir
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

    /// Mixed: 90 % get, 10 % put (replacing the value), Zipf-distributed entries.
    func mixed() {
        let store = store, floor = floor, sqlite = sqlite, data = data, count = count
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

    /// Churn: at capacity. Each subject holds the fill's `count` entries and puts new keys
    /// for the phase; the floor unlinks, and SQLite deletes, the oldest for each, the store
    /// evicts through its `countLimit`. The store's count and size are sampled every 64 puts.
    func churn() {
        let store = store, floor = floor, sqlite = sqlite, data = data, count = count
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
        var churns: [BenchRunner.Turn] = [
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

    /// SQLite's part ends before the store is closed and opened again.
    func closeSQLite() {
        sqlite?.close()
        sqlite = nil
    }

    /// Open: close, then reopen (journal replay) a few times; memory the index takes.
    func open() throws {
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
            let reopened = try DiskCache(directory: URL(fileURLWithPath: storeDir), configuration: runner.configuration())
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
        let scans = runner.timeOpens(trees: [floorDir]) { floor.scan() }
        var sqliteOpens: BenchMeasurement?
        if plan.compareSQLite {
            progress.phase("\(label): open (sqlite: open + SELECT count(*))")
            sqliteOpens = try runner.timeOpens(trees: [sqliteDir]) { try BenchSQLite.openAndCount(path: sqlitePath) }
        }
        let note = String(format: "%d entries, %d journal records replayed; index memory %.0f bytes/entry (malloc'd bytes after open minus before, median of %d)",
                          entriesSeen, replayed, median, perEntry.count)
        add(row("open", "diskcache", opens, bytes: false, note: note), row("open", "floor", scans, bytes: false),
            sqliteOpens.map { row("open", "sqlite", $0, bytes: false) })
        cache = try DiskCache(directory: URL(fileURLWithPath: storeDir), configuration: runner.configuration())
    }

    /// Sweep: lower the capacity so that one pass evicts half of the entries.
    func sweep() throws {
        progress.phase("\(label): sweep evicting half (diskcache)")
        try cache?.close()
        let sweeping = try DiskCache(directory: URL(fileURLWithPath: storeDir), configuration: runner.configuration(sweepInterval: nil))
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

    /// The store closed, once every phase has run.
    func close() throws {
        try cache?.close()
        cache = nil
    }
}

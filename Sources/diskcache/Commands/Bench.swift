import ArgumentParser
import DiskCache
import DiskCacheBench
import Foundation
import MemoryCache
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `diskcache bench`: throughput and latency of the store for cache-like workloads, each row
/// beside a baseline measured in the same run.
struct Bench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure put, get, mixed, churn at capacity, open and sweep against the raw-file floor and SQLite.",
        discussion: """
        For each body size and operation, prints ops/s, MB/s and latency percentiles (p50, p99, \
        max) of the store, of the raw-file floor and of SQLite, all measured in the same run on \
        the same workload. The "× base" column is the store's rate over the floor's, "× sqlite" \
        over SQLite's.

        The floor is the cheapest way this machine can do the same work: one file per entry \
        holding the body, named by 32 hex digits, no journal, index or checksum. How to write \
        it is chosen by measurement at the start of each body size: a short probe (a few \
        interleaved rounds of up to --floor-probe-puts puts, then as many gets, in scratch \
        directories) tries one level of 256 shard directories made up front and one flat \
        directory, each with a temporary file in the directory renamed into place, a temporary \
        file in tmp/ renamed, O_TMPFILE + linkat, and the final name created directly with \
        O_CREAT|O_EXCL. The fastest writer becomes the floor (and reads with pread or one \
        read, whichever was faster); the report names it and every candidate's rate.

        SQLite (--compare sqlite, the default) runs through the system libsqlite3 in this \
        process: one table (key TEXT PRIMARY KEY, value BLOB NOT NULL), WAL, \
        synchronous=NORMAL (FULL with --durability immediate), one autocommit INSERT OR \
        REPLACE per put, a SELECT per get copied into fresh memory, the store's own keys, one \
        connection per thread. --compare urlcache adds Foundation's URLCache (combine them: \
        --compare sqlite,urlcache); --compare none runs neither.

        Put, get and mixed run in turns: a slice of the store's work, a slice of the floor's, \
        a slice of SQLite's, and again, so that a shared disk whose speed changes mid-phase \
        weighs on all of them alike. Each turn of a fill starts after a sync.

        Operations: put (fill the cache with --entries fresh keys; the report also gives the \
        rate of the first 1,000 puts into the empty cache beside the steady state's), get \
        (uniformly random keys), mixed (90 % get / 10 % put, Zipf-distributed keys), churn (at \
        capacity: every subject holds the --entries it was filled with and puts new keys for \
        --duration seconds, the floor unlinking and SQLite deleting the oldest entry for each, \
        the store evicting through a countLimit of --entries; the report gives the most entries \
        and bytes the store was seen to hold), open (close and reopen: journal replay, plus \
        index memory per entry), sweep (one pass evicting half the entries). Not run by \
        default: cold (get with the page cache dropped before every turn: by drop_caches as \
        root, else posix_fadvise(DONTNEED) of the benchmark's own files; the report says \
        which; a turn reads half the entries, each once, in the same order for every subject, \
        and the report gives what the device read per get), sweep-get (get throughput while a \
        sweep evicts, against the same gets without it), idle (CPU used by an open, idle \
        cache whose sweeper runs every --sweep-interval seconds, over --idle-seconds) and \
        async (64 tasks doing 90 % gets / 10 % puts with the async API, then with the \
        synchronous API called from the tasks, each beside a task that sleeps 1 ms in a loop \
        and reports how late it wakes; throughput against the synchronous API on 2 threads) \
        and streaming (one body of each size, e.g. --sizes 1G, written through a Writer, copied \
        in with store(contentsOf:), read with chunks(for:), withFile(for:) and data(for:), and \
        moved in, each beside plain pwrite/copy/pread of the same bytes, with the peak resident \
        memory each grew the process by).

        With --processes N, put and get are measured instead with one cache used by N \
        processes at once (child processes of this tool, each putting its share of --entries \
        keys, then all reading random keys for --duration seconds), beside one process alone on \
        a shared cache and one alone on a cache opened exclusively: the three in turns, \
        --process-rounds times, medians reported. No floor or peer runs then: the one-process \
        rates of the same run are the baselines.

        Durability is `none` by default: the numbers are those of the page cache and the \
        filesystem, not of the device's flushes. With --durability immediate the floor fsyncs \
        each file and its directory, and SQLite runs with synchronous=FULL.
        """
    )

    @Argument(help: "Directory to run in (a new temporary directory by default). Removed afterwards unless --keep; an existing directory is kept and only the benchmark's subdirectories are removed.")
    var directory: String?

    @Flag(help: "Keep the benchmark's caches and files afterwards.")
    var keep = false

    @Option(help: "Body sizes, comma-separated: 512, 1K, 16K, 4M (binary units).")
    var sizes = "1K,16K,256K,4M"

    @Option(help: "Entries per body size (default: --byte-budget / size, between 64 and 10000).")
    var entries: Int?

    @Option(help: "Bytes of bodies per size when --entries is not given.")
    var byteBudget = "64M"

    @Option(help: "Operations, comma-separated: put, get, cold, mixed, churn, open, sweep, sweep-get, idle, async, streaming, or all.")
    var operations = "put,get,mixed,churn,open,sweep"

    @Option(help: "Durability mode of the store: none, batched, batched:<milliseconds>, immediate.")
    var durability = "none"

    @Option(help: "Threads issuing operations at once.")
    var threads = 1

    @Option(help: "Seconds each timed phase (get, mixed) runs.")
    var duration = 1.0

    @Flag(help: "Empty the page cache before reads (needs root; otherwise evicts the benchmark's own files with posix_fadvise and says so); get then reads as cold does.")
    var cold = false

    @Option(help: "Peers to run on the same workload, comma-separated: sqlite (the C API, in process), urlcache (Foundation's URLCache, on disk), or none.")
    var compare = "sqlite"

    @Option(help: "Entries for the URLCache comparison (it lists its directory on every call, so keep this to a few thousand).")
    var urlcacheEntries = 1000

    @Option(help: "The store's inlineThreshold: bodies of at most this size live in the .meta file (0: none). Default: the store's own default (\(DiskCache.Configuration().inlineThreshold) bytes).")
    var inlineThreshold: String?

    @Option(help: "Seconds the floor probe may take in all, per body size.")
    var floorProbeSeconds = 5.0

    @Option(help: "Interleaved rounds of the floor probe.")
    var floorProbeRounds = 3

    @Option(help: "Most puts per candidate and round in the floor probe (then as many gets).")
    var floorProbePuts = 2000

    @Option(help: "Zipf exponent of the mixed workload's key popularity.")
    var zipf = 0.99

    @Option(help: "Seed of the workload's random numbers.")
    var seed: UInt64 = 1

    @Option(help: "Times the open operation reopens the cache (its p50 is the median).")
    var openRepetitions = 5

    @Option(help: "For idle: seconds to wait with the cache open.")
    var idleSeconds = 60.0

    @Option(help: "For idle: the cache's sweepInterval in seconds.")
    var sweepInterval = 1.0

    @Option(help: "Measure one cache used by this many processes at once against one process (see above).")
    var processes: Int?

    @Option(help: "With --processes: rounds of the three setups (the report gives their medians).")
    var processRounds = 3

    @Option(help: "Replay a trace instead: libCacheSim's oracleGeneral (.bin) or CSV (.csv) form, one key a line (optionally a size after it), or synthetic[:objects=N,requests=N,zipf=S,onehit=F,scan-every=N,scan-length=N,seed=N]. Reports the store's miss ratio, puts and evictions at each of --capacities beside LRU, S3-FIFO, SIEVE and Belady simulated on the same trace.")
    var trace: String?

    @Option(help: "With --trace: cache sizes, as percentages of the trace's distinct objects, counts, or bytes (1%,5%,10%, 500,2000 or 64M,1G: the store's diskCapacity, each miss stored at the request's size).")
    var capacities = "1%,2%,5%,10%,20%,30%"

    @Option(help: "With --trace: the store's eviction policies to replay, comma-separated: s3fifo, lru.")
    var policies = "s3fifo,lru"

    @Option(name: .customLong("min-uses"),
            help: "With --trace: admission settings to replay, comma-separated: 1 stores every miss, N only a key's Nth (DiskCache.Admission.minimumUses).")
    var minUses = "1,2"

    @Option(help: "The store's lowWatermark, the fraction of a limit a sweep evicts down to (default: the store's own).")
    var lowWatermark: Double?

    @Flag(help: "Print the results as JSON (the progress bar still goes to standard error).")
    var json = false

    @Flag(help: "No progress bar.")
    var quiet = false

    func validate() throws {
        guard threads >= 1 else { throw ValidationError("--threads must be at least 1") }
        guard duration > 0 else { throw ValidationError("--duration must be positive") }
        if let entries, entries < 2 { throw ValidationError("--entries must be at least 2") }
        guard openRepetitions >= 1 else { throw ValidationError("--open-repetitions must be at least 1") }
        _ = try parsedSizes()
        _ = try parsedOperations()
        _ = try parsedDurability()
        if let inlineThreshold, BenchSize.parse(inlineThreshold) == nil {
            throw ValidationError("--inline-threshold: expected a size such as 0, 4K or 8K")
        }
        guard BenchSize.parse(byteBudget) != nil else { throw ValidationError("--byte-budget: expected a size such as 64M") }
        guard floorProbeSeconds > 0, floorProbeRounds >= 1, floorProbePuts >= 1 else {
            throw ValidationError("--floor-probe-seconds, --floor-probe-rounds and --floor-probe-puts must be positive")
        }
        _ = try parsedPeers()
        if let processes, processes < 2 { throw ValidationError("--processes must be at least 2") }
        guard processRounds >= 1 else { throw ValidationError("--process-rounds must be at least 1") }
        _ = try parsedPolicies()
        do { _ = try BenchTraceRun.parseMinimumUses(minUses) } catch let error as BenchTrace.Error {
            throw ValidationError(error.description)
        }
    }

    private func parsedPolicies() throws -> [EvictionPolicy] {
        try policies.split(separator: ",").map { name in
            switch name.trimmingCharacters(in: .whitespaces).lowercased() {
            case "s3fifo", "s3-fifo": return .s3FIFO
            case "lru": return .leastRecentlyUsed
            default: throw ValidationError("--policies: unknown '\(name)' (known: s3fifo, lru)")
            }
        }
    }

    private func runTrace(_ argument: String, root: String) throws {
        let progress = BenchProgress(enabled: !quiet)
        if !quiet { progress.note("bench: reading \(argument)") }
        let loaded: BenchTrace
        let capacityList: [BenchTraceSimulation.Capacity]
        let usesList: [Int]
        do {
            usesList = try BenchTraceRun.parseMinimumUses(minUses)
            loaded = try BenchTrace.load(argument)
            capacityList = try BenchTraceRun.parseCapacities(capacities, objects: loaded.objectCount)
        } catch let error as BenchTrace.Error {
            throw ValidationError(error.description)
        }
        if !quiet {
            progress.note("bench: \(loaded.name): \(loaded.requestCount) requests, \(loaded.objectCount) objects; capacities \(capacityList.map { $0.inBytes ? BenchSize.label(Int($0.limit)) : "\($0.limit)" }.joined(separator: ","))")
        }
        let run = BenchTraceRun(trace: loaded, capacities: capacityList, policies: try parsedPolicies(),
                                minimumUses: usesList, lowWatermark: lowWatermark, root: root, progress: progress)
        let report = try run.run()
        progress.finish()
        let output: String
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            output = String(decoding: try encoder.encode(report), as: UTF8.self) + "\n"
        } else {
            output = BenchTraceRun.table(report)
        }
        FileHandle.standardOutput.write(Data(output.utf8))
    }

    static let peers = ["sqlite", "urlcache"]

    /// `--compare`: the peers in the order given; `none` alone means no peer.
    private func parsedPeers() throws -> [String] {
        let names = compare.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        if names == ["none"] { return [] }
        guard !names.isEmpty else { throw ValidationError("--compare: expected sqlite, urlcache, both (sqlite,urlcache) or none") }
        for name in names where !Self.peers.contains(name) {
            throw ValidationError("--compare: unknown peer '\(name)' (known: \(Self.peers.joined(separator: ", ")), or none)")
        }
        return names.reduce(into: []) { if !$0.contains($1) { $0.append($1) } }
    }

    private func parsedSizes() throws -> [Int] {
        let list = sizes.split(separator: ",").map { String($0) }
        let parsed = list.compactMap(BenchSize.parse)
        guard !list.isEmpty, parsed.count == list.count, parsed.allSatisfy({ $0 >= 1 }) else {
            throw ValidationError("--sizes: expected sizes such as 1K,16K,256K,4M")
        }
        return parsed
    }

    private func parsedOperations() throws -> Set<BenchOperation> {
        var result = Set<BenchOperation>()
        for name in operations.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces).lowercased() }) {
            if name == "all" { result.formUnion(BenchOperation.allCases); continue }
            guard let op = BenchOperation(rawValue: name) else {
                throw ValidationError("--operations: unknown '\(name)' (known: \(BenchOperation.allCases.map(\.rawValue).joined(separator: ", ")), all)")
            }
            result.insert(op)
        }
        return result
    }

    private func parsedDurability() throws -> DiskCache.Durability { try Self.parseDurability(durability) }

    /// `none`, `batched`, `batched:<milliseconds>` or `immediate` (the bench's and its workers' `--durability`).
    static func parseDurability(_ argument: String) throws -> DiskCache.Durability {
        let text = argument.lowercased()
        switch text {
        case "none": return .none
        case "batched": return .batched
        case "immediate": return .immediate
        default:
            if text.hasPrefix("batched:"), let ms = Int64(text.dropFirst("batched:".count)), ms > 0 {
                return .batched(interval: .milliseconds(ms))
            }
            throw ValidationError("--durability: expected none, batched, batched:<milliseconds> or immediate")
        }
    }

    func run() throws {
        let sizes = try parsedSizes()
        let operations = try parsedOperations()
        let budget = BenchSize.parse(byteBudget)!
        let fixedEntries = entries
        let entriesFor: (Int) -> Int = { size in fixedEntries ?? min(10_000, max(64, budget / max(1, size))) }

        // Where to run.
        let fm = FileManager.default
        let root: String
        var createdRoot = false
        if let directory {
            var isDirectory: ObjCBool = false
            if !fm.fileExists(atPath: directory, isDirectory: &isDirectory) {
                try fm.createDirectory(atPath: directory, withIntermediateDirectories: true)
                createdRoot = true
            } else if !isDirectory.boolValue {
                throw ValidationError("\(directory) is not a directory")
            }
            root = (directory as NSString).standardizingPath + "/diskcache-bench-\(getpid())"
        } else {
            var template = Array((NSTemporaryDirectory() as NSString).appendingPathComponent("diskcache-bench-XXXXXX").utf8CString)
            guard let made = mkdtemp(&template) else { throw ValidationError("cannot create a temporary directory") }
            root = String(cString: made)
            createdRoot = true
        }
        try fm.createDirectory(atPath: root, withIntermediateDirectories: true)
        let cleanupPath = directory == nil || !createdRoot ? root : directory!
        let recentDeletion = BenchDeletions.recent(onFileSystemOf: root)
        defer {
            if !keep {
                let device = BenchDeletions.device(of: root)
                try? fm.removeItem(atPath: cleanupPath)
                if let device { BenchDeletions.record(device: device) }
            }
        }

        if let trace {
            try runTrace(trace, root: root)
            return
        }
        let threshold = inlineThreshold.flatMap(BenchSize.parse) ?? DiskCache.Configuration().inlineThreshold
        if let processes {
            let progress = BenchProgress(enabled: !quiet)
            if !quiet {
                progress.note("bench: \(root), \(processes) processes, durability \(try parsedDurability()), sizes \(sizes.map(BenchSize.label).joined(separator: ",")), entries " +
                              sizes.map { "\(BenchSize.label($0))=\(entriesFor($0))" }.joined(separator: " "))
            }
            let scaling = BenchProcesses(root: root, sizes: sizes, entries: entriesFor, durability: try parsedDurability(),
                                         durabilityArgument: durability,
                                         inlineThreshold: threshold, seconds: duration, processes: processes,
                                         rounds: processRounds, seed: seed, progress: progress)
            var report = try scaling.run()
            progress.finish()
            if keep { report.notes.append("kept: \(root)") }
            let output = json ? try BenchReport.json(report) : BenchProcesses.table(report)
            FileHandle.standardOutput.write(Data(output.utf8))
            return
        }
        let peers = try parsedPeers()
        var plan = BenchPlan(root: root, sizes: sizes, entries: entriesFor, operations: operations,
                             durability: try parsedDurability(), threads: threads, seconds: duration, coldReads: cold,
                             inlineThreshold: threshold, zipfExponent: zipf, seed: seed,
                             compareSQLite: peers.contains("sqlite"), compareURLCache: peers.contains("urlcache"),
                             urlcacheEntries: urlcacheEntries, idleSeconds: idleSeconds, sweepInterval: sweepInterval,
                             openRepetitions: openRepetitions, floorProbeSeconds: floorProbeSeconds,
                             floorProbeRounds: floorProbeRounds, floorProbePuts: floorProbePuts)
        plan.lowWatermark = lowWatermark
        let date = ISO8601DateFormatter().string(from: Date())
        var entriesPerSize: [String: Int] = [:]
        for size in sizes { entriesPerSize[BenchSize.label(size)] = entriesFor(size) }
        let settings = BenchReport.Settings(
            directory: root, sizes: sizes, entriesPerSize: entriesPerSize,
            operations: BenchOperation.allCases.filter(operations.contains).map(\.rawValue),
            durability: plan.durability.description, threads: threads, durationSeconds: duration, coldReads: cold,
            inlineThreshold: threshold, zipfExponent: zipf, seed: seed, compare: peers,
            urlcacheEntries: plan.compareURLCache ? urlcacheEntries : nil, floorProbeSeconds: floorProbeSeconds,
            floorProbeRounds: floorProbeRounds, floorProbePuts: floorProbePuts)
        var report = BenchReport(date: date, machine: BenchMachine.describe(directory: root), settings: settings)
        if plan.durability == .none {
            report.notes.append("durability none: no fsync; these are page-cache and filesystem costs (use --durability to change)")
        }
        if cold && getuid() != 0 {
            report.notes.append("--cold without root: the page cache cannot be dropped; the benchmark's own files are evicted with posix_fadvise(DONTNEED)")
        }
        if let age = recentDeletion { report.notes.append(BenchDeletions.note(secondsAgo: age)) }

        let progress = BenchProgress(enabled: !quiet)
        let runner = BenchRunner(plan: plan, progress: progress, report: report)
        runner.isKept = keep
        progress.plan(phases: runner.phaseCount())
        if !quiet, let age = recentDeletion { progress.note("note: " + BenchDeletions.note(secondsAgo: age)) }
        if !quiet {
            progress.note("bench: \(root), durability \(plan.durability), sizes \(sizes.map(BenchSize.label).joined(separator: ",")), entries " +
                          sizes.map { "\(BenchSize.label($0))=\(entriesFor($0))" }.joined(separator: " "))
        }
        try runner.run()
        progress.finish()
        if keep { runner.report.notes.append("kept: \(root)") }
        let output = json ? try runner.report.json() : runner.report.table()
        FileHandle.standardOutput.write(Data(output.utf8))
    }
}

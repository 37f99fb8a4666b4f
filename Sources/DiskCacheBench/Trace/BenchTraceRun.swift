import DiskCache
import DiskCacheLocking
import Foundation
package import MemoryCache

/// `diskcache bench --trace`: replays a trace through the store at each capacity asked for and
/// reports its miss ratio, byte miss ratio, puts (disk writes) and evictions beside the known
/// policies simulated in the same run on the same trace (``BenchTraceSimulation``).
///
/// The store replay: a `DiskCache` with `countLimit` = the capacity (and no byte or free-space
/// limit in the way), its default settings otherwise; each request reads the object's key, and
/// a miss stores a 16-byte value under it, as a cache in front of a slower source does. A
/// capacity in bytes is the store's `diskCapacity` instead (no count limit), and a miss stores
/// a value of the request's size; the store counts what its files take on disk (whole blocks,
/// the metadata, the journal), so it holds fewer objects than a simulation counting their sizes
/// alone. A store that takes the cache over its limit waits for the sweeper, as any writer does. Each
/// capacity is replayed once for each of `minimumUses`: 1 stores every miss (the store's
/// default), 2 and more set `DiskCache.Admission.minimumUses(_:window:)` with its default window
/// (the count limit), and the simulations apply the same filter.
package struct BenchTraceRun {
    package init(trace: BenchTrace, capacities: [BenchTraceSimulation.Capacity], policies: [EvictionPolicy], minimumUses: [Int], lowWatermark: Double?, root: String, progress: BenchProgress) {
        self.trace = trace
        self.capacities = capacities
        self.policies = policies
        self.minimumUses = minimumUses
        self.lowWatermark = lowWatermark
        self.root = root
        self.progress = progress
    }

    var trace: BenchTrace
    var capacities: [BenchTraceSimulation.Capacity]
    var policies: [EvictionPolicy]
    /// The admission settings to replay: 1 for every store, n for `.minimumUses(n)`.
    var minimumUses: [Int]
    /// The store's lowWatermark; nil for its default.
    var lowWatermark: Double?
    var root: String
    var progress: BenchProgress

    struct StoreOutcome: Codable {
        var policy: String
        var misses: Int
        var missedBytes: Int64
        var puts: Int
        var evictions: Int
        var seconds: Double
    }

    struct Row: Codable {
        /// Objects, or bytes when `capacityInBytes`.
        var capacity: Int64
        var capacityInBytes: Bool
        var minimumUses: Int
        var store: [StoreOutcome]
        var simulated: [String: BenchTraceSimulation.Outcome]
    }

    package struct Report: Codable {
        var trace: String
        var requests: Int
        var objects: Int
        var oneHitWonders: Int
        var totalBytes: Int64
        var lowWatermark: Double
        var rows: [Row]
    }

    /// `--min-uses`: a comma-separated list of whole numbers from 1.
    package static func parseMinimumUses(_ argument: String) throws -> [Int] {
        let values = argument.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !values.isEmpty, values.allSatisfy({ ($0 ?? 0) >= 1 }) else {
            throw BenchTrace.Error(description: "--min-uses: expected whole numbers from 1, such as 1,2; got '\(argument)'")
        }
        return values.map { $0! }
    }

    /// `--capacities`: `N%` of the trace's distinct objects, absolute counts, or sizes in bytes
    /// (with a unit: `64M`, `1G`).
    package static func parseCapacities(_ argument: String, objects: Int) throws -> [BenchTraceSimulation.Capacity] {
        var capacities: [BenchTraceSimulation.Capacity] = []
        for item in argument.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if item.hasSuffix("%"), let percent = Double(item.dropLast()), percent > 0 {
                capacities.append(.init(limit: Int64(max(1, Int(Double(objects) * percent / 100))), inBytes: false))
            } else if let count = Int(item), count > 0 {
                capacities.append(.init(limit: Int64(count), inBytes: false))
            } else if item.last?.isLetter == true, let bytes = BenchSize.parse(item), bytes > 0 {
                capacities.append(.init(limit: Int64(bytes), inBytes: true))
            } else {
                throw BenchTrace.Error(description: "--capacities: expected percentages of the trace's objects, counts or sizes, such as 1%,5%,10%, 500,2000 or 64M,1G; got '\(item)'")
            }
        }
        guard !capacities.isEmpty else { throw BenchTrace.Error(description: "--capacities: none given") }
        return capacities
    }

    package func run() throws -> Report {
        let nextUses = trace.nextUses()
        var rows: [Row] = []
        progress.plan(phases: capacities.count * minimumUses.count * (policies.count + 1))
        for capacity in capacities {
            for uses in minimumUses {
                let setting = uses > 1 ? ", min-uses \(uses)" : ""
                let name = capacity.inBytes ? BenchSize.label(Int(capacity.limit)) : "\(capacity.limit)"
                progress.phase("capacity \(name)\(setting): simulations")
                var simulated: [String: BenchTraceSimulation.Outcome] = [:]
                for policy in BenchTraceSimulation.Policy.allCases {
                    simulated[policy.rawValue] = BenchTraceSimulation.run(policy, trace, capacity: capacity, minimumUses: uses,
                                                                          nextUses: nextUses)
                }
                var store: [StoreOutcome] = []
                for policy in policies {
                    progress.phase("capacity \(name)\(setting): the store, \(policy)")
                    store.append(try replay(capacity: capacity, policy: policy, minimumUses: uses))
                }
                rows.append(Row(capacity: capacity.limit, capacityInBytes: capacity.inBytes, minimumUses: uses, store: store,
                                simulated: simulated))
            }
        }
        return Report(trace: trace.name, requests: trace.requestCount, objects: trace.objectCount,
                      oneHitWonders: trace.oneHitWonders(), totalBytes: trace.sizes.reduce(0) { $0 + Int64($1) },
                      lowWatermark: lowWatermark ?? DiskCache.Configuration().lowWatermark, rows: rows)
    }

    private func replay(capacity: BenchTraceSimulation.Capacity, policy: EvictionPolicy, minimumUses: Int) throws -> StoreOutcome {
        let directory = (root as NSString).appendingPathComponent("trace-\(capacity.limit)-\(policy)-\(minimumUses)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let evictions = EvictionCount()
        var configuration = DiskCache.Configuration(
            diskCapacity: capacity.inBytes ? capacity.limit : Int64.max / 4, countLimit: capacity.inBytes ? nil : Int(capacity.limit),
            durability: .none,
            lowWatermark: lowWatermark ?? DiskCache.Configuration().lowWatermark, evictionPolicy: policy, minimumFreeSpace: 0, minimumFreeFraction: 0,
            onEviction: { _ in evictions.add() }, sharing: .exclusive)
        configuration.admission = minimumUses > 1 ? .minimumUses(minimumUses) : .everyStore
        let cache = try DiskCache(directory: URL(fileURLWithPath: directory), configuration: configuration)
        defer { try? cache.close() }
        // By bytes, each value is the request's size (cut from one buffer); by objects, 16 bytes.
        let largest = capacity.inBytes ? Int(trace.sizes.max() ?? 16) : 16
        let value = Data(repeating: 0x5A, count: largest)
        var misses = 0, missedBytes: Int64 = 0, puts = 0
        let start = benchNanoseconds()
        let step = max(1, trace.requestCount / 200)
        for (position, object) in trace.objects.enumerated() {
            let key = "object-\(object)"
            if cache.data(for: key) == nil {
                misses += 1
                missedBytes += Int64(trace.sizes[position])
                let stored = capacity.inBytes ? value.prefix(Int(trace.sizes[position])) : value
                if try cache.store(stored, for: key) { puts += 1 }
            }
            if position % step == 0 { progress.phaseFraction(Double(position) / Double(trace.requestCount)) }
        }
        let seconds = Double(benchNanoseconds() - start) / 1e9
        return StoreOutcome(policy: policy.description, misses: misses, missedBytes: missedBytes, puts: puts,
                            evictions: evictions.value, seconds: seconds)
    }

    // MARK: - Output

    package static func table(_ report: Report) -> String {
        let requests = Double(report.requests), bytes = Double(max(1, report.totalBytes))
        var lines = ["trace: \(report.trace): \(report.requests) requests, \(report.objects) objects, " +
                     "\(report.oneHitWonders) (\(percent(Double(report.oneHitWonders) / Double(max(1, report.objects))))) requested once",
                     "miss ratio (lower is better); the store's puts and evictions (lowWatermark \(report.lowWatermark)); simulations of the same trace in this run, with the same admission (Belady without)", ""]
        let storeNames = report.rows.first?.store.map(\.policy) ?? []
        let simNames = BenchTraceSimulation.Policy.allCases.map(\.rawValue)
        var header = ["capacity"]
        header += storeNames.map { "store \($0)" }
        header += simNames.map { "sim \($0)" }
        header += storeNames.flatMap { ["puts \($0)", "evictions \($0)", "byte miss \($0)"] }
        header += ["sim puts S3-FIFO"]
        var rows = [header]
        for row in report.rows {
            let uses = row.minimumUses > 1 ? ", min-uses \(row.minimumUses)" : ""
            var cells = [row.capacityInBytes ? "\(BenchSize.label(Int(row.capacity)))\(uses)"
                         : "\(row.capacity) (\(percent(Double(row.capacity) / Double(max(1, report.objects))))\(uses))"]
            cells += row.store.map { ratio(Double($0.misses) / requests) }
            cells += simNames.map { name in row.simulated[name].map { ratio(Double($0.misses) / requests) } ?? "-" }
            cells += row.store.flatMap { ["\($0.puts)", "\($0.evictions)", ratio(Double($0.missedBytes) / bytes)] }
            cells += [row.simulated[BenchTraceSimulation.Policy.s3fifo.rawValue].map { "\($0.puts)" } ?? "-"]
            rows.append(cells)
        }
        let widths = header.indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            lines.append(row.enumerated().map { column, cell in
                column == 0 ? cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[column] - cell.count) + cell
            }.joined(separator: "  "))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func ratio(_ value: Double) -> String { String(format: "%.4f", value) }
    private static func percent(_ value: Double) -> String { String(format: "%.1f%%", value * 100) }
}

/// Evictions the store reported, counted from its callback.
private final class EvictionCount: Sendable {
    private let count = PthreadMutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}


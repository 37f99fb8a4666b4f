package import DiskCache
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `diskcache bench --processes N`: put and get throughput of one cache used by N processes at
/// once, beside the same work done by one process on a cache it shares with nobody (shared
/// mode, the default) and on one it opened exclusively. All three run in turns in each round,
/// in child processes of this tool (`bench-worker`), so that each is measured the same way.
package struct BenchProcesses {
    package init(root: String, sizes: [Int], entries: @escaping (Int) -> Int, durability: DiskCache.Durability, durabilityArgument: String, inlineThreshold: Int, seconds: Double, processes: Int, rounds: Int, seed: UInt64, progress: BenchProgress) {
        self.root = root
        self.sizes = sizes
        self.entries = entries
        self.durability = durability
        self.durabilityArgument = durabilityArgument
        self.inlineThreshold = inlineThreshold
        self.seconds = seconds
        self.processes = processes
        self.rounds = rounds
        self.seed = seed
        self.progress = progress
    }

    var root: String
    var sizes: [Int]
    var entries: (Int) -> Int
    var durability: DiskCache.Durability
    /// `--durability` as given, passed on to the workers (which parse it the same way).
    var durabilityArgument: String
    var inlineThreshold: Int
    var seconds: Double
    var processes: Int
    var rounds: Int
    var seed: UInt64
    let progress: BenchProgress

    enum Setup: String, CaseIterable, Codable {
        case exclusive, shared, sharedByMany = "shared-by-many"
    }

    /// One setup's rates for one body size: each round's, and their medians.
    struct Row: Codable {
        var size: String
        var setup: Setup
        var processes: Int
        var putRates: [Double] = []
        var getRates: [Double] = []
        var failedGets = 0
        var putMedian: Double { median(putRates) }
        var getMedian: Double { median(getRates) }
    }

    package struct Report: Codable {
        var date: String
        var machine: BenchMachine
        var processes: Int
        var rounds: Int
        var durability: String
        var entriesPerSize: [String: Int]
        var getSeconds: Double
        var rows: [Row]
        package var notes: [String]
    }

    package func run() throws -> Report {
        var rows: [Row] = []
        progress.plan(phases: sizes.count * rounds * Setup.allCases.count)
        var entriesPerSize: [String: Int] = [:]
        for size in sizes {
            let label = BenchSize.label(size)
            entriesPerSize[label] = entries(size)
            var bySetup = Dictionary(uniqueKeysWithValues: Setup.allCases.map {
                ($0, Row(size: label, setup: $0, processes: $0 == .sharedByMany ? processes : 1))
            })
            for round in 0..<rounds {
                // Each round starts with another setup, so none always follows the same one.
                let order = Setup.allCases.indices.map { Setup.allCases[($0 + round) % Setup.allCases.count] }
                for setup in order {
                    progress.phase("\(label) \(setup.rawValue), round \(round + 1)/\(rounds)")
                    let measured = try measure(setup, size: size, round: round)
                    bySetup[setup]!.putRates.append(measured.put)
                    bySetup[setup]!.getRates.append(measured.get)
                    bySetup[setup]!.failedGets += measured.failedGets
                }
            }
            rows += Setup.allCases.map { bySetup[$0]! }
        }
        var notes: [String] = []
        if durability == .none {
            notes.append("durability none: no fsync; these are page-cache and filesystem costs")
        }
        for row in rows where row.failedGets > 0 {
            notes.append("\(row.size) \(row.setup.rawValue): \(row.failedGets) gets missed or read the wrong size")
        }
        return Report(date: ISO8601DateFormatter().string(from: Date()), machine: BenchMachine.describe(directory: root),
                      processes: processes, rounds: rounds, durability: durability.description,
                      entriesPerSize: entriesPerSize, getSeconds: seconds, rows: rows, notes: notes)
    }

    /// One setup in a fresh cache: its workers fill it (each its share of the keys), then all
    /// read random keys for `seconds`. Rates are all workers' operations over the slowest one's time.
    private func measure(_ setup: Setup, size: Int, round: Int) throws -> (put: Double, get: Double, failedGets: Int) {
        let directory = root + "/processes-\(BenchSize.label(size))-\(setup.rawValue)-\(round)"
        defer { BenchTrash.setAside(directory, root: root) }
        let count = setup == .sharedByMany ? processes : 1
        let workers = try (0..<count).map { index in
            try BenchWorkerProcess(arguments: [
                "bench-worker", directory,
                "--sharing", setup == .exclusive ? "exclusive" : "shared",
                "--durability", durabilityArgument,
                "--inline-threshold", "\(inlineThreshold)",
                "--size", "\(size)", "--entries", "\(entries(size))",
                "--index", "\(index)", "--workers", "\(count)",
                "--seed", "\(seed &+ UInt64(index))",
            ])
        }
        defer { for worker in workers { worker.stop() } }
        for worker in workers { try worker.expect("ready") }
        sync()
        let put = try phase(workers, command: "put")
        progress.phaseFraction(0.5)
        let get = try phase(workers, command: "get \(seconds)")
        for worker in workers { try worker.send("quit") }
        for worker in workers { try worker.expect("closed") }
        return (put.rate, get.rate, get.failures)
    }

    /// Sends `command` to every worker at once and waits for each one's `done OPS NANOS FAILURES`.
    private func phase(_ workers: [BenchWorkerProcess], command: String) throws -> (rate: Double, failures: Int) {
        for worker in workers { try worker.send(command) }
        var operations = 0, slowest: UInt64 = 1, failures = 0
        for worker in workers {
            let fields = try worker.expect("done").split(separator: " ")
            guard fields.count == 4, let ops = Int(fields[1]), let nanos = UInt64(fields[2]), let failed = Int(fields[3]) else {
                throw BenchError("bench-worker: unexpected answer \(fields.joined(separator: " "))")
            }
            operations += ops
            slowest = max(slowest, nanos)
            failures += failed
        }
        return (Double(operations) / (Double(slowest) / 1e9), failures)
    }

    /// The report as a table: medians per setup, and the two ratios the setups are measured for.
    package static func table(_ report: Report) -> String {
        var lines: [String] = []
        lines.append("One cache, \(report.processes) processes (\(report.rounds) rounds, medians; durability \(report.durability); gets for \(String(format: "%g", report.getSeconds)) s)")
        lines.append("machine: \(report.machine.processors) processors, \(report.machine.cpuModel), \(report.machine.fileSystem)")
        let many = "shared ×\(report.processes)"
        let header = ["size", "op", "exclusive", "shared", many, "shared ÷ exclusive", "\(report.processes) procs ÷ 1"]
        var cells: [[String]] = []
        var sizes: [String] = []
        for row in report.rows where !sizes.contains(row.size) { sizes.append(row.size) }
        for size in sizes {
            let rows = Dictionary(uniqueKeysWithValues: report.rows.filter { $0.size == size }.map { ($0.setup, $0) })
            guard let exclusive = rows[.exclusive], let shared = rows[.shared], let byMany = rows[.sharedByMany] else { continue }
            for (op, rate) in [("put", \Row.putMedian), ("get", \Row.getMedian)] {
                cells.append([size, op, rateText(exclusive[keyPath: rate]), rateText(shared[keyPath: rate]),
                              rateText(byMany[keyPath: rate]),
                              String(format: "%.2f×", shared[keyPath: rate] / max(1e-9, exclusive[keyPath: rate])),
                              String(format: "%.2f×", byMany[keyPath: rate] / max(1e-9, shared[keyPath: rate]))])
            }
        }
        let widths = header.indices.map { column in ([header] + cells).map { $0[column].count }.max() ?? 0 }
        for row in [header] + cells {
            lines.append(row.enumerated().map { column, text in
                column < 2 ? text.padding(toLength: widths[column], withPad: " ", startingAt: 0)
                           : String(repeating: " ", count: widths[column] - text.count) + text
            }.joined(separator: "  "))
        }
        lines.append("Rates are operations per second of all processes together (their operations over the slowest one's time).")
        for note in report.notes { lines.append("note: \(note)") }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func rateText(_ rate: Double) -> String { BenchReport.rate(rate) + "/s" }
}

private func median(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return 0 }
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}


import Foundation

/// Everything one `diskcache bench` run measured, as `--json` prints it.
package struct BenchReport: Codable {
    package struct Settings: Codable {
        package init(directory: String, sizes: [Int], entriesPerSize: [String: Int], operations: [String], durability: String, threads: Int, durationSeconds: Double, coldReads: Bool, inlineThreshold: Int, zipfExponent: Double, seed: UInt64, compare: [String], urlcacheEntries: Int?, floorProbeSeconds: Double, floorProbeRounds: Int, floorProbePuts: Int) {
            self.directory = directory
            self.sizes = sizes
            self.entriesPerSize = entriesPerSize
            self.operations = operations
            self.durability = durability
            self.threads = threads
            self.durationSeconds = durationSeconds
            self.coldReads = coldReads
            self.inlineThreshold = inlineThreshold
            self.zipfExponent = zipfExponent
            self.seed = seed
            self.compare = compare
            self.urlcacheEntries = urlcacheEntries
            self.floorProbeSeconds = floorProbeSeconds
            self.floorProbeRounds = floorProbeRounds
            self.floorProbePuts = floorProbePuts
        }

        var directory: String
        var sizes: [Int]
        var entriesPerSize: [String: Int]
        var operations: [String]
        var durability: String
        var threads: Int
        var durationSeconds: Double
        var coldReads: Bool
        var inlineThreshold: Int
        var zipfExponent: Double
        var seed: UInt64
        var compare: [String]
        var urlcacheEntries: Int?
        var floorProbeSeconds: Double
        var floorProbeRounds: Int
        var floorProbePuts: Int
    }
    package init(date: String, machine: BenchMachine, settings: Settings) {
        self.date = date
        self.machine = machine
        self.settings = settings
    }

    var tool = "diskcache bench"
    var date: String
    var machine: BenchMachine
    var settings: Settings
    /// The floor chosen for each body size, with what the probe measured for every candidate.
    var floors: [BenchFloor.Choice] = []
    /// The SQLite library the `sqlite` rows used.
    var sqliteVersion: String?
    package var notes: [String] = []
    var rows: [BenchRow] = []
    /// Single figures that are not rates: index memory per entry, idle CPU and the like.
    var figures: [String: Double] = [:]
}

// MARK: - Text output

extension BenchReport {
    package func table() -> String {
        var lines: [String] = []
        lines.append("diskcache bench: \(date)")
        lines.append("machine: \(machine.processors) CPUs, \(machine.cpuModel), \(machine.kernel), \(machine.fileSystem)")
        lines.append("durability: \(settings.durability); threads: \(settings.threads); timed phases: \(String(format: "%g", settings.durationSeconds)) s; "
                     + "reads: \(settings.coldReads ? "cold" : "warm page cache"); inline threshold: \(settings.inlineThreshold) B; "
                     + "mixed = 90 % get / 10 % put, Zipf s=\(settings.zipfExponent)")
        lines.append("")
        let header = ["size", "op", "subject", "entries", "ops/s", "MB/s", "p50", "p99", "max", "× base", "× sqlite", "× urlcache"]
        var cells: [[String]] = []
        for row in rows {
            cells.append([
                BenchSize.label(row.size), row.operation, row.subject, "\(row.entries)",
                Self.rate(row.opsPerSecond),
                row.megabytesPerSecond.map { String(format: $0 >= 100 ? "%.0f" : "%.1f", $0) } ?? "",
                row.p50Microseconds.map(Self.time) ?? "", row.p99Microseconds.map(Self.time) ?? "",
                row.maxMicroseconds.map(Self.time) ?? "",
                row.ratioToBaseline.map { String(format: "%.2f×", $0) } ?? "",
                row.ratioToSQLite.map { String(format: "%.2f×", $0) } ?? "",
                row.ratioToURLCache.map { String(format: "%.0f×", $0) } ?? "",
            ])
        }
        let widths = header.indices.map { column in
            max(header[column].count, cells.map { $0[column].count }.max() ?? 0)
        }
        func format(_ row: [String]) -> String {
            row.indices.map { column in
                let text = row[column]
                let pad = String(repeating: " ", count: widths[column] - text.count)
                return column <= 2 ? text + pad : pad + text
            }.joined(separator: "  ")
        }
        lines.append(format(header))
        lines.append(format(widths.map { String(repeating: "-", count: $0) }))
        var previous: (Int, String)?
        for (row, cell) in zip(rows, cells) {
            if let previous, previous.0 != row.size { lines.append("") }
            previous = (row.size, row.operation)
            lines.append(format(cell))
        }
        let rowNotes = rows.compactMap { row in row.note.map { "\(BenchSize.label(row.size)) \(row.operation) \(row.subject): \($0)" } }
        if !rowNotes.isEmpty || !notes.isEmpty || !figures.isEmpty {
            lines.append("")
            for note in notes { lines.append("note: " + note) }
            for note in rowNotes { lines.append("note: " + note) }
            for (name, value) in figures.sorted(by: { $0.key < $1.key }) {
                lines.append("figure: \(name) = \(String(format: "%.6g", value))")
            }
        }
        lines.append("")
        lines.append("× base: diskcache's rate over the floor's of the same size and operation (the floor: one file per "
                     + "entry holding the body, written and read the fastest way the probe found on this machine, no "
                     + "journal, no index, no checksum; for open, listing the directories and stat-ing every file; for "
                     + "sweep, unlinking the same number of files). × sqlite: diskcache's rate over SQLite's on the same "
                     + "workload. open: p50/p99/max are whole opens, ops/s is entries found per second (diskcache: "
                     + "journal replay; sqlite: open + SELECT count(*)). sweep: one pass, ops/s is entries evicted per second.")
        return lines.joined(separator: "\n") + "\n"
    }

    static func rate(_ value: Double) -> String {
        if value >= 1_000_000 { return String(format: "%.2fM", value / 1_000_000) }
        if value >= 10_000 { return String(format: "%.1fk", value / 1000) }
        if value >= 100 { return String(format: "%.0f", value) }
        return String(format: "%.1f", value)
    }

    static func time(_ microseconds: Double) -> String {
        if microseconds >= 1_000_000 { return String(format: "%.2fs", microseconds / 1_000_000) }
        if microseconds >= 1000 { return String(format: "%.1fms", microseconds / 1000) }
        if microseconds >= 100 { return String(format: "%.0fµs", microseconds) }
        return String(format: "%.1fµs", microseconds)
    }

    package func json() throws -> String { try Self.json(self) }

    /// Any report as pretty-printed JSON with sorted keys.
    package static func json(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return String(decoding: try encoder.encode(value), as: UTF8.self) + "\n"
    }
}

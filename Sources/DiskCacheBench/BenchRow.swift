/// One line of the results: one subject (our store, the floor, or a peer) doing one operation
/// at one body size.
struct BenchRow: Codable {
    var size: Int
    var operation: String
    /// `diskcache`, `floor` (the raw-file baseline), `sqlite`, `urlcache`, or a named baseline.
    var subject: String
    var entries: Int
    var threads: Int
    var operations: Int
    var seconds: Double
    var opsPerSecond: Double
    var megabytesPerSecond: Double?
    var p50Microseconds: Double?
    var p99Microseconds: Double?
    var maxMicroseconds: Double?
    /// This row's rate divided by its baseline's (the floor's, for the standard operations).
    var ratioToBaseline: Double?
    /// Our rate divided by SQLite's on the same workload (with `--compare sqlite`, the default).
    var ratioToSQLite: Double?
    /// Our rate divided by Foundation's URLCache's on the same workload (with `--compare urlcache`).
    var ratioToURLCache: Double?
    var note: String?

    init(size: Int, operation: String, subject: String, entries: Int, threads: Int,
         measurement: BenchMeasurement, withBytes: Bool = true, note: String? = nil) {
        self.size = size
        self.operation = operation
        self.subject = subject
        self.entries = entries
        self.threads = threads
        self.operations = measurement.operations
        self.seconds = measurement.seconds
        self.opsPerSecond = measurement.opsPerSecond
        self.megabytesPerSecond = withBytes ? measurement.megabytesPerSecond : nil
        if let p = measurement.percentiles() {
            (p50Microseconds, p99Microseconds, maxMicroseconds) = (p.p50, p.p99, p.max)
        }
        self.note = note
    }
}

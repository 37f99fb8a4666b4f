/// What one timed phase produced: per-operation latencies (or per-pass times) and the wall time.
struct BenchMeasurement {
    var latencies: [UInt64] = []   // nanoseconds, one per operation
    var operations = 0
    var bytes: Int64 = 0
    var seconds = 0.0

    var opsPerSecond: Double { seconds > 0 ? Double(operations) / seconds : 0 }
    var megabytesPerSecond: Double { seconds > 0 ? Double(bytes) / seconds / 1_000_000 : 0 }

    /// p50, p99 and max in microseconds.
    func percentiles() -> (p50: Double, p99: Double, max: Double)? {
        guard !latencies.isEmpty else { return nil }
        let sorted = latencies.sorted()
        func at(_ q: Double) -> Double {
            let index = min(sorted.count - 1, Int((Double(sorted.count) * q).rounded(.up)) - 1)
            return Double(sorted[max(0, index)]) / 1000
        }
        return (at(0.50), at(0.99), Double(sorted[sorted.count - 1]) / 1000)
    }

    mutating func merge(_ other: BenchMeasurement) {
        latencies += other.latencies
        operations += other.operations
        bytes += other.bytes
    }
}

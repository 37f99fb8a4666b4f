extension Duration {
    /// The duration in whole nanoseconds, clamped to what an `Int64` holds (the lock waits and
    /// timers that take it count in nanoseconds; a huge timeout means "as long as it takes").
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return seconds < 0 ? .min : .max }
        let (total, overflowAgain) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflowAgain ? (seconds < 0 ? .min : .max) : total
    }
}

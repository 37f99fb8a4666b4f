package enum BenchOperation: String, CaseIterable {
    case put, get, mixed, open, sweep
    /// Gets with the page cache dropped before every turn (as `get` with `--cold`).
    case cold
    /// At capacity: each subject holds the fill's entries and drops its oldest for every new
    /// key put (the store through its `countLimit`).
    case churn
    /// Get throughput while a sweep evicts half the cache, against the same gets without it.
    case sweepGet = "sweep-get"
    /// CPU the idle background sweeper uses, against the same wait with no cache open.
    case idle
    /// 64 tasks on the async API against the same tasks on the synchronous one (which blocks
    /// Swift's cooperative pool), with a probe task's wake-up lateness (`BenchAsync.swift`).
    case async
    /// One large body stored and read each streaming way, beside plain file I/O, with peak
    /// memory growth (`BenchStreaming.swift`).
    case streaming

    /// The operations that fill a cache of --entries and measure the store beside the floor.
    static let main: Set<BenchOperation> = [.put, .get, .cold, .mixed, .churn, .open, .sweep]
}

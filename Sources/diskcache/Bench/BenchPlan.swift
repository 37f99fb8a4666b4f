import DiskCache

/// What one run is asked to do, already validated.
struct BenchPlan {
    var root: String
    var sizes: [Int]
    var entries: (Int) -> Int
    var operations: Set<BenchOperation>
    var durability: DiskCache.Durability
    var threads: Int
    var seconds: Double
    var coldReads: Bool
    var inlineThreshold: Int
    var zipfExponent: Double
    var seed: UInt64
    var compareSQLite: Bool
    var compareURLCache: Bool
    var urlcacheEntries: Int
    var idleSeconds: Double
    var sweepInterval: Double
    var openRepetitions: Int
    /// The floor probe, per body size: seconds in all, rounds, and the most puts per candidate and round.
    var floorProbeSeconds: Double
    var floorProbeRounds: Int
    var floorProbePuts: Int
    /// The store's lowWatermark (nil: its default).
    var lowWatermark: Double? = nil

    var isImmediate: Bool { durability == .immediate }
}

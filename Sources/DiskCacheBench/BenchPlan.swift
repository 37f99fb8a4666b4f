package import DiskCache

/// What one run is asked to do, already validated.
package struct BenchPlan {
    package init(root: String, sizes: [Int], entries: @escaping (Int) -> Int, operations: Set<BenchOperation>, durability: DiskCache.Durability, threads: Int, seconds: Double, coldReads: Bool, inlineThreshold: Int, zipfExponent: Double, seed: UInt64, compareSQLite: Bool, compareURLCache: Bool, urlcacheEntries: Int, idleSeconds: Double, sweepInterval: Double, openRepetitions: Int, floorProbeSeconds: Double, floorProbeRounds: Int, floorProbePuts: Int) {
        self.root = root
        self.sizes = sizes
        self.entries = entries
        self.operations = operations
        self.durability = durability
        self.threads = threads
        self.seconds = seconds
        self.coldReads = coldReads
        self.inlineThreshold = inlineThreshold
        self.zipfExponent = zipfExponent
        self.seed = seed
        self.compareSQLite = compareSQLite
        self.compareURLCache = compareURLCache
        self.urlcacheEntries = urlcacheEntries
        self.idleSeconds = idleSeconds
        self.sweepInterval = sweepInterval
        self.openRepetitions = openRepetitions
        self.floorProbeSeconds = floorProbeSeconds
        self.floorProbeRounds = floorProbeRounds
        self.floorProbePuts = floorProbePuts
    }

    var root: String
    var sizes: [Int]
    var entries: (Int) -> Int
    var operations: Set<BenchOperation>
    package var durability: DiskCache.Durability
    var threads: Int
    var seconds: Double
    var coldReads: Bool
    var inlineThreshold: Int
    var zipfExponent: Double
    var seed: UInt64
    var compareSQLite: Bool
    package var compareURLCache: Bool
    var urlcacheEntries: Int
    var idleSeconds: Double
    var sweepInterval: Double
    var openRepetitions: Int
    /// The floor probe, per body size: seconds in all, rounds, and the most puts per candidate and round.
    var floorProbeSeconds: Double
    var floorProbeRounds: Int
    var floorProbePuts: Int
    /// The store's lowWatermark (nil: its default).
    package var lowWatermark: Double? = nil

    var isImmediate: Bool { durability == .immediate }
}


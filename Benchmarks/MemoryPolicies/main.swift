// Deterministic comparison of MemoryCache's eviction policies, and a hit-lookup
// throughput measurement against a Mutex-protected Dictionary.
//
//   swift run -c release --package-path Benchmarks MemoryPolicies [hit-ratio|throughput]
//
// Hit ratio: 100 000 keys drawn from a Zipf distribution (ranks shuffled onto keys by
// a seeded permutation), a cache of 1 %, 5 % or 10 % of the key space (countLimit),
// and a read-through client: look up, store on a miss. Halfway through, one
// sequential scan of 100 000 keys never seen before is mixed in. Hit ratios count
// the Zipf requests only (the scan misses under every policy), overall and in the
// 10 000 Zipf requests that follow the scan.

import MemoryCache
import Synchronization

// MARK: - Workload

/// SplitMix64: small, fast and the same on every platform.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

struct Zipf {
    let cdf: [Double]
    let keyOfRank: [Int]

    init(keys: Int, exponent: Double, generator: inout SplitMix64) {
        var cdf = [Double](repeating: 0, count: keys)
        var sum = 0.0
        for rank in 0..<keys {
            sum += 1 / pow(Double(rank + 1), exponent)
            cdf[rank] = sum
        }
        self.cdf = cdf.map { $0 / sum }
        self.keyOfRank = Array(0..<keys).shuffled(using: &generator)
    }

    func next(using generator: inout SplitMix64) -> Int {
        let u = Double(generator.next() >> 11) / Double(1 << 53)
        var low = 0
        var high = cdf.count - 1
        while low < high {
            let mid = (low + high) / 2
            if cdf[mid] < u { low = mid + 1 } else { high = mid }
        }
        return keyOfRank[low]
    }
}

/// `pow` without Foundation.
func pow(_ base: Double, _ exponent: Double) -> Double {
    // exp(exponent * ln(base)) through the standard library's floating-point API.
    exp(exponent * log(base))
}

func log(_ x: Double) -> Double {
    // ln(x) = ln(m * 2^e) = ln(m) + e ln 2, with m in [1, 2) and an atanh series for ln(m).
    let e = Double(x.exponent)
    let m = x.significand
    let t = (m - 1) / (m + 1)
    let t2 = t * t
    var term = t
    var sum = 0.0
    var k = 1.0
    while abs(term / k) > 1e-17 {
        sum += term / k
        term *= t2
        k += 2
    }
    return 2 * sum + e * 0.693_147_180_559_945_3
}

func exp(_ x: Double) -> Double {
    // e^x = 2^k * e^r with |r| <= ln2/2, Taylor series for e^r.
    let k = (x / 0.693_147_180_559_945_3).rounded()
    let r = x - k * 0.693_147_180_559_945_3
    var term = 1.0
    var sum = 1.0
    var n = 1.0
    while abs(term) > 1e-17 {
        term *= r / n
        sum += term
        n += 1
    }
    return Double(sign: .plus, exponent: Int(k), significand: sum)
}

enum Request {
    case zipf(Int)
    case scan(Int)
}

func makeTrace(keys: Int, exponent: Double, zipfRequests: Int, seed: UInt64) -> (Zipf, [Request]) {
    var generator = SplitMix64(state: seed)
    let zipf = Zipf(keys: keys, exponent: exponent, generator: &generator)
    var trace: [Request] = []
    trace.reserveCapacity(zipfRequests + keys)
    for i in 0..<zipfRequests {
        if i == zipfRequests / 2 {
            for fresh in keys..<(2 * keys) { trace.append(.scan(fresh)) }
        }
        trace.append(.zipf(zipf.next(using: &generator)))
    }
    return (zipf, trace)
}

struct Outcome {
    var hits = 0
    var requests = 0
    var hitsAfterScan = 0
    var requestsAfterScan = 0
}

func simulate(_ trace: [Request], policy: EvictionPolicy, capacity: Int, window: Int) -> Outcome {
    let cache = MemoryCache<Int, Int>(countLimit: capacity, policy: policy)
    var outcome = Outcome()
    var afterScan = -1
    for request in trace {
        switch request {
        case .scan(let key):
            if cache.value(for: key) == nil { cache.store(key, for: key) }
            afterScan = 0
        case .zipf(let key):
            let hit = cache.value(for: key) != nil
            if !hit { cache.store(key, for: key) }
            outcome.requests += 1
            if hit { outcome.hits += 1 }
            if afterScan >= 0, afterScan < window {
                afterScan += 1
                outcome.requestsAfterScan += 1
                if hit { outcome.hitsAfterScan += 1 }
            }
        }
    }
    return outcome
}

func percent(_ part: Int, _ whole: Int) -> String {
    let value = (Double(part) / Double(whole) * 1000).rounded() / 10
    return "\(value) %"
}

func runHitRatios() {
    let keys = 100_000
    let zipfRequests = 2_000_000
    let seed: UInt64 = 0x5EED
    let window = 10_000
    print("## Hit ratio (keys: \(keys), Zipf requests: \(zipfRequests), one scan of \(keys) fresh keys at the midpoint, seed \(seed))")
    print()
    print("\"Static top-k\" is the share of Zipf requests that go to the cache-size most popular keys: what a cache")
    print("that always held exactly those keys would hit, a practical upper bound.")
    print()
    print("| Zipf s | cache size | policy | hit ratio | hit ratio, \(window) requests after the scan |")
    print("|---|---|---|---|---|")
    for exponent in [0.9, 1.0] {
        let (zipf, trace) = makeTrace(keys: keys, exponent: exponent, zipfRequests: zipfRequests, seed: seed)
        for share in [1, 5, 10] {
            let capacity = keys * share / 100
            for policy in EvictionPolicy.allCases {
                let outcome = simulate(trace, policy: policy, capacity: capacity, window: window)
                print(
                    "| \(exponent) | \(share) % (\(capacity)) | \(policy) | "
                        + "\(percent(outcome.hits, outcome.requests)) | "
                        + "\(percent(outcome.hitsAfterScan, outcome.requestsAfterScan)) |"
                )
            }
            let bound = Int((zipf.cdf[capacity - 1] * 1_000_000).rounded())
            print("| \(exponent) | \(share) % (\(capacity)) | static top-k | \(percent(bound, 1_000_000)) | |")
        }
    }
    print()
}

// MARK: - Throughput

@inline(never)
func blackHole<T>(_ value: T) {}

func measure(_ label: String, lookups: Int, _ body: () -> Int) -> Double {
    _ = body()  // warm up
    var best = Double.infinity
    var checksum = 0
    for _ in 0..<5 {
        let start = ContinuousClock.now
        checksum &+= body()
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        best = min(best, seconds)
    }
    blackHole(checksum)
    let rate = Double(lookups) / best
    print("| \(label) | \((rate / 1e5).rounded() / 10) M/s | \((best / Double(lookups) * 1e10).rounded() / 10) ns |")
    return rate
}

func throughput<Key: Hashable & Sendable>(keyName: String, keys: [Key]) {
    let lookupsPerRun = 10_000_000
    var generator = SplitMix64(state: 42)
    let probes = (0..<(1 << 16)).map { _ in keys[Int(generator.next() % UInt64(keys.count))] }
    let mask = probes.count - 1

    let baseline = Mutex<[Key: Int]>([:])
    baseline.withLock { dictionary in
        for (i, key) in keys.enumerated() { dictionary[key] = i }
    }
    _ = measure("Mutex<[\(keyName): Int]> lookup (baseline)", lookups: lookupsPerRun) {
        var sum = 0
        for i in 0..<lookupsPerRun {
            let key = probes[i & mask]
            sum &+= baseline.withLock { $0[key] } ?? 0
        }
        return sum
    }
    for policy in EvictionPolicy.allCases {
        let cache = MemoryCache<Key, Int>(countLimit: keys.count, policy: policy)
        for (i, key) in keys.enumerated() { cache.store(i, for: key) }
        _ = measure("MemoryCache<\(keyName), Int> hit, \(policy)", lookups: lookupsPerRun) {
            var sum = 0
            for i in 0..<lookupsPerRun {
                sum &+= cache.value(for: probes[i & mask]) ?? 0
            }
            return sum
        }
    }
}

func runThroughput() {
    let keyCount = 10_000
    print("## Warm-hit lookups, one thread (\(keyCount) keys, all cached; best of 5 runs of 10 000 000 lookups)")
    print()
    print("| lookup | rate | per lookup |")
    print("|---|---|---|")
    throughput(keyName: "Int", keys: Array(0..<keyCount))
    throughput(keyName: "String", keys: (0..<keyCount).map { "key-\($0)" })
    print()
}

let mode = CommandLine.arguments.dropFirst().first
if mode == nil || mode == "hit-ratio" { runHitRatios() }
if mode == nil || mode == "throughput" { runThroughput() }

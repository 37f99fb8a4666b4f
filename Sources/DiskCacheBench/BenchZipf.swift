import Foundation
import ToolSupport

/// Zipf-distributed entry indices: rank r is drawn with probability ∝ 1/r^s, and ranks are
/// shuffled onto indices with the seed, so the popular entries are spread over the key space.
struct BenchZipf: Sendable {
    let cdf: [Double]
    let indexOfRank: [Int]

    init(count: Int, exponent: Double, seed: UInt64) {
        var cdf = [Double](repeating: 0, count: max(1, count))
        var sum = 0.0
        for rank in 0..<cdf.count {
            sum += 1 / Foundation.pow(Double(rank + 1), exponent)
            cdf[rank] = sum
        }
        self.cdf = cdf.map { $0 / sum }
        var random = SplitMix64(seed: seed ^ 0x5A5A)
        self.indexOfRank = Array(0..<cdf.count).shuffled(using: &random)
    }

    func next(_ random: inout SplitMix64) -> Int {
        let u = random.unit()
        var low = 0
        var high = cdf.count - 1
        while low < high {
            let mid = (low + high) / 2
            if cdf[mid] < u { low = mid + 1 } else { high = mid }
        }
        return indexOfRank[low]
    }
}

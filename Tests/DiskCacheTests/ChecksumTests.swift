@testable import DiskCache
import CXXHash
import Testing

/// The checksum on disk is XXH3-64 as libxxhash computes it, whichever vector unit computes
/// it here: a cache written on one machine must verify on another.
struct ChecksumTests {
    @Test func matchesLibxxhashAtEveryLengthAndAlignment() {
        var generator = SplitMix64(seed: 42)
        let bytes = (0..<(4 << 20) + 64).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        bytes.withUnsafeBytes { all in
            var lengths = Array(0...1100)
            lengths += [2047, 2048, 4096, 65_537, 1 << 20, (4 << 20) + 3]
            for length in lengths {
                for offset in [0, 1, 7, 61] {
                    let slice = UnsafeRawBufferPointer(rebasing: all[offset..<offset + length])
                    let expected = XXH3_64bits(slice.baseAddress, slice.count)
                    let actual = Checksum.xxh3(slice)
                    if actual != expected {
                        Issue.record("length \(length), offset \(offset): \(actual) != libxxhash's \(expected)")
                        return
                    }
                }
            }
        }
    }
}

import CDiskCacheSupport
@testable import DiskCache
import Testing

/// The checksum on disk is XXH3-64 and the key hash XXH3-128 as xxHash defines them, whichever
/// vector unit computes them here: a cache written on one machine must verify on another.
struct ChecksumTests {
    /// Values from another implementation (the `xxhash` module of Python, over the bytes
    /// `(i * 31 + 7) & 0xff`), at the lengths where XXH3 changes its way of hashing.
    @Test func matchesPublishedValues() {
        let bytes = (0..<5000).map { UInt8(truncatingIfNeeded: $0 * 31 + 7) }
        let expected: [(Int, UInt64)] = [
            (0, 0x2d06_8005_38d3_94c2), (1, 0x4c5c_ca45_d0f4_811f), (3, 0x15f7_093b_173d_005c), (4, 0xdca0_12f9_5811_b6b9),
            (8, 0xdec6_a9a4_3575_982e), (9, 0xcbe3_9339_9f17_ffbd), (16, 0x7e48_4c18_d748_95d0), (17, 0x208b_de5e_e2be_d407),
            (128, 0xf92b_70ea_a21a_6288), (129, 0xf8f7_6713_f2bb_60fa), (240, 0xccc7_3751_72c4_1f03), (241, 0x0b3b_6309_48ce_4a00),
            (1024, 0x23bc_880e_bf0d_29c6), (5000, 0x559f_ff92_c2b7_f8ee),
        ]
        bytes.withUnsafeBytes { all in
            for (length, value) in expected {
                #expect(Checksum.xxh3(UnsafeRawBufferPointer(rebasing: all[..<length])) == value, "length \(length)")
            }
        }
        #expect(KeyHasher.xxh3.hash("https://example.com/resource/1") == KeyHash(high: 0x989a_3e13_b573_a7b7, low: 0xdd7e_4c5f_bcfc_6283))
    }

    /// Every vector path gives what xxHash's portable code gives.
    @Test func matchesThePortableCodeAtEveryLengthAndAlignment() {
        var generator = SplitMix64(seed: 42)
        let bytes = (0..<(4 << 20) + 64).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        bytes.withUnsafeBytes { all in
            var lengths = Array(0...1100)
            lengths += [2047, 2048, 4096, 65_537, 1 << 20, (4 << 20) + 3]
            for length in lengths {
                for offset in [0, 1, 7, 61] {
                    let slice = UnsafeRawBufferPointer(rebasing: all[offset..<offset + length])
                    let expected = cdiskcache_xxh3_64_scalar(slice.baseAddress, slice.count)
                    let actual = Checksum.xxh3(slice)
                    if actual != expected {
                        Issue.record("length \(length), offset \(offset): \(actual) != the portable code's \(expected)")
                        return
                    }
                }
            }
        }
    }
}

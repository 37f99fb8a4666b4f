import CDiskCacheSupport

/// A 128-bit key hash (XXH3-128), the name of an entry on disk and its identity in the index.
struct KeyHash: Hashable, Sendable, Comparable, CustomStringConvertible {
    var high: UInt64
    var low: UInt64

    static func < (a: KeyHash, b: KeyHash) -> Bool { (a.high, a.low) < (b.high, b.low) }

    /// 32 lowercase hex digits, high half first (xxHash's canonical order).
    var description: String { hexName }

    var hexName: String {
        var bytes = [UInt8](repeating: 0, count: 32)
        KeyHash.writeHex(high, into: &bytes, at: 0)
        KeyHash.writeHex(low, into: &bytes, at: 16)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Parses the 32-hex-digit file name form; nil for anything else.
    init?(hexName: Substring) {
        guard hexName.utf8.count == 32,
              let high = UInt64(hexName.prefix(16), radix: 16),
              let low = UInt64(hexName.suffix(16), radix: 16),
              hexName.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
        else { return nil }
        self.high = high
        self.low = low
    }

    init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Writes hex digits `from ..< from + count` of `value` (16 digits, most significant first).
    @inline(__always)
    static func hexDigits(_ value: UInt64, from: Int, count: Int, into buffer: UnsafeMutableBufferPointer<UInt8>) {
        for i in 0..<count {
            let nibble = UInt8(truncatingIfNeeded: value >> UInt64(60 - 4 * (from + i))) & 0xF
            buffer[i] = nibble < 10 ? 0x30 + nibble : 0x57 + nibble
        }
    }

    private static func writeHex(_ value: UInt64, into bytes: inout [UInt8], at start: Int) {
        for i in 0..<16 {
            let nibble = Int((value >> UInt64(60 - 4 * i)) & 0xF)
            bytes[start + i] = digits[nibble]
        }
    }
}

/// The key hasher: XXH3-128 over the key's UTF-8 bytes. Tests inject others to force collisions.
struct KeyHasher: Sendable {
    var hash: @Sendable (String) -> KeyHash

    static let xxh3: KeyHasher = KeyHasher { key in
        var key = key
        return key.withUTF8 { bytes in
            var hash = KeyHash(high: 0, low: 0)
            cdiskcache_xxh3_128(bytes.baseAddress, bytes.count, &hash.high, &hash.low)
            return hash
        }
    }
}

/// XXH3-64 checksums, for bodies and journal records.
enum Checksum {
    @inline(__always)
    static func xxh3(_ buffer: UnsafeRawBufferPointer) -> UInt64 {
        cdiskcache_xxh3_64(buffer.baseAddress, buffer.count)
    }
}

/// XXH3-64 computed piece by piece (libxxhash's streaming state). Not thread-safe: each user
/// keeps it under its own lock.
package final class StreamingChecksum: @unchecked Sendable {
    private let state: UnsafeMutableRawPointer

    package init?() {
        guard let state = cdiskcache_xxh3_state_create() else { return nil }
        self.state = state
    }

    deinit { cdiskcache_xxh3_state_free(state) }

    package func update(_ bytes: UnsafeRawBufferPointer) {
        cdiskcache_xxh3_update(state, bytes.baseAddress, bytes.count)
    }

    /// The checksum of everything given so far (more may still be given).
    package var digest: UInt64 { cdiskcache_xxh3_digest(state) }
}

// What the `diskcache` tool and the test worker both need: a seeded random generator, so that a
// seed names a workload, and this process's resident memory.
import Foundation

/// SplitMix64: small, fast and the same on every platform.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    public var state: UInt64

    @inlinable public init(seed: UInt64) { state = seed }

    @inlinable public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<bound` (0 when `bound` is less than 1).
    @inlinable public mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(max(1, bound))) }

    /// A number in `0..<1`.
    @inlinable public mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}

/// This process's resident set now (VmRSS), and its peak (VmHWM) since the start or since `5`
/// was last written to /proc/self/clear_refs, in bytes; zeros where /proc/self/status is absent.
public func residentMemory() -> (current: Int64, peak: Int64) {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    func field(_ name: String) -> Int64 {
        for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
            return (Int64(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) * 1024
        }
        return 0
    }
    return (field("VmRSS"), field("VmHWM"))
}

public import Foundation

extension DiskCache {
    /// What the cache knows about one entry, read without its body.
    public struct Entry: Hashable, Sendable {
        /// The key it was stored under.
        public var key: String
        /// Body size in bytes.
        public var size: Int
        /// When the value was stored (a `store` for the same key replaces it).
        public var created: Date
        /// The last read known to the index (second granularity).
        public var lastAccessed: Date
        /// When it stops being returned; nil for never.
        public var expires: Date?
        /// The metadata given to ``DiskCache/store(_:for:metadata:expires:)-9xfei``.
        public var metadata: [String: String]
        /// XXH3-64 of the body.
        public var checksum: UInt64
    }
}

extension DiskCache.Entry {
    init(_ meta: EntryMetadata, _ indexEntry: IndexEntry) {
        self.init(key: meta.key, size: Int(meta.size), created: Date(milliseconds: meta.created),
                  lastAccessed: Date(milliseconds: max(meta.accessed, indexEntry.accessedMilliseconds)),
                  expires: meta.expires.map { Date(milliseconds: $0) }, metadata: meta.metadata,
                  checksum: meta.checksum)
    }
}

extension Date {
    init(milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    /// Milliseconds since 1970, clamped to ±10^15 (about 31,000 years) so no date traps.
    var milliseconds: Int64 { Self.clampedMilliseconds((timeIntervalSince1970 * 1000).rounded(.down)) }

    /// The millisecond a lower bound of stamps falls in (what `removeEntries(modifiedSince:)`
    /// compares with): ``milliseconds``, except that a date less than 10 µs into a millisecond
    /// counts in the one before. A date's seconds are a `Double` converted from 2001 to 1970 and
    /// multiplied by 1,000, which can carry a time just before a millisecond's edge past it:
    /// `Date()` then gives a millisecond after the one the clock (`Configuration.clock`) reads
    /// a moment later, about once in 11,000, and a store made just after the date would be
    /// stamped before the bound.
    var millisecondsAsLowerBound: Int64 { Self.clampedMilliseconds((timeIntervalSince1970 * 1000 - 0.01).rounded(.down)) }

    private static func clampedMilliseconds(_ value: Double) -> Int64 {
        guard value.isFinite else { return value > 0 ? 1_000_000_000_000_000 : (value < 0 ? -1_000_000_000_000_000 : 0) }
        return Int64(min(max(value, -1e15), 1e15))
    }
}

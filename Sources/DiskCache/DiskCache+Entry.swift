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
    var milliseconds: Int64 {
        let value = (timeIntervalSince1970 * 1000).rounded(.down)
        guard value.isFinite else { return value > 0 ? 1_000_000_000_000_000 : (value < 0 ? -1_000_000_000_000_000 : 0) }
        return Int64(min(max(value, -1e15), 1e15))
    }
}

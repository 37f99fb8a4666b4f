extension DiskCache {
    /// Why an entry left the cache.
    public enum RemovalReason: String, Hashable, Sendable, CaseIterable {
        /// The sweeper evicted it to bring the cache under its disk capacity.
        case capacity
        /// The sweeper evicted it to bring the cache under its count limit.
        case countLimit
        /// The sweeper evicted it because the volume's free space fell under the floor.
        case freeSpace
        /// Its expiry date passed.
        case expired
        /// A read found its files damaged or missing.
        case corrupt
        /// `removeValue` or `removeEntries(modifiedSince:)`.
        case explicit
    }
}

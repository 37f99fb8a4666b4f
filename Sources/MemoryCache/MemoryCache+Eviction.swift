extension MemoryCache {
    /// A value that left the cache without the caller removing it, as reported to
    /// ``MemoryCache/onEviction``.
    public struct Eviction: Sendable {
        /// The key the value was stored under.
        public let key: Key

        /// The value that left the cache. For ``EvictionReason/replaced`` it is the old
        /// value; for a value rejected because it costs more than
        /// ``MemoryCache/totalCostLimit`` it is the value that was passed to
        /// ``MemoryCache/store(_:for:cost:)``.
        public let value: Value

        /// The cost the value was stored with.
        public let cost: Int

        /// Why the value left.
        public let reason: EvictionReason

        /// Whether the value conformed to ``DiscardableContent`` when it was stored.
        @usableFromInline let isDiscardable: Bool

        @usableFromInline
        init(key: Key, value: Value, cost: Int, reason: EvictionReason, isDiscardable: Bool) {
            self.key = key
            self.value = value
            self.cost = cost
            self.reason = reason
            self.isDiscardable = isDiscardable
        }
    }
}

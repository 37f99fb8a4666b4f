/// Why a value left a ``MemoryCache`` without the caller removing it.
///
/// Values removed with ``MemoryCache/removeValue(for:)`` or
/// ``MemoryCache/removeAll()`` are not evictions: the caller asked for them to go and
/// already has (or has given up) the value, so they are counted in
/// ``MemoryCacheStatistics/removals`` and not reported to
/// ``MemoryCache/onEviction``.
public enum EvictionReason: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Evicted to keep ``MemoryCache/count`` within ``MemoryCache/countLimit``,
    /// either to make room for a new value or because the limit was lowered.
    case countLimit

    /// Evicted to keep ``MemoryCache/totalCost`` within ``MemoryCache/totalCostLimit``,
    /// either to make room for a new value or because the limit was lowered.
    ///
    /// A value whose own cost is larger than `totalCostLimit` is never stored: it is
    /// reported with this reason as soon as ``MemoryCache/store(_:for:cost:)`` is
    /// called.
    case costLimit

    /// Evicted by ``MemoryCache/trim(toCost:)`` or ``MemoryCache/trim(toCount:)``.
    case trimmed

    /// The value conforms to ``DiscardableContent``, its content had been discarded,
    /// and ``MemoryCache/evictsObjectsWithDiscardedContent`` is `true`.
    case discardedContent

    /// ``MemoryCache/store(_:for:cost:)`` stored another value under the same key.
    case replaced

    public var description: String {
        switch self {
        case .countLimit: "countLimit"
        case .costLimit: "costLimit"
        case .trimmed: "trimmed"
        case .discardedContent: "discardedContent"
        case .replaced: "replaced"
        }
    }
}

/// Counters kept by a ``MemoryCache`` since it was created, read as one consistent
/// snapshot with ``MemoryCache/statistics``.
///
/// The counters obey one identity at every snapshot:
/// `count == insertions - evictions - removals`, where `count` is the cache's
/// ``MemoryCache/count`` read in the same critical section (a replaced value is one
/// insertion and one ``EvictionReason/replaced`` eviction; a value too costly to store
/// is one insertion and one ``EvictionReason/costLimit`` eviction).
public struct MemoryCacheStatistics: Sendable, Hashable, CustomStringConvertible {
    /// Lookups with ``MemoryCache/value(for:)`` that returned a value.
    public var hits: Int { _hits }

    /// Lookups with ``MemoryCache/value(for:)`` that returned `nil`, including those
    /// that found a ``DiscardableContent`` value whose content had been discarded.
    public var misses: Int { _misses }

    /// Calls to ``MemoryCache/store(_:for:cost:)``, whether the key was new, was
    /// replaced, or the value was too costly to store.
    public var insertions: Int { _insertions }

    /// Values removed by ``MemoryCache/removeValue(for:)`` (when the key was present)
    /// and ``MemoryCache/removeAll()``.
    public var removals: Int { _removals }

    // Internal storage, mutated by inlined code of the cache.
    @usableFromInline var _hits = 0
    @usableFromInline var _misses = 0
    @usableFromInline var _insertions = 0
    @usableFromInline var _removals = 0
    @usableFromInline var evictionCounts: (Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0)

    /// Creates statistics with every counter at zero.
    public init() {}

    /// The number of evictions for one reason.
    public func evictions(_ reason: EvictionReason) -> Int {
        switch reason {
        case .countLimit: evictionCounts.0
        case .costLimit: evictionCounts.1
        case .trimmed: evictionCounts.2
        case .discardedContent: evictionCounts.3
        case .replaced: evictionCounts.4
        }
    }

    /// The number of evictions for all reasons together.
    public var evictions: Int {
        evictionCounts.0 + evictionCounts.1 + evictionCounts.2 + evictionCounts.3 + evictionCounts.4
    }

    /// `hits + misses`.
    public var lookups: Int { hits + misses }

    /// `hits / lookups`, or 0 before the first lookup.
    public var hitRatio: Double { lookups == 0 ? 0 : Double(hits) / Double(lookups) }

    @inlinable
    mutating func recordEviction(_ reason: EvictionReason) {
        switch reason {
        case .countLimit: evictionCounts.0 += 1
        case .costLimit: evictionCounts.1 += 1
        case .trimmed: evictionCounts.2 += 1
        case .discardedContent: evictionCounts.3 += 1
        case .replaced: evictionCounts.4 += 1
        }
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.hits == rhs.hits && lhs.misses == rhs.misses && lhs.insertions == rhs.insertions
            && lhs.removals == rhs.removals
            && EvictionReason.allCases.allSatisfy { lhs.evictions($0) == rhs.evictions($0) }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(hits)
        hasher.combine(misses)
        hasher.combine(insertions)
        hasher.combine(removals)
        for reason in EvictionReason.allCases { hasher.combine(evictions(reason)) }
    }

    public var description: String {
        let evicted = EvictionReason.allCases.map { "\($0): \(evictions($0))" }.joined(separator: ", ")
        return "MemoryCacheStatistics(hits: \(hits), misses: \(misses), insertions: \(insertions), "
            + "removals: \(removals), evictions: [\(evicted)])"
    }
}

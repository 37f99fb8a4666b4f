// Public because the inlinable hot paths below lock the `PthreadMutex`; no type of this
// package-internal module appears in the API.
public import DiskCacheLocking

/// A thread-safe in-memory key-value cache with strict count and cost limits, in the
/// spirit of Foundation's `NSCache` but with a contract you can rely on.
///
/// ```swift
/// let thumbnails = MemoryCache<String, Thumbnail>(name: "thumbnails", totalCostLimit: 64 << 20)
/// thumbnails.store(thumbnail, for: url, cost: thumbnail.byteCount)
/// if let hit = thumbnails.value(for: url) { ... }
/// ```
///
/// ### Limits are strict
///
/// ``countLimit`` and ``totalCostLimit`` (0 means no limit, the default for both) hold
/// whenever a call returns: `count <= countLimit` and `totalCost <= totalCostLimit`.
/// `NSCache` treats its limits as hints that it may honour later or never; this type
/// evicts inside the call that would break them, including the setter that lowers a
/// limit. A value whose own cost exceeds `totalCostLimit` is not stored at all: it is
/// reported to ``onEviction`` at once with reason ``EvictionReason/costLimit`` and any
/// older value under its key is removed (reason ``EvictionReason/replaced``).
///
/// ### Eviction order
///
/// Chosen once with ``EvictionPolicy`` when the cache is created: ``EvictionPolicy/s3FIFO``
/// (the default, scan-resistant) or ``EvictionPolicy/leastRecentlyUsed``. `NSCache`
/// leaves the order unspecified.
///
/// ### Threads
///
/// Every method may be called from any thread or task at any time. The state sits
/// behind one lock; every operation is synchronous, O(1) unless its documentation
/// says otherwise, and holds the lock only for the bookkeeping. Code you provide (the
/// ``onEviction`` handler and the ``DiscardableContent`` methods of your values) is
/// always called after the lock has been released, so it may call back into the cache.
/// Values that leave the cache are also released outside the lock.
///
/// ### Memory pressure
///
/// `NSCache` on Apple platforms empties itself when the system is short of memory.
/// Linux has no such signal for a process, so this cache never evicts on its own:
/// wire your own signal to ``trim(toCost:)`` or ``trim(toCount:)``. On Apple platforms,
/// a Dispatch memory-pressure source:
///
/// ```swift
/// let source = DispatchSource.makeMemoryPressureSource(eventMask: [.warning, .critical], queue: .global())
/// source.setEventHandler {
///     cache.trim(toCost: source.data.contains(.critical) ? 0 : cache.totalCost / 2)
/// }
/// source.activate()
/// ```
///
/// On Linux in a container, watch the cgroup (v2): poll `/sys/fs/cgroup/memory.events`
/// every few seconds from a thread you own and trim when its `high` or `max` counter
/// has grown, or compare `memory.current` with `memory.max`/`memory.high`; without a
/// cgroup limit, compare the resident set size (the second field of
/// `/proc/self/statm`, in pages) with a budget of your own. Trimming to a fraction of
/// ``totalCost`` (for example half) rather than to 0 keeps the hottest entries.
///
/// ### Differences from `NSCache` at a glance
///
/// - Limits are strict (see above), and `0` still means "no limit".
/// - Nothing is evicted behind your back; memory pressure is yours to report.
/// - ``onEviction`` is called after the value has left the cache, outside the lock,
///   and may use the cache; `NSCache`'s `cache(_:willEvictObject:)` is called before,
///   and must not touch the cache. Unlike `NSCache` on Apple platforms, values the
///   caller removes with ``removeValue(for:)`` or ``removeAll()`` are not reported;
///   unlike `NSCache`, a replaced value is (``EvictionReason/replaced``).
/// - ``DiscardableContent`` replaces `NSDiscardableContent`, with the same
///   ``evictsObjectsWithDiscardedContent`` switch.
/// - Keys are any `Hashable & Sendable` value and are never copied in the
///   `NSCopying` sense; values are any `Sendable` type, not only classes.
public final class MemoryCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// Receives each value that leaves the cache without the caller removing it.
    public typealias EvictionHandler = @Sendable (Eviction) -> Void

    @usableFromInline
    struct State: Sendable {
        @usableFromInline var core: _CacheCore<Key, Value>
        @usableFromInline var name: String
        @usableFromInline var onEviction: EvictionHandler?

        @usableFromInline
        init(core: _CacheCore<Key, Value>, name: String, onEviction: EvictionHandler?) {
            self.core = core
            self.name = name
            self.onEviction = onEviction
        }
    }

    // Internal rather than private only so that the hot paths can be `@inlinable`:
    // specialised for the client's `Key` and `Value`, a hit is an order of magnitude
    // faster than through unspecialised generic code. Only this file uses it.
    @usableFromInline
    let state: PthreadMutex<State>

    /// The eviction order chosen when the cache was created.
    public let policy: EvictionPolicy

    /// Creates an empty cache.
    ///
    /// - Parameters:
    ///   - name: A label for logs and debugging; see ``name``.
    ///   - countLimit: The maximum number of values, 0 for no limit; see ``countLimit``.
    ///   - totalCostLimit: The maximum sum of the values' costs, 0 for no limit; see
    ///     ``totalCostLimit``.
    ///   - policy: The eviction order; ``EvictionPolicy/s3FIFO`` by default.
    ///   - evictsObjectsWithDiscardedContent: See ``evictsObjectsWithDiscardedContent``;
    ///     `true` by default.
    ///   - onEviction: See ``onEviction``; none by default.
    /// - Precondition: The limits are not negative.
    public init(
        name: String = "",
        countLimit: Int = 0,
        totalCostLimit: Int = 0,
        policy: EvictionPolicy = .s3FIFO,
        evictsObjectsWithDiscardedContent: Bool = true,
        onEviction: EvictionHandler? = nil
    ) {
        precondition(countLimit >= 0, "countLimit must not be negative")
        precondition(totalCostLimit >= 0, "totalCostLimit must not be negative")
        self.policy = policy
        self.state = PthreadMutex(
            State(
                core: _CacheCore(
                    policy: policy,
                    countLimit: countLimit,
                    totalCostLimit: totalCostLimit,
                    evictsObjectsWithDiscardedContent: evictsObjectsWithDiscardedContent
                ),
                name: name,
                onEviction: onEviction
            )
        )
    }

    // MARK: - Settings

    /// A label for logs and debugging. The cache itself never reads it.
    ///
    /// Empty by default.
    public var name: String {
        get { state.withLock { $0.name } }
        set { state.withLock { $0.name = newValue } }
    }

    /// The maximum number of values the cache holds; 0 (the default) means no limit.
    ///
    /// A change takes effect at once: lowering the limit below ``count`` evicts values
    /// in policy order (reason ``EvictionReason/countLimit``) before the setter returns.
    ///
    /// - Precondition: The new limit is not negative.
    /// - Complexity: O(1), plus O(1) amortised per value evicted.
    public var countLimit: Int {
        get { state.withLock { $0.core.countLimit } }
        set { setLimit(\.countLimit, to: newValue, named: "countLimit") }
    }

    /// The maximum sum of the costs of the values the cache holds; 0 (the default)
    /// means no limit.
    ///
    /// Costs are whatever unit you pass to ``store(_:for:cost:)``, typically
    /// bytes. A change takes effect at once: lowering the limit below ``totalCost``
    /// evicts values in policy order (reason ``EvictionReason/costLimit``) before the
    /// setter returns.
    ///
    /// - Precondition: The new limit is not negative.
    /// - Complexity: O(1), plus O(1) amortised per value evicted.
    public var totalCostLimit: Int {
        get { state.withLock { $0.core.totalCostLimit } }
        set { setLimit(\.totalCostLimit, to: newValue, named: "totalCostLimit") }
    }

    /// Sets one of the limits (never negative), evicting down to it before it returns.
    private func setLimit(_ limit: WritableKeyPath<_CacheCore<Key, Value>, Int>, to value: Int, named name: String) {
        precondition(value >= 0, "\(name) must not be negative")
        mutate {
            $0[keyPath: limit] = value
            $0.makeRoom(count: 0, cost: 0, evictions: &$1)
        }
    }

    /// Whether values conforming to ``DiscardableContent`` are removed once their
    /// content has been discarded; `true` by default, as in `NSCache`.
    ///
    /// When `true`, such a value is removed (reason ``EvictionReason/discardedContent``)
    /// when ``value(for:)`` finds that ``DiscardableContent/beginContentAccess()``
    /// fails, and when ``trim(toCost:)`` or ``trim(toCount:)`` sweeps the cache. When
    /// `false`, it stays until a limit or a trim evicts it, but ``value(for:)``
    /// still returns `nil` for it. A change applies from the next lookup or trim.
    public var evictsObjectsWithDiscardedContent: Bool {
        get { state.withLock { $0.core.evictsObjectsWithDiscardedContent } }
        set { state.withLock { $0.core.evictsObjectsWithDiscardedContent = newValue } }
    }

    /// Called once for every value that leaves the cache without the caller removing it,
    /// with the key, the value, its cost and the ``EvictionReason``; `nil` by default.
    ///
    /// The handler runs on the thread whose call caused the eviction, after that call
    /// has released the lock and before it returns, in the order the values left. It
    /// may call any method of the cache. Handlers of different threads may run at the
    /// same time. A handler set while another thread is evicting applies from that
    /// thread's next call. Values removed with ``removeValue(for:)`` or
    /// ``removeAll()`` are not reported.
    public var onEviction: EvictionHandler? {
        get { state.withLock { $0.onEviction } }
        set { state.withLock { $0.onEviction = newValue } }
    }

    // MARK: - Reading the state

    /// The number of values in the cache.
    ///
    /// - Complexity: O(1).
    @inlinable
    public var count: Int { state.withLock { $0.core.count } }

    /// The sum of the costs of the values in the cache.
    ///
    /// - Complexity: O(1).
    public var totalCost: Int { state.withLock { $0.core.totalCost } }

    /// A snapshot of the hit, miss, insertion, removal and eviction counters since the
    /// cache was created.
    ///
    /// - Complexity: O(1).
    public var statistics: MemoryCacheStatistics { state.withLock { $0.core.statistics } }

    // MARK: - Values

    /// Returns the value stored under `key`, or `nil`.
    ///
    /// A hit counts as a use for the eviction policy (LRU moves the entry to the front;
    /// S3-FIFO raises its access counter). If the value conforms to
    /// ``DiscardableContent``, its ``DiscardableContent/beginContentAccess()`` is called
    /// (outside the lock): when it returns `true` the value is returned and you must
    /// call ``DiscardableContent/endContentAccess()`` when done; when it returns `false`
    /// the lookup is a miss, `nil` is returned, and the entry is removed if
    /// ``evictsObjectsWithDiscardedContent`` is `true`.
    ///
    /// - Complexity: O(1).
    @inlinable
    public func value(for key: Key) -> Value? {
        guard let hit = state.withLock({ $0.core.lookup(key) }) else { return nil }
        guard hit.isDiscardable, let content = hit.value as? any DiscardableContent else {
            return hit.value
        }
        if content.beginContentAccess() { return hit.value }
        let identity = ObjectIdentifier(content)
        mutate { $0.contentAccessFailed(forKey: key, content: identity, evictions: &$1) }
        return nil
    }

    /// The value stored under `key`, or `nil`, without counting as a use: the eviction order
    /// and ``statistics`` stay as they were, and ``DiscardableContent`` is not accessed. For
    /// callers that look at values without using them (the tiered cache reading metadata).
    package func valueWithoutUse(for key: Key) -> Value? {
        state.withLock { $0.core.peek(key) }
    }

    /// Every value stored, without counting as a use (as ``valueWithoutUse(for:)``), for
    /// callers that check each one against something outside the cache. O(n).
    package func valuesWithoutUse() -> [Value] {
        state.withLock { $0.core.allValues() }
    }

    /// Stores `value` under `key` with a cost, replacing any value already there, and
    /// evicts as many values as needed to keep both limits.
    ///
    /// A replaced value is reported to ``onEviction`` with reason
    /// ``EvictionReason/replaced``, and the total cost is updated to the new cost. If
    /// `cost` is larger than a non-zero ``totalCostLimit`` the value is not stored: it
    /// is reported at once with reason ``EvictionReason/costLimit`` and the old value
    /// under `key`, if any, is removed (reason ``EvictionReason/replaced``). The value
    /// being stored is never evicted to make room for itself.
    ///
    /// - Parameters:
    ///   - value: The value to store.
    ///   - key: The key to store it under.
    ///   - cost: What the value counts against ``totalCostLimit``, typically its size in
    ///     bytes; 0 by default, as in `NSCache`.
    /// - Precondition: `cost` is not negative.
    /// - Complexity: O(1), plus O(1) amortised per value evicted.
    @inlinable
    public func store(_ value: Value, for key: Key, cost: Int = 0) {
        precondition(cost >= 0, "cost must not be negative")
        let isDiscardable = value is any DiscardableContent
        mutate { $0.insert(value, forKey: key, cost: cost, isDiscardable: isDiscardable, evictions: &$1) }
    }

    /// Removes the value stored under `key` and returns it, or returns `nil` if there
    /// was none. The removal is not reported to ``onEviction``.
    ///
    /// - Complexity: O(1).
    @inlinable @discardableResult
    public func removeValue(for key: Key) -> Value? {
        state.withLock { $0.core.removeValue(forKey: key) }
    }

    // MARK: - Earlier names

    // The names of the first releases, NSCache's way of saying it. The three caches now say
    // value/data(for:), store(_:for:), removeValue(for:), as URLCache does in Swift.

    /// Renamed ``value(for:)``.
    @available(*, deprecated, renamed: "value(for:)")
    @inlinable
    public func value(forKey key: Key) -> Value? { value(for: key) }

    /// Renamed ``store(_:for:cost:)``.
    @available(*, deprecated, renamed: "store(_:for:cost:)")
    @inlinable
    public func setValue(_ value: Value, forKey key: Key, cost: Int = 0) { store(value, for: key, cost: cost) }

    /// Renamed ``removeValue(for:)``.
    @available(*, deprecated, renamed: "removeValue(for:)")
    @inlinable @discardableResult
    public func removeValue(forKey key: Key) -> Value? { removeValue(for: key) }

    /// Removes every value. The removals are not reported to ``onEviction``; the
    /// values are released after the lock has been dropped.
    ///
    /// - Complexity: O(1) under the lock; O(n) to release the values afterwards.
    public func removeAll() {
        let released = state.withLock { $0.core.removeAll() }
        withExtendedLifetime(released) {}
    }

    // MARK: - Trimming

    /// Evicts values until ``totalCost`` is at most `cost`, for example when the
    /// process is short of memory (see "Memory pressure" above).
    ///
    /// First sweeps out values whose ``DiscardableContent`` has been discarded (when
    /// ``evictsObjectsWithDiscardedContent`` is `true`, reason
    /// ``EvictionReason/discardedContent``), then evicts in policy order with reason
    /// ``EvictionReason/trimmed``. The limits are not changed, so the cache may grow
    /// again afterwards. `trim(toCost: 0)` evicts every value with a non-zero cost and,
    /// on the way, those with cost 0 that come before them in policy order.
    ///
    /// - Precondition: `cost` is not negative.
    /// - Complexity: O(k) for k values evicted, plus O(n) when the cache holds
    ///   ``DiscardableContent`` values (the sweep visits each of them).
    public func trim(toCost cost: Int) {
        precondition(cost >= 0, "cost must not be negative")
        sweepThen { $0.trim(toCost: cost, evictions: &$1) }
    }

    /// Evicts values until ``count`` is at most `count`.
    ///
    /// Sweeps and evicts as ``trim(toCost:)`` does. The limits are not changed.
    ///
    /// - Precondition: `count` is not negative.
    /// - Complexity: O(k) for k values evicted, plus O(n) when the cache holds
    ///   ``DiscardableContent`` values.
    public func trim(toCount count: Int) {
        precondition(count >= 0, "count must not be negative")
        sweepThen { $0.trim(toCount: count, evictions: &$1) }
    }

    // MARK: - Private

    /// Runs `body` under the lock, then reports what it evicted outside the lock.
    @inlinable
    func mutate(_ body: (inout _CacheCore<Key, Value>, inout [Eviction]) -> Void) {
        let (evictions, handler) = state.withLock { state -> ([Eviction], EvictionHandler?) in
            var evictions: [Eviction] = []
            body(&state.core, &evictions)
            return evictions.isEmpty ? ([], nil) : (evictions, state.onEviction)
        }
        if !evictions.isEmpty { deliver(evictions, to: handler) }
    }

    /// Checks outside the lock which discardable values have lost their content, then
    /// removes those (if they are still stored) and runs `body` in one critical section.
    private func sweepThen(_ body: (inout _CacheCore<Key, Value>, inout [Eviction]) -> Void) {
        let candidates = state.withLock { state -> [(key: Key, content: any DiscardableContent)] in
            state.core.evictsObjectsWithDiscardedContent ? state.core.discardableEntries() : []
        }
        let discarded = candidates.filter { $0.content.isContentDiscarded }
        mutate { core, evictions in
            for entry in discarded {
                core.removeDiscarded(entry.key, content: ObjectIdentifier(entry.content), evictions: &evictions)
            }
            body(&core, &evictions)
        }
    }

    @usableFromInline
    func deliver(_ evictions: [Eviction], to handler: EvictionHandler?) {
        for eviction in evictions {
            if eviction.isDiscardable, let content = eviction.value as? any DiscardableContent {
                switch eviction.reason {
                case .countLimit, .costLimit, .trimmed: content.discardContentIfPossible()
                case .discardedContent, .replaced: break
                }
            }
            handler?(eviction)
        }
    }
}

extension MemoryCache: CustomStringConvertible {
    public var description: String {
        let (name, count, cost) = state.withLock { ($0.name, $0.core.count, $0.core.totalCost) }
        return "MemoryCache(name: \(name.isEmpty ? "-" : name), policy: \(policy), count: \(count), totalCost: \(cost))"
    }
}

// MARK: - Testing

extension MemoryCache {
    /// Problems found by walking every internal list; empty when consistent. O(n).
    func _checkInvariants() -> [String] {
        state.withLock { $0.core.checkInvariants() }
    }

    /// Keys per queue in eviction order, next victim first. O(n).
    func _keysInEvictionOrder() -> (small: [Key], main: [Key]) {
        state.withLock { $0.core.keysInEvictionOrder() }
    }
}

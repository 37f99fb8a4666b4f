/// A value whose memory can be given back while the object itself stays alive,
/// the Swift counterpart of Foundation's `NSDiscardableContent`.
///
/// The object keeps an access counter. ``beginContentAccess()`` increments it and
/// returns `false` if the content is already gone; ``endContentAccess()`` decrements
/// it; ``discardContentIfPossible()`` frees the content only while the counter is
/// zero. The object is shared between threads, so it must make these calls
/// thread-safe itself (hence the `Sendable` requirement).
///
/// ### How ``MemoryCache`` uses it
///
/// Whether a value conforms is checked once, when it is stored.
///
/// - ``MemoryCache/value(for:)`` calls ``beginContentAccess()`` before it returns
///   the value. When that succeeds the caller owns one access and must balance it
///   with ``endContentAccess()``. When it fails the lookup is a miss: `nil` is
///   returned and, if ``MemoryCache/evictsObjectsWithDiscardedContent`` is `true`,
///   the entry is removed with reason ``EvictionReason/discardedContent``.
/// - ``MemoryCache/trim(toCost:)`` and ``MemoryCache/trim(toCount:)`` first sweep the
///   cache: every conforming value whose ``isContentDiscarded`` is `true` is removed
///   (when `evictsObjectsWithDiscardedContent` is `true`), before any other entry.
/// - When the cache evicts a conforming value for a limit or a trim (reasons
///   ``EvictionReason/countLimit``, ``EvictionReason/costLimit``,
///   ``EvictionReason/trimmed``), it calls ``discardContentIfPossible()`` on it,
///   just before it reports the eviction. It does not do so for a value that was
///   replaced or removed by the caller, who may still be using it.
///
/// All four methods are called after the cache has released its lock, so an
/// implementation may call back into the cache.
public protocol DiscardableContent: AnyObject, Sendable {
    /// Marks the content as in use so that it is not discarded.
    ///
    /// - Returns: `true` if the content is available (and the access counter was
    ///   incremented); `false` if it had already been discarded.
    func beginContentAccess() -> Bool

    /// Balances one successful ``beginContentAccess()``.
    func endContentAccess()

    /// Discards the content if no access is in progress.
    func discardContentIfPossible()

    /// Whether the content has been discarded.
    var isContentDiscarded: Bool { get }
}

import MemoryCache

/// How many times each key was offered lately, for an admission filter that takes a key only
/// on its `minimumUses`-th offer (`DiskCache.Admission`; the server's `--min-uses`): the last
/// `window` keys offered are remembered, oldest forgotten first, with their counts.
///
/// A key is remembered in a ``_GhostQueue`` (membership and first-in-first-out order); counts
/// past the first offer go in a dictionary, kept only for keys the queue still remembers.
package struct UseCounts<Key: Hashable> {
    private var seen = _GhostQueue<Key>()
    /// Offers of a remembered key beyond its first, when `minimumUses` is over 2.
    private var extra: [Key: Int] = [:]

    package init() {}

    /// Counts one offer of `key`; returns true when it is at least its `minimumUses`-th within
    /// the window (the key is then forgotten: a later offer starts over). `minimumUses` of 1 or
    /// less admits every offer and remembers nothing.
    package mutating func admits(_ key: Key, minimumUses: Int, window: Int) -> Bool {
        guard minimumUses > 1 else { return true }
        guard seen.contains(key) else {
            seen.insert(key, capacity: max(1, window))
            extra[key] = nil
            // Counts of keys the queue has forgotten go once they outnumber it.
            if extra.count > 2 * seen.count + 16 { extra = extra.filter { seen.contains($0.key) } }
            return false
        }
        let uses = (extra[key] ?? 1) + 1
        guard uses >= minimumUses else {
            extra[key] = uses
            return false
        }
        _ = seen.remove(key)
        extra[key] = nil
        return true
    }

    /// Forgets `key` (it was stored another way).
    package mutating func forget(_ key: Key) {
        if seen.remove(key) { extra[key] = nil }
    }

    /// Keys remembered.
    package var count: Int { seen.count }
}

extension UseCounts: Sendable where Key: Sendable {}

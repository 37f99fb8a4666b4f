/// The keys most recently evicted from S3-FIFO's small queue, oldest first.
///
/// Membership is a dictionary so `remove(_:)` is O(1); the FIFO order is a ring of
/// `(key, stamp)` pairs in which an entry whose stamp no longer matches the dictionary
/// is stale (its key was removed or inserted again) and is skipped when it reaches
/// the front.
@usableFromInline
package struct _GhostQueue<Key: Hashable> {
    @usableFromInline var members: [Key: UInt64] = [:]
    @usableFromInline var order = _RingBuffer<(key: Key, stamp: UInt64)>()
    @usableFromInline var nextStamp: UInt64 = 0

    @inlinable package init() {}

    @inlinable package var count: Int { members.count }

    @inlinable package func contains(_ key: Key) -> Bool { members[key] != nil }

    /// Remembers `key`, then forgets the oldest keys until at most `capacity` remain.
    @inlinable
    package mutating func insert(_ key: Key, capacity: Int) {
        guard capacity > 0 else {
            removeAll()
            return
        }
        nextStamp &+= 1
        members[key] = nextStamp
        order.append((key, nextStamp))
        // The second bound keeps stale pairs from piling up when many ghost keys are
        // taken back by `remove(_:)`.
        while members.count > capacity || order.count > 2 * capacity + 16 {
            guard let oldest = order.popFirst() else { break }
            if members[oldest.key] == oldest.stamp {
                members.removeValue(forKey: oldest.key)
            }
        }
    }

    /// Forgets `key`; returns whether it was remembered.
    @inlinable
    package mutating func remove(_ key: Key) -> Bool {
        members.removeValue(forKey: key) != nil
    }

    @inlinable
    package mutating func removeAll() {
        members = [:]
        order.removeAll()
    }

    /// The remembered keys, oldest first (what a replay inserts in this order to rebuild it).
    package var keysOldestFirst: [Key] {
        var keys: [Key] = []
        keys.reserveCapacity(members.count)
        var copy = order
        while let pair = copy.popFirst() {
            if members[pair.key] == pair.stamp { keys.append(pair.key) }
        }
        return keys
    }
}

extension _GhostQueue: Sendable where Key: Sendable {}

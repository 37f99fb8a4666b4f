/// The keys most recently evicted from S3-FIFO's small queue, oldest first.
///
/// Membership is a dictionary so `remove(_:)` is O(1); the FIFO order is a ring of
/// `(key, stamp)` pairs in which an entry whose stamp no longer matches the dictionary
/// is stale (its key was removed or inserted again) and is skipped when it reaches
/// the front.
@usableFromInline
struct _GhostQueue<Key: Hashable> {
    @usableFromInline var members: [Key: UInt64] = [:]
    @usableFromInline var order = _RingBuffer<(key: Key, stamp: UInt64)>()
    @usableFromInline var nextStamp: UInt64 = 0

    @inlinable init() {}

    @inlinable var count: Int { members.count }

    /// Remembers `key`, then forgets the oldest keys until at most `capacity` remain.
    @inlinable
    mutating func insert(_ key: Key, capacity: Int) {
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
    mutating func remove(_ key: Key) -> Bool {
        members.removeValue(forKey: key) != nil
    }

    @inlinable
    mutating func removeAll() {
        members = [:]
        order.removeAll()
    }
}

extension _GhostQueue: Sendable where Key: Sendable {}

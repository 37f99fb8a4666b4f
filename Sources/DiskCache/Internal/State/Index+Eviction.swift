import MemoryCache

/// The eviction order: which entry the sweeper removes next, kept inside the index so that a
/// journal replay rebuilds it with the entries.
///
/// `.s3FIFO` (the default; Yang et al., SOSP 2023, as `EvictionPolicy.s3FIFO` describes it for
/// the memory tier): a new entry joins the *small* queue, unless its key was evicted from the
/// small queue lately (the *ghost*, which remembers keys, not values), when it joins the *main*
/// queue. Each read raises the entry's frequency (0...3). At the small queue's old end an entry
/// read at least twice moves to the main queue and any other is evicted and remembered by the
/// ghost; at the main queue's old end an entry read since it last came round goes round again
/// with its frequency lowered by one, and one that was not is evicted. The small queue is kept
/// to a tenth of the limit being enforced. One-hit wonders and scans thus leave through the
/// small queue and never push out what the main queue keeps.
///
/// `.leastRecentlyUsed`: one queue, a read moves the entry to the new end.
///
/// Every change of the order follows from the journal's records alone, so a replay at open, or
/// another instance following the journal, arrives at the order the writer had:
/// - PUT of a new key: joins a queue as above; of a key present: counts as a read.
/// - ACCESS: a read. (A read is journaled whenever it changes the order: under S3-FIFO while the
///   frequency is below 3, and whenever the second of the access time changes, as before.)
/// - REMOVE: before the entry leaves, its queue's old end is *settled* (the moves the sweeper
///   makes before it evicts are made again: promotions from the small queue, rounds in the
///   main queue), whatever the removal's reason: the writer settles the same way on every
///   removal, so writer and replay agree. Removing an entry of the small queue remembers its key
///   in the ghost; a REMOVE of a key not present only does that (how a compacted journal
///   carries the ghost).
/// - A compacted journal writes each queue oldest first, each PUT flagged with its queue and
///   frequency (``Journal/Put/placement``), then the ghost's keys as REMOVE records.
extension Index {
    enum Queue: UInt32 {
        case none = 0
        case small = 1
        case main = 2
    }

    /// Where a compacted journal's PUT puts its entry: a queue and a frequency.
    struct Placement: Equatable {
        var queue: Queue
        var frequency: UInt8
    }

    /// The two ends of one queue, as positions in `records` (-1: empty), and its totals.
    struct QueueEnds {
        var newest = -1
        var oldest = -1
        var count = 0
        var diskUsage: Int64 = 0
    }

    /// Per record: the positions (+1; 0 for none) of its neighbours in its queue, with its queue
    /// in the top 2 bits of `newerBits` and its frequency in the top 2 bits of `olderBits`.
    /// (Positions take 30 bits: a billion entries.)
    struct QueueLinks {
        var newerBits: UInt32 = 0
        var olderBits: UInt32 = 0

        static let positionMask: UInt32 = (1 << 30) - 1

        var newer: Int { Int(newerBits & Self.positionMask) - 1 }
        var older: Int { Int(olderBits & Self.positionMask) - 1 }
        var queue: Queue { Queue(rawValue: newerBits >> 30) ?? .none }
        var frequency: UInt8 { UInt8(olderBits >> 30) }

        mutating func setNewer(_ position: Int) {
            newerBits = newerBits & ~Self.positionMask | UInt32(position + 1)
        }
        mutating func setOlder(_ position: Int) {
            olderBits = olderBits & ~Self.positionMask | UInt32(position + 1)
        }
        mutating func setQueue(_ queue: Queue) {
            newerBits = newerBits & Self.positionMask | queue.rawValue << 30
        }
        mutating func setFrequency(_ frequency: UInt8) {
            olderBits = olderBits & Self.positionMask | UInt32(min(frequency, Index.maximumFrequency)) << 30
        }
    }

    static let maximumFrequency: UInt8 = 3
    /// S3-FIFO: the small queue's share of the limit being enforced (a tenth).
    static let smallQueueShareDenominator: Int64 = 10
    /// S3-FIFO: the reads an entry needs in the small queue to move to the main queue.
    static let promotionFrequency: UInt8 = 2

    // MARK: - Linking

    func ends(_ queue: Queue) -> QueueEnds { queue == .small ? small : main }

    private mutating func withEnds<T>(_ queue: Queue, _ body: (inout QueueEnds) -> T) -> T {
        queue == .small ? body(&small) : body(&main)
    }

    /// Puts the record at `position` at the new end of `queue`.
    mutating func link(_ position: Int, into queue: Queue) {
        let usage = records[position].entry.diskUsage(blockSize: blockSize)
        let previousNewest = ends(queue).newest
        records[position].links.setQueue(queue)
        records[position].links.setNewer(-1)
        records[position].links.setOlder(previousNewest)
        if previousNewest >= 0 { records[previousNewest].links.setNewer(position) }
        withEnds(queue) { ends in
            ends.newest = position
            if ends.oldest < 0 { ends.oldest = position }
            ends.count += 1
            ends.diskUsage += usage
        }
    }

    /// Takes the record at `position` out of its queue.
    mutating func unlink(_ position: Int) {
        let links = records[position].links
        let queue = links.queue
        guard queue != .none else { return }
        let usage = records[position].entry.diskUsage(blockSize: blockSize)
        if links.newer >= 0 { records[links.newer].links.setOlder(links.older) }
        if links.older >= 0 { records[links.older].links.setNewer(links.newer) }
        withEnds(queue) { ends in
            if ends.newest == position { ends.newest = links.older }
            if ends.oldest == position { ends.oldest = links.newer }
            ends.count -= 1
            ends.diskUsage -= usage
        }
        records[position].links.setQueue(.none)
    }

    /// The record at `from` now lives at `to` (the index keeps its storage dense): its
    /// neighbours and its queue's ends are pointed there.
    mutating func relink(from: Int, to: Int) {
        let links = records[to].links
        guard links.queue != .none else { return }
        if links.newer >= 0 { records[links.newer].links.setOlder(to) }
        if links.older >= 0 { records[links.older].links.setNewer(to) }
        withEnds(links.queue) { ends in
            if ends.newest == from { ends.newest = to }
            if ends.oldest == from { ends.oldest = to }
        }
    }

    // MARK: - What the records do to the order

    /// A new entry at `position` joins its queue (a compacted journal's PUT says which).
    mutating func admit(_ position: Int, placement: Placement?) {
        let hash = records[position].hash
        switch policy {
        case .leastRecentlyUsed:
            link(position, into: .main)
        case .s3FIFO:
            let cameBack = ghost.remove(hash)
            if let placement, placement.queue != .none {
                link(position, into: placement.queue)
                records[position].links.setFrequency(placement.frequency)
            } else {
                link(position, into: cameBack ? .main : .small)
            }
        }
    }

    /// A read of the entry at `position`. Returns whether it changed the order (and so must be
    /// journaled for a replay to agree).
    @discardableResult
    mutating func noteRead(_ position: Int) -> Bool {
        switch policy {
        case .leastRecentlyUsed:
            guard main.newest != position else { return false }
            unlink(position)
            link(position, into: .main)
            return true
        case .s3FIFO:
            let frequency = records[position].links.frequency
            guard frequency < Self.maximumFrequency else { return false }
            records[position].links.setFrequency(frequency + 1)
            return true
        }
    }

    /// The replaced entry's disk usage moves to its successor's in the queue's total.
    mutating func noteReplaced(_ position: Int, oldUsage: Int64) {
        let queue = records[position].links.queue
        guard queue != .none else { return }
        let delta = records[position].entry.diskUsage(blockSize: blockSize) - oldUsage
        withEnds(queue) { $0.diskUsage += delta }
    }

    /// Makes at the old end of `queue` the moves the sweeper makes before it evicts from it:
    /// S3-FIFO promotes entries read twice from the small queue to the main queue, and sends
    /// entries read since their last round in the main queue round again, one frequency lower.
    /// Afterwards the queue's oldest entry (if any) is the one to evict.
    ///
    /// - Complexity: amortised O(1): each promotion follows a store, each round a read.
    mutating func settle(_ queue: Queue) {
        guard policy == .s3FIFO else { return }
        switch queue {
        case .small:
            while small.oldest >= 0, records[small.oldest].links.frequency >= Self.promotionFrequency {
                let position = small.oldest
                unlink(position)
                link(position, into: .main)
            }
        case .main:
            while main.oldest >= 0, records[main.oldest].links.frequency > 0 {
                let position = main.oldest
                let frequency = records[position].links.frequency
                unlink(position)
                link(position, into: .main)
                records[position].links.setFrequency(frequency - 1)
            }
        case .none:
            break
        }
    }

    /// The entry at `position` leaves the order (its record is removed next): its queue is
    /// settled first, as the sweeper's would have been (see the type's notes), and under
    /// S3-FIFO a key leaving the small queue is remembered by the ghost.
    mutating func release(_ position: Int) {
        let queue = records[position].links.queue
        settle(queue)
        let finalQueue = records[position].links.queue
        unlink(position)
        if policy == .s3FIFO, finalQueue == .small { remember(records[position].hash) }
    }

    /// Remembers a key evicted from the small queue (or carried by a compacted journal).
    mutating func remember(_ hash: KeyHash) {
        guard policy == .s3FIFO else { return }
        // As many keys as the cache holds entries, less a tenth (libCacheSim's 0.9), at least 16.
        ghost.insert(hash, capacity: max(16, records.count - records.count / 10))
    }

    // MARK: - The sweeper's side

    /// What a limit being enforced counts.
    enum Measure {
        case count(limit: Int)
        case diskUsage(limit: Int64)
    }

    /// The entry the sweeper should evict next to bring `measure` under its limit: the queue it
    /// comes from is settled first (so this mutates the order even if the caller then does not
    /// evict; the removal settles again, finding nothing to do).
    mutating func evictionCandidate(for measure: Measure) -> (hash: KeyHash, entry: IndexEntry)? {
        guard count > 0 else { return nil }
        var queue = Queue.main
        if policy == .s3FIFO {
            // The small queue while the main queue is within its share, as libCacheSim's S3-FIFO.
            let mainIsOver: Bool
            switch measure {
            case .count(let limit):
                let limit = Int64(limit)
                mainIsOver = Int64(main.count) > limit - limit / Self.smallQueueShareDenominator
            case .diskUsage(let limit):
                mainIsOver = main.diskUsage > limit - limit / Self.smallQueueShareDenominator
            }
            queue = mainIsOver || small.count == 0 ? .main : .small
            settle(queue)
            if ends(queue).oldest < 0 {
                // Every entry of the small queue moved on: evict from the main queue.
                queue = .main
                settle(.main)
            }
        }
        let position = ends(queue).oldest
        guard position >= 0 else { return nil }
        return (records[position].hash, records[position].entry)
    }

    /// Every entry with its place in the order, each queue oldest first: what a compacted
    /// journal writes (then ``ghostKeys``), so that its replay rebuilds this order.
    var entriesInEvictionOrder: [(hash: KeyHash, entry: IndexEntry, placement: Placement)] {
        var ordered: [(hash: KeyHash, entry: IndexEntry, placement: Placement)] = []
        ordered.reserveCapacity(count)
        for queue in [Queue.small, .main] {
            var position = ends(queue).oldest
            while position >= 0 {
                let record = records[position]
                ordered.append((record.hash, record.entry, Placement(queue: queue, frequency: record.links.frequency)))
                position = record.links.newer
            }
        }
        return ordered
    }

    /// Whether S3-FIFO's ghost remembers `hash` (evicted from the small queue lately).
    func wasEvictedLately(_ hash: KeyHash) -> Bool { ghost.contains(hash) }

    /// The keys the ghost remembers, oldest first.
    var ghostKeys: [KeyHash] { ghost.keysOldestFirst }
    var ghostCount: Int { ghost.count }
}

/// The data structure behind ``MemoryCache``, without locking: a dictionary from key
/// to slot, an array-backed pool of nodes threaded into intrusive doubly linked
/// lists, and the bookkeeping of both eviction policies.
///
/// Every list has its newest node at `head` and its eviction candidate at `tail`.
/// `.leastRecentlyUsed` uses the `main` list only; `.s3FIFO` uses `small`, `main`
/// and `ghost`. Every mutating method leaves `count <= countLimit` and
/// `totalCost <= totalCostLimit` (for non-zero limits) and appends what it evicted to
/// `evictions`, in order, without calling any code it does not own.
@usableFromInline
struct _CacheCore<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline typealias Eviction = MemoryCache<Key, Value>.Eviction

    @usableFromInline enum Queue: UInt8, Sendable {
        /// Not linked: on the free list, or briefly while a value is replaced.
        case none
        case small
        case main
    }

    @usableFromInline struct Node: Sendable {
        @usableFromInline var key: Key?
        @usableFromInline var value: Value?
        @usableFromInline var cost: Int
        @usableFromInline var prev: Int
        @usableFromInline var next: Int
        @usableFromInline var queue: Queue
        /// S3-FIFO's access counter, 0...3.
        @usableFromInline var frequency: UInt8
        @usableFromInline var isDiscardable: Bool

        @inlinable
        init(key: Key, value: Value, cost: Int, isDiscardable: Bool) {
            self.key = key
            self.value = value
            self.cost = cost
            self.prev = -1
            self.next = -1
            self.queue = .none
            self.frequency = 0
            self.isDiscardable = isDiscardable
        }
    }

    @usableFromInline struct List: Sendable {
        @usableFromInline var head = -1
        @usableFromInline var tail = -1
        @usableFromInline var count = 0
        @usableFromInline var cost = 0

        @inlinable init() {}
    }

    @usableFromInline enum Dimension {
        case count
        case cost
    }

    /// S3-FIFO's small queue holds this share of the cache (1/10).
    @inlinable static var smallQueueShareDenominator: Int { 10 }

    @inlinable static var maximumFrequency: UInt8 { 3 }

    @usableFromInline let policy: EvictionPolicy
    @usableFromInline var countLimit: Int
    @usableFromInline var totalCostLimit: Int
    @usableFromInline var evictsObjectsWithDiscardedContent: Bool
    @usableFromInline var statistics = MemoryCacheStatistics()

    @usableFromInline var index: [Key: Int] = [:]
    @usableFromInline var nodes: ContiguousArray<Node> = []
    @usableFromInline var freeHead = -1
    @usableFromInline var small = List()
    @usableFromInline var main = List()
    @usableFromInline var ghost = _GhostQueue<Key>()
    @usableFromInline var discardableCount = 0

    @usableFromInline
    init(policy: EvictionPolicy, countLimit: Int, totalCostLimit: Int, evictsObjectsWithDiscardedContent: Bool) {
        self.policy = policy
        self.countLimit = countLimit
        self.totalCostLimit = totalCostLimit
        self.evictsObjectsWithDiscardedContent = evictsObjectsWithDiscardedContent
    }

    /// The number of stored values (a value being replaced is briefly not counted).
    @inlinable var count: Int { small.count + main.count }

    @inlinable var totalCost: Int { small.cost + main.cost }

    // MARK: - Operations

    /// The value under `key`, without recording an access or counting a lookup.
    @inlinable
    func peek(_ key: Key) -> Value? {
        index[key].flatMap { nodes[$0].value }
    }

    /// Every stored value, without recording an access. O(slots).
    func allValues() -> [Value] {
        nodes.compactMap { $0.queue != .none ? $0.value : nil }
    }

    /// Finds `key` and records the access for the eviction policy.
    @inlinable
    mutating func lookup(_ key: Key) -> (value: Value, isDiscardable: Bool)? {
        guard let slot = index[key] else {
            statistics._misses += 1
            return nil
        }
        statistics._hits += 1
        touch(slot)
        return (nodes[slot].value.unsafelyUnwrapped, nodes[slot].isDiscardable)
    }

    @inlinable
    mutating func insert(
        _ value: Value,
        forKey key: Key,
        cost: Int,
        isDiscardable: Bool,
        evictions: inout [Eviction]
    ) {
        statistics._insertions += 1
        let existing = index[key]

        if totalCostLimit > 0, cost > totalCostLimit {
            // Storing it would break the limit whatever we evicted. Dropping the old value
            // too keeps a later lookup from returning data the caller meant to replace.
            if let slot = existing {
                record(removeNode(slot), reason: .replaced, into: &evictions)
            }
            record((key, value, cost, isDiscardable), reason: .costLimit, into: &evictions)
            return
        }

        if let slot = existing {
            let queue = nodes[slot].queue
            unlink(slot)
            let old = nodes[slot]
            record((key, old.value.unsafelyUnwrapped, old.cost, old.isDiscardable), reason: .replaced, into: &evictions)
            nodes[slot].value = value
            nodes[slot].cost = cost
            nodes[slot].isDiscardable = isDiscardable
            if old.isDiscardable { discardableCount -= 1 }
            if isDiscardable { discardableCount += 1 }
            if nodes[slot].frequency < Self.maximumFrequency { nodes[slot].frequency += 1 }
            // Unlinked, the node cannot be chosen to make room for itself.
            makeRoom(count: 1, cost: cost, evictions: &evictions)
            pushFront(slot, to: queue)
            return
        }

        let queue: Queue
        switch policy {
        case .leastRecentlyUsed: queue = .main
        // Asked before making room, which may push this very key out of the ghost queue.
        case .s3FIFO: queue = ghost.remove(key) ? .main : .small
        }
        makeRoom(count: 1, cost: cost, evictions: &evictions)
        let slot = allocate(
            Node(key: key, value: value, cost: cost, isDiscardable: isDiscardable)
        )
        index[key] = slot
        if isDiscardable { discardableCount += 1 }
        pushFront(slot, to: queue)
    }

    @inlinable
    mutating func removeValue(forKey key: Key) -> Value? {
        guard let slot = index[key] else { return nil }
        statistics._removals += 1
        return removeNode(slot).value
    }

    /// Empties the cache and hands the old storage back so that the values are
    /// released by the caller, after it has dropped the lock.
    @inlinable
    mutating func removeAll() -> (ContiguousArray<Node>, [Key: Int]) {
        statistics._removals += count
        let old = (nodes, index)
        nodes = []
        index = [:]
        freeHead = -1
        small = List()
        main = List()
        ghost.removeAll()
        discardableCount = 0
        return old
    }

    @inlinable
    mutating func trim(toCount target: Int, evictions: inout [Eviction]) {
        while count > target, evictOne(by: .count, reason: .trimmed, evictions: &evictions) {}
    }

    @inlinable
    mutating func trim(toCost target: Int, evictions: inout [Eviction]) {
        while totalCost > target, evictOne(by: .cost, reason: .trimmed, evictions: &evictions) {}
    }

    // MARK: - Discardable content

    /// The stored values that conform to ``DiscardableContent``. O(slots).
    func discardableEntries() -> [(key: Key, content: any DiscardableContent)] {
        guard discardableCount > 0 else { return [] }
        var result: [(key: Key, content: any DiscardableContent)] = []
        result.reserveCapacity(discardableCount)
        for node in nodes where node.queue != .none && node.isDiscardable {
            if let content = node.value as? any DiscardableContent {
                result.append((node.key.unsafelyUnwrapped, content))
            }
        }
        return result
    }

    /// Removes `key` if it still holds `content`, with reason `.discardedContent`.
    @inlinable
    mutating func removeDiscarded(
        _ key: Key,
        content: ObjectIdentifier,
        evictions: inout [Eviction]
    ) {
        guard let slot = index[key], nodes[slot].isDiscardable,
            let stored = nodes[slot].value as? any DiscardableContent,
            ObjectIdentifier(stored) == content
        else { return }
        record(removeNode(slot), reason: .discardedContent, into: &evictions)
    }

    /// A lookup found a value whose `beginContentAccess()` failed: it counts as a miss.
    @inlinable
    mutating func contentAccessFailed(
        forKey key: Key,
        content: ObjectIdentifier,
        evictions: inout [Eviction]
    ) {
        statistics._hits -= 1
        statistics._misses += 1
        if evictsObjectsWithDiscardedContent {
            removeDiscarded(key, content: content, evictions: &evictions)
        }
    }

    // MARK: - Eviction

    @inlinable
    mutating func makeRoom(count extraCount: Int, cost extraCost: Int, evictions: inout [Eviction]) {
        if countLimit > 0 {
            while count + extraCount > countLimit, evictOne(by: .count, reason: .countLimit, evictions: &evictions) {}
        }
        if totalCostLimit > 0 {
            while totalCost + extraCost > totalCostLimit, evictOne(by: .cost, reason: .costLimit, evictions: &evictions) {}
        }
    }

    /// Evicts exactly one entry in policy order; `false` if the cache is empty.
    ///
    /// `dimension` says which limit is being enforced, so that S3-FIFO compares the
    /// small queue's share of the same quantity (entries or cost).
    @inlinable
    mutating func evictOne(by dimension: Dimension, reason: EvictionReason, evictions: inout [Eviction]) -> Bool {
        switch policy {
        case .leastRecentlyUsed:
            guard main.tail >= 0 else { return false }
            record(removeNode(main.tail), reason: reason, into: &evictions)
            return true

        case .s3FIFO:
            // Terminates: each turn evicts, moves a node from small to main (at most
            // small.count times), or lowers a frequency (at most 3 per node).
            while true {
                let fromSmall: Bool
                if small.count == 0 {
                    guard main.count > 0 else { return false }
                    fromSmall = false
                } else if main.count == 0 {
                    fromSmall = true
                } else {
                    switch dimension {
                    case .count: fromSmall = small.count * Self.smallQueueShareDenominator >= count
                    case .cost: fromSmall = small.cost * Self.smallQueueShareDenominator >= totalCost
                    }
                }
                if fromSmall {
                    let slot = small.tail
                    if nodes[slot].frequency > 0 {
                        Self.unlink(slot, from: &small, in: &nodes)
                        nodes[slot].frequency = 0
                        Self.pushFront(slot, to: &main, in: &nodes)
                        nodes[slot].queue = .main
                    } else {
                        // The ghost queue remembers as many keys as the cache holds values.
                        let capacity = count
                        let evicted = removeNode(slot)
                        ghost.insert(evicted.key, capacity: capacity)
                        record(evicted, reason: reason, into: &evictions)
                        return true
                    }
                } else {
                    let slot = main.tail
                    if nodes[slot].frequency > 0 {
                        nodes[slot].frequency -= 1
                        Self.unlink(slot, from: &main, in: &nodes)
                        Self.pushFront(slot, to: &main, in: &nodes)
                    } else {
                        record(removeNode(slot), reason: reason, into: &evictions)
                        return true
                    }
                }
            }
        }
    }

    @inlinable
    mutating func record(
        _ entry: (key: Key, value: Value, cost: Int, isDiscardable: Bool),
        reason: EvictionReason,
        into evictions: inout [Eviction]
    ) {
        statistics.recordEviction(reason)
        evictions.append(
            Eviction(key: entry.key, value: entry.value, cost: entry.cost, reason: reason, isDiscardable: entry.isDiscardable)
        )
    }

    // MARK: - Nodes and lists

    @inlinable
    mutating func touch(_ slot: Int) {
        switch policy {
        case .leastRecentlyUsed:
            if main.head != slot {
                Self.unlink(slot, from: &main, in: &nodes)
                Self.pushFront(slot, to: &main, in: &nodes)
            }
        case .s3FIFO:
            if nodes[slot].frequency < Self.maximumFrequency { nodes[slot].frequency += 1 }
        }
    }

    @inlinable
    mutating func allocate(_ node: Node) -> Int {
        if freeHead >= 0 {
            let slot = freeHead
            freeHead = nodes[slot].next
            nodes[slot] = node
            return slot
        }
        nodes.append(node)
        return nodes.count - 1
    }

    /// Unlinks the node, forgets its key and puts its slot on the free list.
    @inlinable
    mutating func removeNode(_ slot: Int) -> (key: Key, value: Value, cost: Int, isDiscardable: Bool) {
        unlink(slot)
        let key = nodes[slot].key.unsafelyUnwrapped
        let value = nodes[slot].value.unsafelyUnwrapped
        let cost = nodes[slot].cost
        let isDiscardable = nodes[slot].isDiscardable
        nodes[slot].key = nil
        nodes[slot].value = nil
        nodes[slot].next = freeHead
        freeHead = slot
        index.removeValue(forKey: key)
        if isDiscardable { discardableCount -= 1 }
        return (key, value, cost, isDiscardable)
    }

    @inlinable
    mutating func unlink(_ slot: Int) {
        switch nodes[slot].queue {
        case .none: return
        case .small: Self.unlink(slot, from: &small, in: &nodes)
        case .main: Self.unlink(slot, from: &main, in: &nodes)
        }
        nodes[slot].queue = .none
    }

    @inlinable
    mutating func pushFront(_ slot: Int, to queue: Queue) {
        switch queue {
        case .none: return
        case .small: Self.pushFront(slot, to: &small, in: &nodes)
        case .main: Self.pushFront(slot, to: &main, in: &nodes)
        }
        nodes[slot].queue = queue
    }

    @inlinable
    static func unlink(_ slot: Int, from list: inout List, in nodes: inout ContiguousArray<Node>) {
        let prev = nodes[slot].prev
        let next = nodes[slot].next
        if prev >= 0 { nodes[prev].next = next } else { list.head = next }
        if next >= 0 { nodes[next].prev = prev } else { list.tail = prev }
        nodes[slot].prev = -1
        nodes[slot].next = -1
        list.count -= 1
        list.cost -= nodes[slot].cost
    }

    @inlinable
    static func pushFront(_ slot: Int, to list: inout List, in nodes: inout ContiguousArray<Node>) {
        nodes[slot].prev = -1
        nodes[slot].next = list.head
        if list.head >= 0 { nodes[list.head].prev = slot } else { list.tail = slot }
        list.head = slot
        list.count += 1
        list.cost += nodes[slot].cost
    }

    // MARK: - Checking

    /// Walks every list and checks the bookkeeping; for tests. O(n).
    func checkInvariants() -> [String] {
        var problems: [String] = []
        var reachable = 0
        for (name, list, queue) in [("small", small, Queue.small), ("main", main, Queue.main)] {
            var slot = list.head
            var previous = -1
            var count = 0
            var cost = 0
            while slot >= 0 {
                let node = nodes[slot]
                if node.queue != queue { problems.append("\(name): node \(slot) is marked \(node.queue)") }
                if node.prev != previous { problems.append("\(name): node \(slot) has a wrong prev link") }
                if let key = node.key, index[key] != slot { problems.append("\(name): node \(slot) is not indexed") }
                count += 1
                cost += node.cost
                previous = slot
                slot = node.next
                if count > nodes.count { problems.append("\(name): cycle"); break }
            }
            if previous != list.tail { problems.append("\(name): wrong tail") }
            if count != list.count { problems.append("\(name): count \(list.count), walked \(count)") }
            if cost != list.cost { problems.append("\(name): cost \(list.cost), walked \(cost)") }
            reachable += count
        }
        if reachable != index.count { problems.append("index has \(index.count) keys, lists \(reachable) nodes") }
        if countLimit > 0, count > countLimit { problems.append("count \(count) > countLimit \(countLimit)") }
        if totalCostLimit > 0, totalCost > totalCostLimit { problems.append("totalCost \(totalCost) > limit \(totalCostLimit)") }
        let discardable = nodes.lazy.filter { $0.queue != .none && $0.isDiscardable }.count
        if discardable != discardableCount { problems.append("discardableCount \(discardableCount), found \(discardable)") }
        return problems
    }

    /// Keys in eviction order per queue (tail first); for tests.
    func keysInEvictionOrder() -> (small: [Key], main: [Key]) {
        func walk(_ list: List) -> [Key] {
            var keys: [Key] = []
            var slot = list.tail
            while slot >= 0 {
                keys.append(nodes[slot].key.unsafelyUnwrapped)
                slot = nodes[slot].prev
            }
            return keys
        }
        return (walk(small), walk(main))
    }
}

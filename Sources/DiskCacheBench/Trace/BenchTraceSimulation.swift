import DiskCache

/// Exact in-memory simulations of the known eviction policies on a ``BenchTrace``, beside which
/// the store's replay is reported. A capacity counts objects (each takes one place) or bytes
/// (each object its size). They follow libCacheSim's definitions: LRU; S3-FIFO with a small
/// queue of 10 % of the capacity, a ghost of 90 %, promotion at two reads and a main queue that
/// gives each object up to three more rounds (libCacheSim's `S3FIFO`, defaults); SIEVE; and
/// Belady's offline optimum (evict the object asked for again furthest in the future,
/// never-again first; by bytes that rule is a bound's estimate, not the optimum). Every miss
/// inserts the object, evicting first until it fits (an object larger than the capacity is not
/// inserted); with `minimumUses` over 1, once the cache is full only a miss that
/// `DiskCache.Admission.minimumUses(_:window:)` would admit (the same ``UseCounts``, over a
/// window of `capacity` objects, or by bytes the objects held and at least 4,096, as the store's
/// default; under S3-FIFO an object in the ghost is admitted at once, as in the store; the store
/// admits freely below its low watermark, the simulations below the capacity). Belady is
/// simulated without admission.
package enum BenchTraceSimulation {
    struct Outcome: Codable {
        var misses = 0
        var missedBytes: Int64 = 0
        var puts = 0
        var evictions = 0
    }

    enum Policy: String, CaseIterable, Codable {
        case lru = "LRU"
        case s3fifo = "S3-FIFO"
        case sieve = "SIEVE"
        case belady = "Belady"
    }

    /// A cache size: `limit` objects, or `limit` bytes when `inBytes`.
    package struct Capacity: Codable, Hashable {
        package var limit: Int64
        package var inBytes: Bool

        /// What the request at `position` takes of the capacity.
        func weight(_ trace: BenchTrace, _ position: Int) -> Int64 { inBytes ? Int64(trace.sizes[position]) : 1 }
    }

    static func run(_ policy: Policy, _ trace: BenchTrace, capacity: Capacity, minimumUses: Int = 1, nextUses: [Int32]) -> Outcome {
        let admission = Admission(minimumUses: minimumUses, window: capacity.inBytes ? nil : Int(capacity.limit))
        switch policy {
        case .lru: return lru(trace, capacity, admission)
        case .s3fifo: return s3fifo(trace, capacity, admission)
        case .sieve: return sieve(trace, capacity, admission)
        case .belady: return belady(trace, capacity, nextUses: nextUses)
        }
    }

    /// The store's admission filter, counting misses by object.
    struct Admission {
        let minimumUses: Int
        /// nil: the objects held, at least 4,096 (the store's default without a count limit).
        let window: Int?
        var uses = UseCounts<Int32>()

        init(minimumUses: Int, window: Int?) {
            self.minimumUses = minimumUses
            self.window = window
        }

        mutating func admits(_ object: Int32, held: Int) -> Bool {
            uses.admits(object, minimumUses: minimumUses, window: window ?? max(4096, held))
        }
    }

    /// A doubly linked list over object numbers (-1: none), newest at `head`.
    private struct List {
        var newer: [Int32]
        var older: [Int32]
        var head: Int32 = -1
        var tail: Int32 = -1
        var count = 0

        init(objects: Int) {
            newer = [Int32](repeating: -1, count: objects)
            older = [Int32](repeating: -1, count: objects)
        }

        mutating func pushNewest(_ object: Int32) {
            newer[Int(object)] = -1
            older[Int(object)] = head
            if head >= 0 { newer[Int(head)] = object }
            head = object
            if tail < 0 { tail = object }
            count += 1
        }

        mutating func unlink(_ object: Int32) {
            let n = newer[Int(object)], o = older[Int(object)]
            if n >= 0 { older[Int(n)] = o } else { head = o }
            if o >= 0 { newer[Int(o)] = n } else { tail = n }
            count -= 1
        }
    }

    /// A FIFO of object numbers.
    private struct Queue {
        var items: [Int32] = []
        var first = 0
        var count: Int { items.count - first }
        mutating func push(_ object: Int32) { items.append(object) }
        mutating func pop() -> Int32? {
            guard first < items.count else { return nil }
            let object = items[first]
            first += 1
            if first > 4096 && first * 2 > items.count {
                items.removeFirst(first)
                first = 0
            }
            return object
        }
    }

    private static func miss(_ outcome: inout Outcome, _ trace: BenchTrace, _ position: Int) {
        outcome.misses += 1
        outcome.missedBytes += Int64(trace.sizes[position])
    }

    static func lru(_ trace: BenchTrace, _ capacity: Capacity, _ admission: Admission) -> Outcome {
        var outcome = Outcome()
        var admission = admission
        var list = List(objects: trace.objectCount)
        var weightOf = [Int64](repeating: 0, count: trace.objectCount)
        var present = [Bool](repeating: false, count: trace.objectCount)
        var used: Int64 = 0
        for (position, object) in trace.objects.enumerated() {
            if present[Int(object)] {
                list.unlink(object)
                list.pushNewest(object)
                continue
            }
            miss(&outcome, trace, position)
            let weight = capacity.weight(trace, position)
            guard weight <= capacity.limit, used + weight <= capacity.limit || admission.admits(object, held: list.count) else { continue }
            outcome.puts += 1
            while used + weight > capacity.limit, list.tail >= 0 {
                let victim = list.tail
                list.unlink(victim)
                present[Int(victim)] = false
                used -= weightOf[Int(victim)]
                outcome.evictions += 1
            }
            list.pushNewest(object)
            present[Int(object)] = true
            weightOf[Int(object)] = weight
            used += weight
        }
        return outcome
    }

    static func s3fifo(_ trace: BenchTrace, _ capacity: Capacity, _ admission: Admission) -> Outcome {
        var outcome = Outcome()
        var admission = admission
        let smallCapacity = Int64(Double(capacity.limit) * 0.1)
        let mainCapacity = capacity.limit - smallCapacity
        let ghostCapacity = Int64(Double(capacity.limit) * 0.9)
        // 0: absent, 1: small, 2: main.
        var queueOf = [UInt8](repeating: 0, count: trace.objectCount)
        var frequency = [UInt8](repeating: 0, count: trace.objectCount)
        var weightOf = [Int64](repeating: 0, count: trace.objectCount)
        var small = Queue(), main = Queue()
        var smallUsed: Int64 = 0, mainUsed: Int64 = 0
        var ghostStamp = [Int32](repeating: -1, count: trace.objectCount)
        var ghost: [(object: Int32, stamp: Int32)] = []
        var ghostFirst = 0, ghostUsed: Int64 = 0, stamp: Int32 = 0

        func evictMain() {
            while let object = main.pop() {
                let index = Int(object)
                if frequency[index] >= 1 {
                    frequency[index] = min(frequency[index], 3) - 1
                    main.push(object)
                } else {
                    queueOf[index] = 0
                    mainUsed -= weightOf[index]
                    outcome.evictions += 1
                    return
                }
            }
        }
        func evictSmall() {
            while let object = small.pop() {
                let index = Int(object)
                smallUsed -= weightOf[index]
                if frequency[index] >= 2 {
                    queueOf[index] = 2
                    main.push(object)
                    mainUsed += weightOf[index]
                } else {
                    queueOf[index] = 0
                    outcome.evictions += 1
                    guard ghostCapacity > 0 else { return }
                    stamp += 1
                    ghostStamp[index] = stamp
                    ghost.append((object, stamp))
                    ghostUsed += weightOf[index]
                    while ghostUsed > ghostCapacity, ghostFirst < ghost.count {
                        let oldest = ghost[ghostFirst]
                        ghostFirst += 1
                        if ghostStamp[Int(oldest.object)] == oldest.stamp {
                            ghostStamp[Int(oldest.object)] = -1
                            ghostUsed -= weightOf[Int(oldest.object)]
                        }
                    }
                    if ghostFirst > 4096 && ghostFirst * 2 > ghost.count {
                        ghost.removeFirst(ghostFirst)
                        ghostFirst = 0
                    }
                    return
                }
            }
        }
        for (position, object) in trace.objects.enumerated() {
            let index = Int(object)
            if queueOf[index] != 0 {
                frequency[index] = min(frequency[index] + 1, 3)
                continue
            }
            miss(&outcome, trace, position)
            let weight = capacity.weight(trace, position)
            let cameBack = ghostStamp[index] >= 0
            guard weight <= capacity.limit,
                  cameBack || smallUsed + mainUsed + weight <= capacity.limit || admission.admits(object, held: small.count + main.count)
            else { continue }
            outcome.puts += 1
            if cameBack {
                ghostStamp[index] = -1
                ghostUsed -= weightOf[index]
            }
            while smallUsed + mainUsed + weight > capacity.limit, small.count + main.count > 0 {
                if mainUsed > mainCapacity || small.count == 0 { evictMain() } else { evictSmall() }
            }
            frequency[index] = 0
            weightOf[index] = weight
            if cameBack {
                queueOf[index] = 2
                main.push(object)
                mainUsed += weight
            } else {
                queueOf[index] = 1
                small.push(object)
                smallUsed += weight
            }
        }
        return outcome
    }

    static func sieve(_ trace: BenchTrace, _ capacity: Capacity, _ admission: Admission) -> Outcome {
        var outcome = Outcome()
        var admission = admission
        var list = List(objects: trace.objectCount)
        var present = [Bool](repeating: false, count: trace.objectCount)
        var visited = [Bool](repeating: false, count: trace.objectCount)
        var weightOf = [Int64](repeating: 0, count: trace.objectCount)
        var used: Int64 = 0
        var hand: Int32 = -1
        for (position, object) in trace.objects.enumerated() {
            let index = Int(object)
            if present[index] {
                visited[index] = true
                continue
            }
            miss(&outcome, trace, position)
            let weight = capacity.weight(trace, position)
            guard weight <= capacity.limit, used + weight <= capacity.limit || admission.admits(object, held: list.count) else { continue }
            outcome.puts += 1
            while used + weight > capacity.limit, list.tail >= 0 {
                var candidate = hand >= 0 ? hand : list.tail
                while visited[Int(candidate)] {
                    visited[Int(candidate)] = false
                    candidate = list.newer[Int(candidate)] >= 0 ? list.newer[Int(candidate)] : list.tail
                }
                hand = list.newer[Int(candidate)]
                list.unlink(candidate)
                present[Int(candidate)] = false
                used -= weightOf[Int(candidate)]
                outcome.evictions += 1
            }
            list.pushNewest(object)
            present[index] = true
            visited[index] = false
            weightOf[index] = weight
            used += weight
        }
        return outcome
    }

    static func belady(_ trace: BenchTrace, _ capacity: Capacity, nextUses: [Int32]) -> Outcome {
        var outcome = Outcome()
        // Per object in the cache: the position of its next request (-1: absent).
        var next = [Int32](repeating: -1, count: trace.objectCount)
        var weightOf = [Int64](repeating: 0, count: trace.objectCount)
        var heap = MaxHeap()
        var used: Int64 = 0
        for (position, object) in trace.objects.enumerated() {
            let index = Int(object)
            let upcoming = nextUses[position]
            if next[index] >= 0 {
                next[index] = upcoming
                heap.push(upcoming, object)
                continue
            }
            miss(&outcome, trace, position)
            let weight = capacity.weight(trace, position)
            guard weight <= capacity.limit else { continue }
            outcome.puts += 1
            next[index] = upcoming
            weightOf[index] = weight
            heap.push(upcoming, object)
            used += weight
            while used > capacity.limit, let (key, victim) = heap.pop() {
                // Stale heap items (the object was read since, or left) are skipped.
                guard next[Int(victim)] == key else { continue }
                next[Int(victim)] = -1
                used -= weightOf[Int(victim)]
                if victim != object { outcome.evictions += 1 }
            }
        }
        return outcome
    }

    /// A binary max-heap of (next use, object).
    private struct MaxHeap {
        var items: [(Int32, Int32)] = []

        mutating func push(_ key: Int32, _ object: Int32) {
            items.append((key, object))
            var child = items.count - 1
            while child > 0 {
                let parent = (child - 1) / 2
                guard items[parent].0 < items[child].0 else { break }
                items.swapAt(parent, child)
                child = parent
            }
        }

        mutating func pop() -> (Int32, Int32)? {
            guard let top = items.first else { return nil }
            let last = items.removeLast()
            if !items.isEmpty {
                items[0] = last
                var parent = 0
                while true {
                    let left = 2 * parent + 1, right = left + 1
                    var largest = parent
                    if left < items.count, items[left].0 > items[largest].0 { largest = left }
                    if right < items.count, items[right].0 > items[largest].0 { largest = right }
                    if largest == parent { break }
                    items.swapAt(parent, largest)
                    parent = largest
                }
            }
            return top
        }
    }
}

import DiskCache

/// Exact in-memory simulations of the known eviction policies on a ``BenchTrace``, counting
/// objects (each object takes one place of `capacity`), beside which the store's replay is
/// reported. They follow libCacheSim's definitions: LRU; S3-FIFO with a small queue of 10 % of
/// the capacity, a ghost of 90 %, promotion at two reads and a main queue that gives each
/// object up to three more rounds (libCacheSim's `S3FIFO`, defaults); SIEVE; and Belady's
/// offline optimum (evict the object asked for again furthest in the future, never-again first).
/// Every miss inserts the object, evicting first when the cache is full; with `minimumUses`
/// over 1, only a miss that `DiskCache.Admission.minimumUses(_:window:)` would admit (the
/// same ``UseCounts`` over a window of `capacity` objects; under S3-FIFO an object in the ghost
/// is admitted at once, as in the store). Belady, the offline optimum, is simulated without.
enum BenchTraceSimulation {
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

    static func run(_ policy: Policy, _ trace: BenchTrace, capacity: Int, minimumUses: Int = 1, nextUses: [Int32]) -> Outcome {
        let admission = Admission(minimumUses: minimumUses, window: capacity)
        switch policy {
        case .lru: return lru(trace, capacity: capacity, admission: admission)
        case .s3fifo: return s3fifo(trace, capacity: capacity, admission: admission)
        case .sieve: return sieve(trace, capacity: capacity, admission: admission)
        case .belady: return belady(trace, capacity: capacity, nextUses: nextUses)
        }
    }

    /// The store's admission filter, counting misses by object.
    struct Admission {
        let minimumUses: Int
        let window: Int
        var uses = UseCounts<Int32>()

        init(minimumUses: Int, window: Int) {
            self.minimumUses = minimumUses
            self.window = window
        }

        mutating func admits(_ object: Int32) -> Bool {
            uses.admits(object, minimumUses: minimumUses, window: window)
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

    static func lru(_ trace: BenchTrace, capacity: Int, admission: Admission) -> Outcome {
        var outcome = Outcome()
        var admission = admission
        var list = List(objects: trace.objectCount)
        var present = [Bool](repeating: false, count: trace.objectCount)
        for (position, object) in trace.objects.enumerated() {
            if present[Int(object)] {
                list.unlink(object)
                list.pushNewest(object)
                continue
            }
            miss(&outcome, trace, position)
            guard admission.admits(object) else { continue }
            outcome.puts += 1
            if list.count >= capacity, list.tail >= 0 {
                let victim = list.tail
                list.unlink(victim)
                present[Int(victim)] = false
                outcome.evictions += 1
            }
            list.pushNewest(object)
            present[Int(object)] = true
        }
        return outcome
    }

    static func s3fifo(_ trace: BenchTrace, capacity: Int, admission: Admission) -> Outcome {
        var outcome = Outcome()
        var admission = admission
        let smallCapacity = Int(Double(capacity) * 0.1)
        let mainCapacity = capacity - smallCapacity
        let ghostCapacity = Int(Double(capacity) * 0.9)
        // 0: absent, 1: small, 2: main.
        var queueOf = [UInt8](repeating: 0, count: trace.objectCount)
        var frequency = [UInt8](repeating: 0, count: trace.objectCount)
        var small = Queue(), main = Queue()
        var ghostStamp = [Int32](repeating: -1, count: trace.objectCount)
        var ghost: [(object: Int32, stamp: Int32)] = []
        var ghostFirst = 0, ghostCount = 0, stamp: Int32 = 0

        func evictMain() {
            while let object = main.pop() {
                let index = Int(object)
                if frequency[index] >= 1 {
                    frequency[index] = min(frequency[index], 3) - 1
                    main.push(object)
                } else {
                    queueOf[index] = 0
                    outcome.evictions += 1
                    return
                }
            }
        }
        func evictSmall() {
            while let object = small.pop() {
                let index = Int(object)
                if frequency[index] >= 2 {
                    queueOf[index] = 2
                    main.push(object)
                } else {
                    queueOf[index] = 0
                    outcome.evictions += 1
                    guard ghostCapacity > 0 else { return }
                    stamp += 1
                    ghostStamp[index] = stamp
                    ghost.append((object, stamp))
                    ghostCount += 1
                    while ghostCount > ghostCapacity, ghostFirst < ghost.count {
                        let oldest = ghost[ghostFirst]
                        ghostFirst += 1
                        if ghostStamp[Int(oldest.object)] == oldest.stamp {
                            ghostStamp[Int(oldest.object)] = -1
                            ghostCount -= 1
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
            let cameBack = ghostStamp[index] >= 0
            guard cameBack || admission.admits(object) else { continue }
            outcome.puts += 1
            if cameBack {
                ghostStamp[index] = -1
                ghostCount -= 1
            }
            while small.count + main.count >= capacity, small.count + main.count > 0 {
                if main.count > mainCapacity || small.count == 0 { evictMain() } else { evictSmall() }
            }
            frequency[index] = 0
            if cameBack {
                queueOf[index] = 2
                main.push(object)
            } else {
                queueOf[index] = 1
                small.push(object)
            }
        }
        return outcome
    }

    static func sieve(_ trace: BenchTrace, capacity: Int, admission: Admission) -> Outcome {
        var outcome = Outcome()
        var admission = admission
        var list = List(objects: trace.objectCount)
        var present = [Bool](repeating: false, count: trace.objectCount)
        var visited = [Bool](repeating: false, count: trace.objectCount)
        var hand: Int32 = -1
        for (position, object) in trace.objects.enumerated() {
            let index = Int(object)
            if present[index] {
                visited[index] = true
                continue
            }
            miss(&outcome, trace, position)
            guard admission.admits(object) else { continue }
            outcome.puts += 1
            if list.count >= capacity, list.tail >= 0 {
                var candidate = hand >= 0 ? hand : list.tail
                while visited[Int(candidate)] {
                    visited[Int(candidate)] = false
                    candidate = list.newer[Int(candidate)] >= 0 ? list.newer[Int(candidate)] : list.tail
                }
                hand = list.newer[Int(candidate)]
                list.unlink(candidate)
                present[Int(candidate)] = false
                outcome.evictions += 1
            }
            list.pushNewest(object)
            present[index] = true
            visited[index] = false
        }
        return outcome
    }

    static func belady(_ trace: BenchTrace, capacity: Int, nextUses: [Int32]) -> Outcome {
        var outcome = Outcome()
        // Per object in the cache: the position of its next request (-1: absent).
        var next = [Int32](repeating: -1, count: trace.objectCount)
        var heap = MaxHeap()
        var cached = 0
        for (position, object) in trace.objects.enumerated() {
            let index = Int(object)
            let upcoming = nextUses[position]
            if next[index] >= 0 {
                next[index] = upcoming
                heap.push(upcoming, object)
                continue
            }
            miss(&outcome, trace, position)
            outcome.puts += 1
            next[index] = upcoming
            heap.push(upcoming, object)
            cached += 1
            while cached > capacity, let (key, victim) = heap.pop() {
                // Stale heap items (the object was read since, or left) are skipped.
                guard next[Int(victim)] == key else { continue }
                next[Int(victim)] = -1
                cached -= 1
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

import DiskCacheLocking
import Foundation
import Testing
@testable import MemoryCache

/// Collects what a cache reports to `onEviction`, from any thread.
final class EvictionRecorder<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    struct Record {
        var key: Key
        var value: Value
        var cost: Int
        var reason: EvictionReason
    }

    private let records = PthreadMutex<[Record]>([])

    var handler: MemoryCache<Key, Value>.EvictionHandler {
        { [self] eviction in
            records.withLock {
                $0.append(Record(key: eviction.key, value: eviction.value, cost: eviction.cost, reason: eviction.reason))
            }
        }
    }

    var all: [Record] { records.withLock { $0 } }

    var keys: [Key] { all.map(\.key) }

    var reasons: [EvictionReason] { all.map(\.reason) }

    func count(_ reason: EvictionReason) -> Int { all.filter { $0.reason == reason }.count }

    func removeAll() { records.withLock { $0.removeAll() } }
}

extension MemoryCache {
    /// Creates a cache whose evictions go to a new recorder.
    static func recording(
        countLimit: Int = 0,
        totalCostLimit: Int = 0,
        policy: EvictionPolicy = .leastRecentlyUsed,
        evictsObjectsWithDiscardedContent: Bool = true
    ) -> (MemoryCache, EvictionRecorder<Key, Value>) {
        let recorder = EvictionRecorder<Key, Value>()
        let cache = MemoryCache(
            countLimit: countLimit,
            totalCostLimit: totalCostLimit,
            policy: policy,
            evictsObjectsWithDiscardedContent: evictsObjectsWithDiscardedContent,
            onEviction: recorder.handler
        )
        return (cache, recorder)
    }

    /// The stored keys among `candidates`, found by lookup (which counts as a use).
    func storedKeys(among candidates: some Sequence<Key>) -> [Key] {
        candidates.filter { value(for: $0) != nil }
    }
}

/// A `DiscardableContent` with observable counters, like `NSPurgeableData` except that
/// it starts with no access in progress.
final class Purgeable: DiscardableContent, CustomStringConvertible {
    struct Counters {
        var accessCount = 0
        var isDiscarded = false
        var beginCalls = 0
        var endCalls = 0
        var discardCalls = 0
    }

    let id: Int
    private let state = PthreadMutex(Counters())

    init(_ id: Int) { self.id = id }

    var counters: Counters { state.withLock { $0 } }

    func beginContentAccess() -> Bool {
        state.withLock {
            $0.beginCalls += 1
            guard !$0.isDiscarded else { return false }
            $0.accessCount += 1
            return true
        }
    }

    func endContentAccess() {
        state.withLock {
            $0.endCalls += 1
            $0.accessCount -= 1
        }
    }

    func discardContentIfPossible() {
        state.withLock {
            $0.discardCalls += 1
            if $0.accessCount == 0 { $0.isDiscarded = true }
        }
    }

    var isContentDiscarded: Bool { state.withLock { $0.isDiscarded } }

    /// Discards the content as the system would, whatever the access count.
    func purge() { state.withLock { $0.isDiscarded = true } }

    var description: String { "Purgeable(\(id))" }
}

/// A deterministic generator so that failures reproduce.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Runs `body` on a thread of its own and gives what it returns, or records an issue and gives
/// nil when it has not returned within `limit`, counted from when it starts: a guard against a
/// deadlock that a loaded machine does not trip. The `.timeLimit` trait does: it counts from
/// when the runner starts the test, and on two cores a test can wait minutes behind others for a
/// thread of the runner's pool. A body that hangs is left to hang on its thread.
func finishing<T: Sendable>(within limit: Duration = .seconds(600), _ body: @escaping @Sendable () -> T,
                            sourceLocation: SourceLocation = #_sourceLocation) -> T? {
    let result = PthreadMutex<T?>(nil)
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        let value = body()
        result.withLock { $0 = value }
        done.signal()
    }
    thread.stackSize = 8 << 20
    thread.start()
    let seconds = Double(limit.components.seconds)
    guard done.wait(timeout: .now() + seconds) == .success else {
        Issue.record("did not return within \(limit) of starting: a deadlock?", sourceLocation: sourceLocation)
        return nil
    }
    return result.withLock { $0 }
}

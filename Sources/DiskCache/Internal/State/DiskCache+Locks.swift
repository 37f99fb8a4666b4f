import Foundation
import Logging
import DiskCacheLocking
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// The locks a call takes: a key's stripe (and its byte in the shared page), all stripes, the
// state lock's small questions; and the clock.

extension DiskCache {
    static func systemMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    /// Runs `body` holding the stripe of `hash`: its mutex, and in shared mode its byte in
    /// ``SharedRegion`` too, so that no writer of the key in any instance is part way.
    /// In shared mode it throws what ``SharedRegion/withStripes(from:count:_:)`` throws (a lock
    /// not had in time, a page that cannot be trusted) without running `body`.
    func withStripe<T: ~Copyable>(_ hash: KeyHash, _ body: () throws(DiskCacheError) -> T) throws(DiskCacheError) -> T {
        let index = SharedRegion.stripe(of: hash)  // `stripes` has one lock per stripe of the page
        return try stripes[index].mutex.withLock { _ throws(DiskCacheError) -> T in
            guard let sharedRegion else { return try body() }
            return try sharedRegion.withStripes(from: index, body)
        }
    }

    /// Runs `body` holding every stripe, so no write is between rename and journal append.
    /// `acrossInstances: false` takes only this instance's (closing does not wait for others).
    func withAllStripes<T: Sendable>(acrossInstances: Bool = true, _ body: () throws(DiskCacheError) -> T) throws(DiskCacheError) -> T {
        func lock(_ i: Int) throws(DiskCacheError) -> T {
            if i == stripes.count {
                guard acrossInstances, let sharedRegion else { return try body() }
                return try sharedRegion.withStripes(from: 0, count: stripes.count, body)
            }
            return try stripes[i].mutex.withLock { _ throws(DiskCacheError) in try lock(i + 1) }
        }
        return try lock(0)
    }

    /// Starts collecting the keys other instances store or remove (shared mode only; see
    /// ``takeExternalChanges()``).
    func trackExternalChanges() {
        state.withLock { state in
            if state.shared != nil, state.externalChanges == nil { state.externalChanges = ExternalChanges() }
        }
    }

    /// The keys other instances stored or removed since the last call (after following the
    /// journal), or nil when there are none or nothing is collected.
    func takeExternalChanges() -> ExternalChanges? {
        state.withLock { state in
            guard let changes = state.externalChanges, !changes.isEmpty else { return nil }
            state.externalChanges = ExternalChanges()
            return changes
        }
    }

    func throwIfClosed() throws(DiskCacheError) {
        if state.withLock({ $0.isClosed }) { throw DiskCacheError.closed() }
    }
}

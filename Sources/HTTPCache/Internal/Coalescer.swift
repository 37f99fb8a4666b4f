import DiskCacheLocking

/// One piece of work per key at a time: a caller that comes for a key while its work is under
/// way waits for that work instead of starting the same again.
///
/// Two ways to use it:
///
/// - ``run(key:operation:)``: the operation runs in a task of its own, and its result goes to
///   every caller that asked for the key while it ran (``CachingHTTPClient``'s shared fetches).
///   It is cancelled when its last caller has gone.
/// - ``enter(_:)`` and ``finish(_:with:)``: the first caller leads, doing the work on its own
///   task, and ends it with ``finish(_:with:)``; those that come meanwhile wait for that (the
///   server's one origin fetch per resource, as nginx's `proxy_cache_lock`). The leader's work is
///   its own: waiters that go do not end it.
///
/// Either way a waiting caller whose task is cancelled stops waiting at once, with
/// `CancellationError`; the work and the other waiters go on.
package final class Coalescer<Value: Sendable>: Sendable {
    /// What ``enter(_:)`` made of its caller.
    package enum Entry: Sendable {
        /// The caller leads the work for the key, and must end it with ``finish(_:with:)``.
        case leads
        /// The caller waited for the leader, who finished with this.
        case waited(Value)
    }

    /// The work under way for one key.
    private struct Flight {
        var id: UInt64
        /// The task running a shared operation (``run(key:operation:)``); nil for work a caller leads.
        var task: Task<Void, Never>?
        /// Led by a caller (``enter(_:)``): the flight lasts until ``finish(_:with:)``, whoever
        /// waits. Otherwise it ends, its task cancelled, when its last waiter has gone.
        var isLed: Bool
        var waiters: [UInt64: CheckedContinuation<Entry, any Error>] = [:]
    }

    private struct State {
        var flights: [String: Flight] = [:]
        var nextID: UInt64 = 0
        /// Callers that have their ID and are not yet in a flight: true for those whose
        /// cancellation handler ran meanwhile (they stop as they would join).
        var joining: [UInt64: Bool] = [:]
    }

    private let state = PthreadMutex(State())

    package init() {}

    /// How many callers wait for the work for `key` (0 when none is under way; a leader is not
    /// counted, every caller of a shared operation is).
    package func waiterCount(for key: String) -> Int {
        state.withLock { $0.flights[key]?.waiters.count ?? 0 }
    }

    /// The result of `operation`, run now or joined if one for `key` is already running.
    package func run(key: String, operation: @escaping @Sendable () async throws -> Value) async throws -> Value {
        let entry = try await join(key) { state, waiterID, cancelled, continuation in
            // A caller cancelled already starts nothing.
            if cancelled {
                continuation.resume(throwing: CancellationError())
                return
            }
            state.nextID += 1
            let flightID = state.nextID
            // The task takes the lock before it looks for its flight: it finds it in place.
            let task = Task {
                let result: Result<Value, any Error>
                do {
                    result = .success(try await operation())
                } catch {
                    result = .failure(error)
                }
                self.end(key, with: result) { $0.id == flightID }
            }
            state.flights[key] = Flight(id: flightID, task: task, isLed: false, waiters: [waiterID: continuation])
        }
        guard case .waited(let value) = entry else { preconditionFailure("A shared operation has no leader") }
        return value
    }

    /// Makes the caller the leader of the work for `key` when none is under way (``Entry/leads``:
    /// it must end the work with ``finish(_:with:)`` whatever happens, even when its task is
    /// cancelled); else waits for the leader to finish (``Entry/waited(_:)``).
    package func enter(_ key: String) async throws -> Entry {
        try await join(key) { state, _, _, continuation in
            state.nextID += 1
            state.flights[key] = Flight(id: state.nextID, isLed: true)
            continuation.resume(returning: .leads)
        }
    }

    /// Ends the work the caller leads for `key` (``enter(_:)`` returned ``Entry/leads``), and
    /// hands `result` to those waiting for it.
    package func finish(_ key: String, with result: Result<Value, any Error>) {
        end(key, with: result) { $0.isLed }
    }

    /// Ends the flight for `key` when `isIt`, and hands `result` to its waiters.
    private func end(_ key: String, with result: Result<Value, any Error>, if isIt: (Flight) -> Bool) {
        let waiters = state.withLock { state -> [CheckedContinuation<Entry, any Error>] in
            guard let flight = state.flights[key], isIt(flight) else { return [] }
            state.flights[key] = nil
            return Array(flight.waiters.values)
        }
        for waiter in waiters { waiter.resume(with: result.map { .waited($0) }) }
    }

    /// Waits for the work under way for `key`, as one of its waiters. When none is, `start`
    /// is called under the lock with the caller's ID, whether it was cancelled already, and its
    /// continuation, which it must resume or make a waiter's. A cancelled waiter is resumed at
    /// once with `CancellationError`; a shared operation left without waiters is cancelled.
    private func join(
        _ key: String,
        start: (inout State, UInt64, Bool, CheckedContinuation<Entry, any Error>) -> Void
    ) async throws -> Entry {
        let waiterID = state.withLock { state in
            state.nextID += 1
            state.joining[state.nextID] = false
            return state.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Entry, any Error>) in
                state.withLock { state in
                    let cancelled = state.joining.removeValue(forKey: waiterID) ?? false
                    if state.flights[key] == nil {
                        start(&state, waiterID, cancelled, continuation)
                    } else if cancelled {
                        continuation.resume(throwing: CancellationError())
                    } else {
                        state.flights[key]!.waiters[waiterID] = continuation
                    }
                }
            }
        } onCancel: {
            let (waiter, abandoned) = state.withLock { state -> (CheckedContinuation<Entry, any Error>?, Task<Void, Never>?) in
                if state.joining[waiterID] != nil {
                    state.joining[waiterID] = true
                    return (nil, nil)
                }
                // Not waiting (any more): resumed already, or it leads.
                guard var flight = state.flights[key], let waiter = flight.waiters.removeValue(forKey: waiterID) else {
                    return (nil, nil)
                }
                if flight.waiters.isEmpty, !flight.isLed {
                    state.flights[key] = nil
                    return (waiter, flight.task)
                }
                state.flights[key] = flight
                return (waiter, nil)
            }
            waiter?.resume(throwing: CancellationError())
            abandoned?.cancel()
        }
    }
}

extension Coalescer where Value == Void {
    /// Ends the work the caller leads for `key`, waking those waiting for it.
    package func finish(_ key: String) {
        finish(key, with: .success(()))
    }
}

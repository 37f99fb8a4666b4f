import DiskCacheLocking

/// Runs one operation per key at a time and hands its result to every caller that asked for the
/// same key while it ran.
///
/// The operation runs in its own task, so one caller's cancellation does not fail the others: a
/// cancelled caller stops waiting at once (with `CancellationError`), and the operation itself is
/// cancelled when its last waiter has gone.
final class _Coalescer<Value: Sendable>: Sendable {
    private struct Flight {
        var id: UInt64
        var task: Task<Void, Never>?
        var waiters: [UInt64: CheckedContinuation<Value, any Error>] = [:]
    }

    private struct State {
        var flights: [String: Flight] = [:]
        var nextID: UInt64 = 0
        /// Callers whose cancellation handler ran before they registered.
        var cancelledEarly: Set<UInt64> = []
    }

    private let state = PthreadMutex(State())

    /// How many callers wait for the operation for `key` (0 when none runs).
    func waiterCount(for key: String) -> Int {
        state.withLock { $0.flights[key]?.waiters.count ?? 0 }
    }

    /// The result of `operation`, run now or joined if one for `key` is already running.
    func run(key: String, operation: @escaping @Sendable () async throws -> Value) async throws -> Value {
        let waiterID = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                let startedFlight: UInt64? = state.withLock { state in
                    if state.cancelledEarly.remove(waiterID) != nil {
                        continuation.resume(throwing: CancellationError())
                        return nil
                    }
                    if state.flights[key] != nil {
                        state.flights[key]!.waiters[waiterID] = continuation
                        return nil
                    }
                    state.nextID += 1
                    state.flights[key] = Flight(id: state.nextID, waiters: [waiterID: continuation])
                    return state.nextID
                }
                guard let flightID = startedFlight else { return }
                state.withLock { state in
                    let task = Task {
                        let result: Result<Value, any Error>
                        do {
                            result = .success(try await operation())
                        } catch {
                            result = .failure(error)
                        }
                        let waiters = self.state.withLock { state -> [CheckedContinuation<Value, any Error>] in
                            guard state.flights[key]?.id == flightID else { return [] }
                            return Array(state.flights.removeValue(forKey: key)!.waiters.values)
                        }
                        for waiter in waiters { waiter.resume(with: result) }
                    }
                    // The task cannot finish before this lock is released, so the flight is here
                    // unless every waiter has already gone.
                    if state.flights[key]?.id == flightID {
                        state.flights[key]!.task = task
                    } else {
                        task.cancel()
                    }
                }
            }
        } onCancel: {
            let (waiter, abandoned) = state.withLock { state -> (CheckedContinuation<Value, any Error>?, Task<Void, Never>?) in
                guard var flight = state.flights[key], let waiter = flight.waiters.removeValue(forKey: waiterID) else {
                    state.cancelledEarly.insert(waiterID)
                    return (nil, nil)
                }
                if flight.waiters.isEmpty {
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

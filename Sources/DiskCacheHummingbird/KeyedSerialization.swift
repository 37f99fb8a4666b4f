#if Hummingbird
/// Runs the operations given for one key one at a time, in the order they arrive; operations on
/// different keys run concurrently. Holds an entry only for keys with an operation running or
/// waiting.
///
/// A waiting operation is not cancelled with its task: it waits for its turn, and the
/// operation itself then sees the cancellation (the cache's async calls throw
/// `CancellationError` before they do any I/O).
actor KeyedSerialization {
    /// For each key with an operation running: the operations waiting after it.
    private var waiting: [String: [CheckedContinuation<Void, Never>]] = [:]

    /// Runs `operation` once every operation given earlier for `key` has finished.
    nonisolated func run<T: Sendable>(_ key: String, _ operation: @Sendable () async throws -> T) async throws -> T {
        await acquire(key)
        do {
            let result = try await operation()
            await release(key)
            return result
        } catch {
            await release(key)
            throw error
        }
    }

    private func acquire(_ key: String) async {
        guard waiting[key] != nil else {
            waiting[key] = []
            return
        }
        await withCheckedContinuation { waiting[key, default: []].append($0) }
    }

    private func release(_ key: String) {
        guard var queue = waiting[key], !queue.isEmpty else {
            waiting[key] = nil
            return
        }
        let next = queue.removeFirst()
        waiting[key] = queue
        next.resume()
    }
}
#endif

#if canImport(Glibc)
public import Glibc
#elseif canImport(Musl)
public import Musl
#elseif canImport(Darwin)
public import Darwin
#endif

/// A value guarded by a `pthread_mutex_t`, with the part of `Synchronization.Mutex`'s API that
/// this package uses: `init(_:)` and `withLock(_:)`.
///
/// It exists so that Thread Sanitizer can check this package. With the Swift 6.3 toolchain on
/// Linux, TSan does not see the ordering a `Synchronization.Mutex` provides: a program that
/// only increments a `Mutex`-guarded dictionary from four threads is reported as racing, so
/// every section under a `Mutex` is noise that would hide a real race. TSan intercepts
/// `pthread_mutex_lock` and `pthread_mutex_unlock`, so it sees this lock, and it reports only
/// accesses that no lock orders. Use it, not `Mutex`, in this package's modules and tests.
///
/// The mutex and the value live in one heap allocation that never moves (a `pthread_mutex_t`
/// must not be moved once initialised); copies of a `PthreadMutex` share them, like
/// references to one object. Not recursive: calling `withLock` again on the same lock from
/// inside `body` deadlocks, as with `Mutex`.
@usableFromInline
package struct PthreadMutex<State> {
    /// The mutex in the header, the value in the one element. Not the other way round: a value
    /// of zero size (`PthreadMutex(())`) in the header would sit at the object's own address,
    /// and TSan would take `body`'s access to it for a write racing with other threads' reads of
    /// the object header.
    @usableFromInline
    final class Storage: ManagedBuffer<pthread_mutex_t, State> {
        deinit {
            withUnsafeMutablePointers { mutex, state in
                _ = state.deinitialize(count: 1)
                pthread_mutex_destroy(mutex)
            }
        }
    }

    @usableFromInline
    let storage: Storage

    /// Creates a lock that guards `initialValue`.
    @inlinable
    package init(_ initialValue: State) {
        let buffer = Storage.create(minimumCapacity: 1) { _ in pthread_mutex_t() }
        // `create` cannot return the subclass's type; the buffer is a `Storage` by construction.
        storage = unsafeDowncast(buffer, to: Storage.self)
        storage.withUnsafeMutablePointers { mutex, state in
            let error = pthread_mutex_init(mutex, nil)
            precondition(error == 0, "pthread_mutex_init failed: \(error)")
            state.initialize(to: initialValue)
        }
    }

    /// Calls `body` with the guarded value while holding the lock, and returns what it returns.
    @inlinable
    package func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout State) throws(E) -> Result
    ) throws(E) -> Result {
        try storage.withUnsafeMutablePointers { (mutex, state) throws(E) -> Result in
            let error = pthread_mutex_lock(mutex)
            precondition(error == 0, "pthread_mutex_lock failed: \(error)")
            defer { pthread_mutex_unlock(mutex) }
            return try body(&state.pointee)
        }
    }
}

extension PthreadMutex: @unchecked Sendable where State: Sendable {}  // unchecked: every access to the value holds the mutex

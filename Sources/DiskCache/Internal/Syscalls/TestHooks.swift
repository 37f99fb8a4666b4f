// Test hooks of the syscall layer (``Syscall``): observers of every change it makes to the
// file system (the power-loss tests) and injected I/O faults. Debug builds, which the tests
// use, have them; release builds compile them to constants, so no production path carries
// them, and the tests that install them (PowerLossTests, two of HostileDirectoryTests) are
// compiled in debug builds only. Either way the calls made are the same: observing never
// takes another branch.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import CDiskCacheSupport
import DiskCacheLocking
import Synchronization

/// A change to the file system made through ``Syscall``, as an observer sees it: reported after
/// the call succeeded (a `close`, just before it, so that the number is still this file's).
///
/// Nothing in the store listens. Tests install an observer to follow, call by call, what a
/// power cut would keep under the strict persistence model (a file's data survives only if it
/// was fsynced, a name only if its directory was fsynced): see `PowerLossTests`.
enum FileSystemEvent: Sendable {
    /// `fd` now refers to `path` (which `O_CREAT` made if `created`, `O_TRUNC` emptied if `truncated`).
    case open(fd: Int32, path: String, created: Bool, truncated: Bool)
    case write(fd: Int32, offset: Int64, bytes: [UInt8])
    case truncate(fd: Int32, length: Int64)
    case fsync(fd: Int32)
    case close(fd: Int32)
    case rename(from: String, to: String)
    case link(existing: String, new: String)
    case unlink(path: String)
    case mkdir(path: String)
    case rmdir(path: String)
    /// `chmod(2)`: the file's mode is now `mode` (durable, like its data, once the file is synced).
    case chmod(path: String, mode: UInt32)
    /// `syncfs(2)` on the file system holding `fd`: every file and directory on it is durable.
    case syncFileSystem(fd: Int32)
}

#if DEBUG
/// The installed observers. A relaxed atomic flag keeps the cost at one load per call while none is.
enum FileSystemObservers {
    private static let isActive = Atomic<Bool>(false)
    private static let observers = PthreadMutex<[Int: @Sendable (FileSystemEvent) -> Void]>([:])
    private static let nextToken = Atomic<Int>(0)

    /// Installs `observer` for every later call, from any thread; returns the token to remove it with.
    static func add(_ observer: @escaping @Sendable (FileSystemEvent) -> Void) -> Int {
        let token = nextToken.add(1, ordering: .relaxed).newValue
        observers.withLock {
            $0[token] = observer
            isActive.store(true, ordering: .releasing)
        }
        return token
    }

    static func remove(_ token: Int) {
        observers.withLock {
            $0[token] = nil
            isActive.store(!$0.isEmpty, ordering: .releasing)
        }
    }

    @inline(__always)
    static var isObserved: Bool { isActive.load(ordering: .relaxed) }

    static func report(_ event: @autoclosure () -> FileSystemEvent) {
        guard isObserved else { return }
        let event = event()
        let current = observers.withLock { Array($0.values) }
        for observer in current { observer(event) }
    }
}

/// A test hook: `fsync`, or `pwrite`, of the listed descriptors fails with EIO, without being
/// made. One relaxed load per call while nothing is listed.
enum FaultInjection {
    private static let active = Atomic<Bool>(false)
    private static let failing = PthreadMutex<(fsyncs: Set<Int32>, writes: Set<Int32>)>(([], []))

    @inline(__always)
    static var isActive: Bool { active.load(ordering: .relaxed) }

    /// Makes every `fsync` of `fd` fail (`failing`) or work again.
    static func setFsyncFails(_ fd: Int32, _ fails: Bool) {
        failing.withLock {
            if fails { $0.fsyncs.insert(fd) } else { $0.fsyncs.remove(fd) }
            active.store(!$0.fsyncs.isEmpty || !$0.writes.isEmpty, ordering: .releasing)
        }
    }

    /// Makes every `pwrite` of `fd` (``Syscall/pwriteAll(_:_:at:)``) fail or work again.
    static func setWritesFail(_ fd: Int32, _ fails: Bool) {
        failing.withLock {
            if fails { $0.writes.insert(fd) } else { $0.writes.remove(fd) }
            active.store(!$0.fsyncs.isEmpty || !$0.writes.isEmpty, ordering: .releasing)
        }
    }

    static func fsyncFails(_ fd: Int32) -> Bool { failing.withLock { $0.fsyncs.contains(fd) } }
    static func writeFails(_ fd: Int32) -> Bool { failing.withLock { $0.writes.contains(fd) } }
}
#else
/// Release builds: nothing is observed, and every check folds to a constant.
enum FileSystemObservers {
    @inline(__always)
    static var isObserved: Bool { false }

    @inline(__always)
    static func report(_ event: @autoclosure () -> FileSystemEvent) {}
}

/// Release builds: no fault is injected.
enum FaultInjection {
    @inline(__always)
    static var isActive: Bool { false }

    static func fsyncFails(_ fd: Int32) -> Bool { false }
    static func writeFails(_ fd: Int32) -> Bool { false }
}
#endif

import CDiskCacheSupport
import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// Taking the cache: exclusive locks, or joining the instances that share it (the shared page),
// and naming the owner when the cache is taken.

extension Opener {
    /// Takes the cache: an exclusive `flock` on `LOCK` (which then names this process) and on
    /// the cache directory itself. `LOCK` is what older versions of the library lock and what
    /// names the owner; the directory's lock is the one no one can take away by unlinking a
    /// file, so a second opener is refused even after `LOCK` was deleted under an open cache.
    static func takeLocks(_ layout: Layout) throws(DiskCacheError) -> [SharedDescriptor] {
        let path = layout.lockFile
        let lockFile = SharedDescriptor(try layout.directory.open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0o600)
            .get(orThrow: "open the lock file", path: path))
        let directory = SharedDescriptor(try layout.directory.open(layout.root, O_RDONLY | O_DIRECTORY)
            .get(orThrow: "open the cache directory", path: layout.root))
        try lock(lockFile.fd, optional: false, layout)
        try lock(directory.fd, optional: true, layout)
        writeNote("\(getpid())\n", to: lockFile.fd)
        return [lockFile, directory]
    }

    /// Shared mode's way in: a shared `flock` on the cache directory (which an exclusive owner,
    /// or an older version of the library, holds exclusively: then `.locked`), then, in
    /// `SHARED`, the opening lock (waited for) and a test of whether any other instance holds
    /// the presence lock. The caller lets go of the opening lock when it is done.
    ///
    /// An instance alone in `SHARED` is alone in the cache only if no instance holds the
    /// directory's presence byte (``SharedRegion/directoryPresence``, which no change to
    /// `SHARED` takes away): when one does, `SHARED` was removed or replaced under an open
    /// group, and recovering as if alone would start a second group on the same journal. So
    /// would trusting a page that fails validation. In both cases the open waits, up to
    /// `lockTimeout`, for the group to close (its instances fail their next write and are to
    /// be closed), then fails with ``DiskCacheError/Code/sharedPageReplaced`` or
    /// ``DiskCacheError/Code/sharedPageDamaged``. What is not a regular file at `SHARED` (a
    /// directory, link or FIFO) is moved aside once no instance is open.
    static func joinShared(_ layout: Layout, lockTimeout: Duration, logger: Logger) throws(DiskCacheError)
        -> (directory: SharedDescriptor, region: SharedRegion, alone: Bool, movedAside: Bool) {
        let directory = SharedDescriptor(try layout.directory.open(layout.root, O_RDONLY | O_DIRECTORY)
            .get(orThrow: "open the cache directory", path: layout.root))
        try lock(directory.fd, optional: true, shared: true, layout)
        let deadline = ContinuousClock.now + lockTimeout
        var pause: UInt32 = 1_000
        var movedAside = false
        while true {
            switch try joinSharedOnce(layout, directory: directory, lockTimeout: lockTimeout, logger: logger, movedAside: &movedAside) {
            case .success(let joined):
                // Held for as long as `directory` is open: this instance's presence in the cache.
                _ = SharedRegion.range(directory.fd, start: SharedRegion.directoryPresence, length: 1, .shared, wait: false)
                return (directory, joined.region, joined.alone, movedAside)
            case .failure(let error):
                guard ContinuousClock.now < deadline else { throw error }
                usleep(pause)
                pause = min(pause * 2, 50_000)
            }
        }
    }

    /// One try of ``joinShared(_:lockTimeout:logger:)``: a failure is one that waiting for the
    /// open group to close may cure.
    private static func joinSharedOnce(_ layout: Layout, directory: SharedDescriptor, lockTimeout: Duration, logger: Logger,
                                       movedAside: inout Bool) throws(DiskCacheError) -> Result<(region: SharedRegion, alone: Bool), DiskCacheError> {
        let path = layout.root + "/" + SharedRegion.fileName
        let othersOpen = { SharedRegion.isHeld(directory: directory.fd) }
        let replaced = DiskCacheError(code: .sharedPageReplaced,
                                      message: "SHARED was removed or replaced while other instances have the cache open, and they did not all close within \(lockTimeout); close them (each fails its next write with sharedPageReplaced) and open again",
                                      path: path)
        if case .success(let info) = layout.directory.lstat(path), info.st_mode & S_IFMT != S_IFREG {
            guard !othersOpen() else { return .failure(replaced) }
            // Another opener may be moving it at the same moment: tried again either way.
            guard case .success = moveAside(path, layout) else { return .failure(replaced) }
            movedAside = true
            logger.warning("Moved aside what was in place of the shared page (not a regular file)", metadata: ["path": "\(path)"])
        }
        let file = try SharedRegion.openFile(layout).get(orThrow: "open the shared page", path: path)
        let fd = file.fd
        // A FIFO or device put there since the look above: moved aside on the next try.
        guard case .success(let opened) = Syscall.fstat(fd), opened.st_mode & S_IFMT == S_IFREG else {
            return .failure(replaced)
        }
        let timeout = lockTimeout.nanoseconds
        if cdiskcache_range_lock_timed(fd, SharedRegion.Lock.opening.rawValue, 1, SharedRegion.Kind.exclusive.rawValue, timeout) != 0 {
            let error = SyscallError.current
            if error.rawValue == ETIMEDOUT {
                throw DiskCacheError(code: .lockTimeout,
                                     message: "Waited \(lockTimeout) for another instance to finish opening or closing the cache (a stopped or hung process?)",
                                     path: path, errno: ETIMEDOUT)
            }
            throw DiskCacheError.io(error, "lock the shared page (the filesystem may not support shared caches: open it with sharing: .exclusive)", path: path)
        }
        // The name may have been given to another file between the open and the lock.
        guard case .success(let named) = layout.directory.lstat(path), named.st_ino == opened.st_ino, named.st_dev == opened.st_dev else {
            return .failure(replaced)
        }
        let alone: Bool
        switch SharedRegion.range(fd, start: SharedRegion.Lock.presence.rawValue, length: 1, .exclusive, wait: false) {
        case .success: alone = true
        case .failure(.wouldBlock): alone = false
        case .failure(let error):
            throw DiskCacheError.io(error, "lock the shared page", path: path)
        }
        if alone && othersOpen() {
            return .failure(replaced)
        }
        // From here the region owns the file; dropping it lets go of every lock taken on it.
        let region: SharedRegion
        do {
            region = try SharedRegion.map(file, layout: layout, initialise: alone, lockTimeout: lockTimeout)
        } catch where error.code == .sharedPageDamaged || error.code == .sharedPageReplaced {
            var error = error
            error.message += "; waited \(lockTimeout) for the instances that have the cache open to close. Close them (each fails its next write with \(error.code)) and open again"
            return .failure(error)
        }
        try region.lock(.presence, .shared).get(orThrow: "lock the shared page", path: path)
        if alone {
            // Names no process: tools that report the owner say the cache is shared.
            if case .success(let lockFile) = layout.directory.open(layout.lockFile, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0o600) {
                writeNote("shared\n", to: lockFile.fd)
            }
        }
        return .success((region, alone))
    }

    /// `flock(LOCK_EX | LOCK_NB)` on `fd`, or `.locked` naming the owner. With `optional`, a
    /// filesystem that cannot lock a directory (some network filesystems) leaves `LOCK` alone
    /// in charge.
    private static func lock(_ fd: Int32, optional: Bool, shared: Bool = false, _ layout: Layout) throws(DiskCacheError) {
        var attempt = 0
        let take = shared ? Syscall.lockShared : Syscall.lockExclusive
        var result = take(fd)
        // Who holds the lock may let go in a moment: an inspector asking whether the cache is
        // open holds `LOCK` and the directory shared for a few microseconds (try again a few
        // times within 10 ms); and a child this process is starting holds a copy of every
        // descriptor between fork and exec, which keeps a lock alive unless it was unlocked
        // before its descriptor closed (`close()` and `deinit` unlock; an open that failed
        // does not): when the lock's owner is this very process, give such a copy up to 200 ms.
        while case .failure(.wouldBlock) = result, attempt < 20, attempt < 5 || lockOwner(layout) == Int(getpid()) {
            attempt += 1
            usleep(attempt <= 5 ? 2_000 : 10_000)
            result = take(fd)
        }
        switch result {
        case .success:
            return
        case .failure(let error) where error == .wouldBlock:
            var owner = ""
            if let pid = lockOwner(layout) {
                owner = pid == Int(getpid()) ? " (by another DiskCache in this process)" : " (by process \(pid))"
            }
            if shared {
                throw DiskCacheError(code: .locked,
                                     message: "The cache is open exclusively\(owner) (sharing: .exclusive, or an older version of this library); it can be shared once that closes",
                                     path: layout.root)
            }
            if !owner.isEmpty || !isSharedNote(layout) {
                throw DiskCacheError(code: .locked,
                                     message: "The cache is already open\(owner); an exclusive DiskCache must be its only one",
                                     path: layout.root)
            }
            throw DiskCacheError(code: .locked,
                                 message: "The cache is open by instances sharing it; it can be opened exclusively once they all close (or open it with sharing: .shared)",
                                 path: layout.root)
        case .failure where optional:
            return
        case .failure(let error):
            throw DiskCacheError.io(error, "lock the cache directory", path: layout.lockFile)
        }
    }

    /// Replaces what `LOCK` says (an owner's pid, or "shared"), for error messages and tools.
    private static func writeNote(_ text: String, to fd: Int32) {
        _ = Syscall.ftruncate(fd, 0)
        _ = Array(text.utf8).withUnsafeBytes { Syscall.pwriteAll(fd, $0, at: 0) }
    }

    /// Whether the lock file says the cache was last opened in shared mode.
    private static func isSharedNote(_ layout: Layout) -> Bool {
        guard case .success(let bytes?) = FileIO.readAll(layout.lockFile, limit: 64, in: layout.directory) else { return false }
        return String(decoding: bytes, as: UTF8.self).hasPrefix("shared")
    }

    /// The pid the lock file names.
    private static func lockOwner(_ layout: Layout) -> Int? {
        guard case .success(let bytes?) = FileIO.readAll(layout.lockFile, limit: 64, in: layout.directory) else { return nil }
        return Int(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }
}

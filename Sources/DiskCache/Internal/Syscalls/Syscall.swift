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

/// The syscalls the store makes, in one place, each retried on EINTR where a retry is safe.
///
/// Everything returns `Result<_, SyscallError>` so that call sites decide what an error means
/// (a missing file on read is a miss, on open of the cache it is a problem).
enum Syscall {
    @inline(__always)
    private static func retrying<T: BinaryInteger>(_ body: () -> T) -> Result<T, SyscallError> {
        while true {
            let result = body()
            if result >= 0 { return .success(result) }
            let error = SyscallError.current
            if error == .interrupted { continue }
            return .failure(error)
        }
    }

    static func open(_ path: String, _ flags: Int32, _ mode: mode_t = 0o600) -> Result<Int32, SyscallError> {
        guard FileSystemObservers.isObserved else { return retrying { Glibc_open(path, flags | O_CLOEXEC, mode) } }
        // Whether O_CREAT made the file, for the observer: only an exclusive create says for sure,
        // so look first otherwise.
        let existed = flags & O_CREAT != 0 && flags & O_EXCL == 0 ? Glibc_access(path, F_OK) == 0 : flags & O_CREAT == 0
        let result = retrying { Glibc_open(path, flags | O_CLOEXEC, mode) }
        if case .success(let fd) = result {
            FileSystemObservers.report(.open(fd: fd, path: path, created: !existed, truncated: flags & O_TRUNC != 0))
        }
        return result
    }

    /// Closes a descriptor. Never retried on EINTR: on Linux the descriptor is released
    /// even when close reports EINTR, and a retry could close a descriptor another
    /// thread has just been given.
    static func close(_ fd: Int32) {
        FileSystemObservers.report(.close(fd: fd))
        _ = Glibc_close(fd)
    }

    /// Writes all of `buffer` at `position`, looping over short writes, at most 1 GiB a call
    /// (Darwin refuses more than `INT_MAX` bytes; Linux writes at most about 2 GiB).
    static func pwriteAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, at position: Int64) -> Result<Void, SyscallError> {
        if FaultInjection.isActive, FaultInjection.writeFails(fd) { return .failure(SyscallError(rawValue: EIO)) }
        defer { reportWrite(fd, buffer, at: position) }
        var offset = 0
        while offset < buffer.count {
            let result = retrying {
                Glibc_pwrite(fd, buffer.baseAddress! + offset, min(buffer.count - offset, 1 << 30), off_t(position) + off_t(offset))
            }
            switch result {
            case .success(let written): offset += written
            case .failure(let error): return .failure(error)
            }
        }
        return .success(())
    }

    /// Writes `parts` one after the other from offset 0 with as few `pwritev(2)` calls as the
    /// kernel allows (one, for a fresh file in practice), looping over short writes.
    static func pwritevAll(_ fd: Int32, _ parts: [UnsafeRawBufferPointer]) -> Result<Void, SyscallError> {
        if FileSystemObservers.isObserved {
            var position: Int64 = 0
            for part in parts {
                reportWrite(fd, part, at: position)
                position += Int64(part.count)
            }
        }
        var vectors = parts.filter { $0.count > 0 }.map {
            iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress), iov_len: $0.count)
        }
        var position: Int64 = 0
        var first = 0
        while first < vectors.count {
            let count = Int32(min(vectors.count - first, 1024))
            let result = vectors.withUnsafeMutableBufferPointer { buffer in
                retrying { Glibc_pwritev(fd, buffer.baseAddress! + first, count, off_t(position)) }
            }
            var written: Int
            switch result {
            case .success(let count): written = count
            case .failure(let error): return .failure(error)
            }
            position += Int64(written)
            // Skip what was written: whole vectors, then part of the next.
            while first < vectors.count && written >= vectors[first].iov_len {
                written -= vectors[first].iov_len
                first += 1
            }
            if written > 0 {
                vectors[first].iov_base += written
                vectors[first].iov_len -= written
            }
        }
        return .success(())
    }

    /// Reports to observers, as writes to `destination`, what an in-kernel copy (a clone,
    /// `copy_file_range`) put there: `count` bytes at `offset` of both files, read back from
    /// `source`. So the power-loss tests follow the copy that production makes.
    static func reportCopy(from source: Int32, to destination: Int32, at offset: Int64, count: Int64) {
        guard FileSystemObservers.isObserved, count > 0 else { return }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(min(count, 1 << 20)), alignment: 16)
        defer { buffer.deallocate() }
        var done: Int64 = 0
        while done < count {
            let piece = UnsafeMutableRawBufferPointer(rebasing: buffer[..<Int(min(count - done, Int64(buffer.count)))])
            guard case .success(let read) = preadAll(source, piece, at: offset + done), read > 0 else { return }
            reportWrite(destination, UnsafeRawBufferPointer(rebasing: piece[..<read]), at: offset + done)
            done += Int64(read)
        }
    }

    /// Reports a write to observers: the whole buffer, even if the call failed part way (a
    /// power-loss model must assume a failed write may have changed the file).
    private static func reportWrite(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, at position: Int64) {
        FileSystemObservers.report(.write(fd: fd, offset: position, bytes: Array(buffer)))
    }

    /// Reads up to `buffer.count` bytes at `position`; returns how many were read (short only at
    /// end of file). `read` is `pread` unless an entry file is read (`cdiskcache_pread_entry`,
    /// which may refuse to wait for the disk, see ``DiskCache/PageCacheOnly``).
    static func preadAll(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, at position: Int64,
                         read: (Int32, UnsafeMutableRawPointer, Int, off_t) -> Int = Glibc_pread) -> Result<Int, SyscallError> {
        var offset = 0
        while offset < buffer.count {
            let result = retrying {
                read(fd, buffer.baseAddress! + offset, buffer.count - offset, off_t(position) + off_t(offset))
            }
            switch result {
            case .success(0): return .success(offset)
            case .success(let read): offset += read
            case .failure(let error): return .failure(error)
            }
        }
        return .success(offset)
    }

    static func fstat(_ fd: Int32) -> Result<stat, SyscallError> {
        var info = stat()
        return retrying { Glibc_fstat(fd, &info) }.map { _ in info }
    }

    /// `lstat`: never follows a symbolic link.
    static func lstat(_ path: String) -> Result<stat, SyscallError> {
        var info = stat()
        return retrying { Glibc_lstat(path, &info) }.map { _ in info }
    }

    /// `stat` (following links, as the path the user gave is followed when the cache opens).
    static func statPath(_ path: String) -> Result<stat, SyscallError> {
        var info = stat()
        return retrying { Glibc_stat(path, &info) }.map { _ in info }
    }

    /// `fsync(2)`, or with `dataOnly` `fdatasync(2)`: the file's data, and its size when that
    /// changed, made durable, not its times. Observers see either as an fsync, which
    /// `fdatasync` is for everything the store reads back.
    static func fsync(_ fd: Int32, dataOnly: Bool = false) -> Result<Void, SyscallError> {
        if FaultInjection.isActive, FaultInjection.fsyncFails(fd) { return .failure(SyscallError(rawValue: EIO)) }
        return observed(retrying { dataOnly ? Glibc_fdatasync(fd) : Glibc_fsync(fd) }, .fsync(fd: fd))
    }

    /// Passes a successful result's event to the observers.
    @inline(__always)
    private static func observed<T>(_ result: Result<T, SyscallError>, _ event: @autoclosure () -> FileSystemEvent) -> Result<Void, SyscallError> {
        switch result {
        case .success:
            FileSystemObservers.report(event())
            return .success(())
        case .failure(let error):
            return .failure(error)
        }
    }

    /// Opens a directory and fsyncs it, so that renames and creations inside it are durable.
    static func fsyncDirectory(_ path: String) -> Result<Void, SyscallError> {
        open(path, O_RDONLY | O_DIRECTORY).flatMap { fd in
            defer { close(fd) }
            return fsync(fd)
        }
    }

    static func rename(_ from: String, _ to: String) -> Result<Void, SyscallError> {
        observed(retrying { Glibc_rename(from, to) }, .rename(from: from, to: to))
    }

    /// A second name for a file (`link(2)`): how a metadata update keeps the body without copying it.
    static func link(_ existing: String, _ new: String) -> Result<Void, SyscallError> {
        observed(retrying { Glibc_link(existing, new) }, .link(existing: existing, new: new))
    }

    static func unlink(_ path: String) -> Result<Void, SyscallError> {
        observed(retrying { Glibc_unlink(path) }, .unlink(path: path))
    }

    static func rmdir(_ path: String) -> Result<Void, SyscallError> {
        observed(retrying { Glibc_rmdir(path) }, .rmdir(path: path))
    }

    static func mkdir(_ path: String, _ mode: mode_t = 0o700) -> Result<Void, SyscallError> {
        observed(retrying { Glibc_mkdir(path, mode) }, .mkdir(path: path))
    }

    static func ftruncate(_ fd: Int32, _ length: Int64) -> Result<Void, SyscallError> {
        observed(retrying { Glibc_ftruncate(fd, off_t(length)) }, .truncate(fd: fd, length: length))
    }

    /// `flock(LOCK_EX | LOCK_NB)`: fails with `.wouldBlock` when another open file description holds it.
    static func lockExclusive(_ fd: Int32) -> Result<Void, SyscallError> {
        retrying { Glibc_flock(fd, LOCK_EX | LOCK_NB) }.map { _ in () }
    }

    static func lockShared(_ fd: Int32) -> Result<Void, SyscallError> {
        retrying { Glibc_flock(fd, LOCK_SH | LOCK_NB) }.map { _ in () }
    }

    /// Lets go of `fd`'s `flock` at once, even while a child between `fork` and `exec` holds a
    /// copy of the descriptor (closing it would not, until the child's copy goes too).
    static func unlock(_ fd: Int32) {
        _ = retrying { Glibc_flock(fd, LOCK_UN) }
    }

    /// Reserves disk blocks past the end of a file without changing its size.
    static func reserve(_ fd: Int32, offset: Int64, length: Int64) -> Result<Void, SyscallError> {
        retrying { cdiskcache_reserve(fd, off_t(offset), off_t(length)) }.map { _ in () }
    }

    /// Makes every write to the filesystem holding `fd` durable (`syncfs(2)` on Linux, `fsync` elsewhere).
    static func syncFileSystem(_ fd: Int32) -> Result<Void, SyscallError> {
        observed(retrying { cdiskcache_syncfs(fd) }, .syncFileSystem(fd: fd))
    }

    static func statvfs(_ path: String) -> Result<Glibc_statvfs_t, SyscallError> {
        var info = Glibc_statvfs_t()
        return retrying { Glibc_statvfs(path, &info) }.map { _ in info }
    }

    /// Names in a directory, without "." and "..". Symbolic links are reported with their type so callers can skip them.
    static func listDirectory(_ path: String) -> Result<[(name: String, type: UInt8)], SyscallError> {
        guard let dir = Glibc_opendir(path) else { return .failure(.current) }
        return .success(readEntries(dir))
    }

    /// Every entry of an open directory stream, which it then closes.
    private static func readEntries(_ dir: OpaquePointer) -> [(name: String, type: UInt8)] {
        defer { Glibc_closedir(dir) }
        var names: [(name: String, type: UInt8)] = []
        while let entry = Glibc_readdir(dir) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name == "." || name == ".." { continue }
            names.append((name, entry.pointee.d_type))
        }
        return names
    }

    static func access(_ path: String, _ mode: Int32) -> Bool {
        Glibc_access(path, mode) == 0
    }

    // MARK: Descriptor-relative calls, for paths inside a cache (see `CacheDirectory`)

    /// `cdiskcache_open_beneath`: `path` relative to `directory`, no link followed at any
    /// component. Reported to observers as an open of `reportingAs` when that is given.
    static func openBeneath(_ directory: Int32, _ path: String, _ flags: Int32, _ mode: mode_t,
                            reportingAs fullPath: String?) -> Result<Int32, SyscallError> {
        guard let fullPath, FileSystemObservers.isObserved else {
            return retrying { cdiskcache_open_beneath(directory, path, flags, mode) }
        }
        let existed = flags & O_CREAT != 0 && flags & O_EXCL == 0
            ? Glibc_faccessat(directory, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0 : flags & O_CREAT == 0
        let result = retrying { cdiskcache_open_beneath(directory, path, flags, mode) }
        if case .success(let fd) = result {
            FileSystemObservers.report(.open(fd: fd, path: fullPath, created: !existed, truncated: flags & O_TRUNC != 0))
        }
        return result
    }

    /// ``openBeneath(_:_:_:_:reportingAs:)`` of a C string (the read path builds it on the
    /// stack); `fullPath` is made only for an observer.
    static func openBeneath(_ directory: Int32, _ path: UnsafePointer<CChar>, _ flags: Int32, _ mode: mode_t,
                            reportingAs fullPath: () -> String) -> Result<Int32, SyscallError> {
        guard FileSystemObservers.isObserved else {
            return retrying { cdiskcache_open_beneath(directory, path, flags, mode) }
        }
        return openBeneath(directory, String(cString: path), flags, mode, reportingAs: fullPath())
    }

    /// `unlinkat(2)` of a name in `directory` (`AT_REMOVEDIR` for a directory).
    static func unlinkat(_ directory: Int32, _ name: String, directory isDirectory: Bool, reportingAs path: String) -> Result<Void, SyscallError> {
        observed(retrying { Glibc_unlinkat(directory, name, isDirectory ? AT_REMOVEDIR : 0) },
                 isDirectory ? .rmdir(path: path) : .unlink(path: path))
    }

    static func mkdirat(_ directory: Int32, _ name: String, _ mode: mode_t, reportingAs path: String) -> Result<Void, SyscallError> {
        observed(retrying { Glibc_mkdirat(directory, name, mode) }, .mkdir(path: path))
    }

    static func renameat(_ fromDirectory: Int32, _ from: String, _ toDirectory: Int32, _ to: String,
                         reportingAs paths: (from: String, to: String)) -> Result<Void, SyscallError> {
        observed(retrying { Glibc_renameat(fromDirectory, from, toDirectory, to) }, .rename(from: paths.from, to: paths.to))
    }

    /// `linkat(2)` without `AT_SYMLINK_FOLLOW`: a link at `existing` is linked, never its target.
    static func linkat(_ existingDirectory: Int32, _ existing: String, _ newDirectory: Int32, _ new: String,
                       reportingAs paths: (existing: String, new: String)) -> Result<Void, SyscallError> {
        observed(retrying { Glibc_linkat(existingDirectory, existing, newDirectory, new, 0) },
                 .link(existing: paths.existing, new: paths.new))
    }

    /// `fstatat(2)` with `AT_SYMLINK_NOFOLLOW`.
    static func fstatat(_ directory: Int32, _ name: String) -> Result<stat, SyscallError> {
        var info = stat()
        return retrying { Glibc_fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW) }.map { _ in info }
    }

    static func fchmod(_ fd: Int32, _ mode: mode_t, reportingAs path: String) -> Result<Void, SyscallError> {
        observed(retrying { Glibc_fchmod(fd, mode) }, .chmod(path: path, mode: UInt32(mode)))
    }

    /// Names in the directory open at `fd` (which this call takes over and closes), without "." and "..".
    static func listDirectory(fd: Int32) -> Result<[(name: String, type: UInt8)], SyscallError> {
        guard let dir = Glibc_fdopendir(fd) else {
            let error = SyscallError.current
            Glibc_close_quietly(fd)
            return .failure(error)
        }
        return .success(readEntries(dir))
    }
}

// Short names for the libc functions, so the wrappers above do not shadow them.
typealias Glibc_statvfs_t = statvfs
@inline(__always) private func Glibc_open(_ p: String, _ f: Int32, _ m: mode_t) -> Int32 { open(p, f, m) }
@inline(__always) private func Glibc_close(_ fd: Int32) -> Int32 { close(fd) }
@inline(__always) private func Glibc_write(_ fd: Int32, _ b: UnsafeRawPointer, _ n: Int) -> Int { write(fd, b, n) }
@inline(__always) private func Glibc_pwrite(_ fd: Int32, _ b: UnsafeRawPointer, _ n: Int, _ o: off_t) -> Int { pwrite(fd, b, n, o) }
@inline(__always) private func Glibc_pwritev(_ fd: Int32, _ v: UnsafePointer<iovec>, _ n: Int32, _ o: off_t) -> Int { pwritev(fd, v, n, o) }
@inline(__always) func Glibc_pread(_ fd: Int32, _ b: UnsafeMutableRawPointer, _ n: Int, _ o: off_t) -> Int { pread(fd, b, n, o) }
@inline(__always) private func Glibc_fstat(_ fd: Int32, _ s: inout stat) -> Int32 { fstat(fd, &s) }
@inline(__always) private func Glibc_lstat(_ p: String, _ s: inout stat) -> Int32 { lstat(p, &s) }
@inline(__always) private func Glibc_stat(_ p: String, _ s: inout stat) -> Int32 { stat(p, &s) }
@inline(__always) private func Glibc_fsync(_ fd: Int32) -> Int32 { fsync(fd) }
#if canImport(Darwin)
@inline(__always) private func Glibc_fdatasync(_ fd: Int32) -> Int32 { fsync(fd) }  // no fdatasync in Darwin's headers
#else
@inline(__always) private func Glibc_fdatasync(_ fd: Int32) -> Int32 { fdatasync(fd) }
#endif
@inline(__always) private func Glibc_rename(_ a: String, _ b: String) -> Int32 { rename(a, b) }
@inline(__always) private func Glibc_link(_ a: String, _ b: String) -> Int32 { link(a, b) }
@inline(__always) private func Glibc_unlink(_ p: String) -> Int32 { unlink(p) }
@inline(__always) private func Glibc_rmdir(_ p: String) -> Int32 { rmdir(p) }
@inline(__always) private func Glibc_mkdir(_ p: String, _ m: mode_t) -> Int32 { mkdir(p, m) }
@inline(__always) private func Glibc_ftruncate(_ fd: Int32, _ l: off_t) -> Int32 { ftruncate(fd, l) }
@inline(__always) private func Glibc_flock(_ fd: Int32, _ op: Int32) -> Int32 { flock(fd, op) }
@inline(__always) private func Glibc_statvfs(_ p: String, _ s: inout Glibc_statvfs_t) -> Int32 { statvfs(p, &s) }
@inline(__always) private func Glibc_opendir(_ p: String) -> OpaquePointer? { opendir(p) }
@inline(__always) private func Glibc_readdir(_ d: OpaquePointer) -> UnsafeMutablePointer<dirent>? { readdir(d) }
@inline(__always) private func Glibc_closedir(_ d: OpaquePointer) { closedir(d) }
@inline(__always) private func Glibc_faccessat(_ d: Int32, _ p: String, _ m: Int32, _ f: Int32) -> Int32 { faccessat(d, p, m, f) }
@inline(__always) private func Glibc_unlinkat(_ d: Int32, _ p: String, _ f: Int32) -> Int32 { unlinkat(d, p, f) }
@inline(__always) private func Glibc_mkdirat(_ d: Int32, _ p: String, _ m: mode_t) -> Int32 { mkdirat(d, p, m) }
@inline(__always) private func Glibc_renameat(_ a: Int32, _ p: String, _ b: Int32, _ q: String) -> Int32 { renameat(a, p, b, q) }
@inline(__always) private func Glibc_linkat(_ a: Int32, _ p: String, _ b: Int32, _ q: String, _ f: Int32) -> Int32 { linkat(a, p, b, q, f) }
@inline(__always) private func Glibc_fstatat(_ d: Int32, _ p: String, _ s: inout stat, _ f: Int32) -> Int32 { fstatat(d, p, &s, f) }
@inline(__always) private func Glibc_fchmod(_ fd: Int32, _ m: mode_t) -> Int32 { fchmod(fd, m) }
@inline(__always) private func Glibc_fdopendir(_ fd: Int32) -> OpaquePointer? { fdopendir(fd) }
@inline(__always) private func Glibc_close_quietly(_ fd: Int32) { _ = close(fd) }
@inline(__always) private func Glibc_access(_ p: String, _ m: Int32) -> Int32 { access(p, m) }

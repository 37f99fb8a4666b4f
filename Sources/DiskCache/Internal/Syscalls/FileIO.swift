import CDiskCacheSupport
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Whole-file reads and writes. Inside a cache they go through its ``CacheDirectory`` (no link
/// followed at any component); elsewhere (`directory` nil) no link is followed at the last one.
enum FileIO {
    /// Opens `path` through `directory` when there is one.
    private static func open(_ path: String, _ flags: Int32, _ mode: mode_t = 0o600, in directory: CacheDirectory?) -> Result<OpenFile, SyscallError> {
        if let directory { return directory.open(path, flags, mode) }
        return OpenFile.owning(Syscall.open(path, flags, mode))
    }

    private static func unlink(_ path: String, in directory: CacheDirectory?) {
        if let directory { _ = directory.unlink(path) } else { _ = Syscall.unlink(path) }
    }

    /// Creates `path` (which must not exist), writes `bytes`, optionally fsyncs, closes.
    /// On failure the partial file is removed.
    static func writeNewFile(_ path: String, _ bytes: UnsafeRawBufferPointer, sync: Bool,
                             in directory: CacheDirectory?) -> Result<Void, SyscallError> {
        switch open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600, in: directory) {
        case .success(let file): return write(file, [bytes], at: path, sync: sync, in: directory)
        case .failure(let error): return .failure(error)
        }
    }

    /// Creates an entry file at `path` in a slot no journal record vouches for, writes `parts`
    /// with one gathered write, optionally fsyncs, and closes. A file already there is what an
    /// interrupted write left (or, after damage, a directory): it is removed and the file made
    /// afresh (never truncated to nothing in place, which would make ext4 start writeback at
    /// close). With `retired`, a retired `.meta` file (``RetiredFiles``) no longer than `parts`
    /// is moved to `path` instead and written over; one that is not a regular file of one name
    /// is unlinked and a file created. On failure the partial file is removed.
    static func writeEntryFile(_ path: String, _ parts: [UnsafeRawBufferPointer], sync: Bool,
                               in directory: CacheDirectory, reusing retired: String? = nil) -> Result<Void, SyscallError> {
        if let retired {
            if let file = openRetired(retired, movedTo: path, atMost: parts.reduce(0) { $0 + $1.count }, in: directory) {
                return write(file, parts, at: path, sync: sync, in: directory)
            }
            _ = directory.unlink(retired)
        }
        let flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW
        let created: Result<OpenFile, SyscallError>
        switch directory.open(path, flags, 0o600) {
        case .failure(.fileExists):
            _ = directory.removeEntryFile(path)
            created = directory.open(path, flags, 0o600)
        case let opened:
            created = opened
        }
        switch consume created {
        case .success(let file): return write(file, parts, at: path, sync: sync, in: directory)
        case .failure(let error): return .failure(error)
        }
    }

    /// Writes `parts` from offset 0 of `file` (the file at `path`), fsyncs when `sync`, and
    /// closes it; unlinks `path` on failure.
    private static func write(_ file: consuming OpenFile, _ parts: [UnsafeRawBufferPointer], at path: String, sync: Bool,
                              in directory: CacheDirectory?) -> Result<Void, SyscallError> {
        var result = Syscall.pwritevAll(file.fd, parts)
        if case .success = result, sync { result = Syscall.fsync(file.fd) }
        _ = consume file
        if case .failure = result { unlink(path, in: directory) }
        return result
    }

    /// A retired `.meta` file moved to `path` (replacing what is there, garbage in a slot no
    /// record vouches for) and opened to be written over. Nil, with nothing at `path`, when it
    /// cannot be moved or opened, or is not a regular file of one name (a power cut can leave a
    /// second name), or is longer than the `size` bytes to be written (its entry recorded a
    /// shorter file than the one on disk: bytes appended to it would outlive the write): the
    /// caller creates a file.
    private static func openRetired(_ retired: String, movedTo path: String, atMost size: Int,
                                    in directory: CacheDirectory) -> OpenFile? {
        guard case .success = directory.rename(retired, path) else { return nil }
        let file: OpenFile
        switch directory.open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK, 0) {
        case .success(let opened): file = opened
        case .failure:
            _ = directory.unlink(path)
            return nil
        }
        guard case .success(let info) = Syscall.fstat(file.fd), info.st_mode & S_IFMT == S_IFREG, info.st_nlink == 1,
              info.st_size <= size else {
            _ = consume file
            _ = directory.unlink(path)
            return nil
        }
        return file
    }

    /// How the cache opens a file to read it: never through a symbolic link, and never
    /// waiting on a FIFO or device put where a file should be (a FIFO then fails its `pread`
    /// with ESPIPE, a directory with EISDIR: see ``isNotAFile(_:)``).
    /// (Computed, not a stored `static let`: every read asks, and a lazy global costs a
    /// `swift_once` check each time.)
    static var readFlags: Int32 { O_RDONLY | O_NOFOLLOW | O_NONBLOCK }

    /// The most one read allocates: half this machine's memory. A file that claims more (a
    /// crafted `.meta`, a sparse file) is refused before anything is allocated.
    static let maximumReadSize: Int = {
        let half = ProcessInfo.processInfo.physicalMemory / 2
        return half > 0 && half < UInt64(Int.max) ? Int(half) : Int.max
    }()

    /// Whether a read failed because the path is not a regular file (a directory, a FIFO, a
    /// device or socket): damage, as a missing file is.
    static func isNotAFile(_ error: SyscallError) -> Bool {
        error == .isDirectory || error.rawValue == ESPIPE || error.rawValue == ENXIO || error.rawValue == ENODEV
    }

    /// A buffer of `count` bytes, or nil when the memory is not there (never a trap: the size
    /// may come from a damaged file). Freed with `deallocate()` (malloc's memory on Linux).
    private static func allocateForRead(_ count: Int) -> UnsafeMutableRawBufferPointer? {
        // Reads of up to a megabyte (nearly all) skip the lazy global's `swift_once` check.
        guard count <= 1 << 20 || count <= maximumReadSize, let raw = malloc(max(count, 1)) else { return nil }
        return UnsafeMutableRawBufferPointer(start: raw, count: max(count, 1))
    }

    /// Reads exactly `count` bytes from the start of `path` into a fresh buffer.
    /// Returns nil (as `.success(nil)`) when the file is shorter than that; fails with
    /// ENOMEM when `count` is more than a read may allocate.
    static func read(_ path: String, count: Int, in directory: CacheDirectory?) -> Result<EntryBytes?, SyscallError> {
        withFileToRead(path, in: directory) { read(fd: $0, count: count) }
    }

    /// Runs `body` with `path` opened to read (``readFlags``), and closes it after.
    private static func withFileToRead<T: ~Copyable>(_ path: String, in directory: CacheDirectory?,
                                          _ body: (Int32) -> Result<T, SyscallError>) -> Result<T, SyscallError> {
        let file: OpenFile
        switch open(path, readFlags, in: directory) {
        case .success(let opened): file = opened
        case .failure(let error): return .failure(error)
        }
        return file.withFD(body)
    }

    /// ``read(_:count:in:)`` of a file open at `fd`, read from offset 0 (and left open).
    /// `withoutWaiting`: fail with EAGAIN rather than wait for the disk (``DiskCache/PageCacheOnly``).
    static func read(fd: Int32, count: Int, withoutWaiting: Bool = false) -> Result<EntryBytes?, SyscallError> {
        let mode: Int32 = withoutWaiting ? 1 : 0
        return readInto(fd: fd, count: count) { fd, buffer in
            Syscall.preadAll(fd, UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]), at: 0) {
                cdiskcache_pread_entry($0, $1, $2, $3, mode)
            }
        }
    }

    /// ``read(fd:count:withoutWaiting:)`` that also sets `checksum` to the XXH3-64 of the
    /// bytes, computed chunk by chunk as they arrive (a large body crosses memory once instead
    /// of twice).
    static func readHashing(fd: Int32, count: Int, checksum: inout UInt64, withoutWaiting: Bool = false) -> Result<EntryBytes?, SyscallError> {
        var hash: UInt64 = 0
        let result = readInto(fd: fd, count: count) { fd, buffer in
            // Reads from offset 0 whatever the descriptor's position (a kept descriptor is read again).
            let read = cdiskcache_read_hashing(fd, buffer.baseAddress, count, &hash, withoutWaiting ? 1 : 0)
            return read < 0 ? .failure(SyscallError.current) : .success(read)
        }
        checksum = hash
        return result
    }

    /// The XXH3-64 of the first `count` bytes of `path` (``hash(fd:count:)``); nil when the
    /// file is shorter. Fails with ENOMEM, as a read of it would, when `count` is more than
    /// ``maximumReadSize``: a sparse file claiming exabytes must not keep the caller hashing
    /// zeros for hours.
    static func checksum(_ path: String, count: Int, in directory: CacheDirectory?) -> Result<UInt64?, SyscallError> {
        guard count <= maximumReadSize else { return .failure(SyscallError(rawValue: ENOMEM)) }
        return withFileToRead(path, in: directory) { fd in
            hash(fd: fd, count: count).map { $0.count == count ? $0.checksum : nil }
        }
    }

    /// The XXH3-64 of the first `count` bytes of the file open as `fd` (all of it, with
    /// `.max`), and how many there were. A regular file of `MappedBodies.minimumSize` (64 KiB,
    /// below which a read costs less than a mapping) to ``mappedHashLimit`` bytes is hashed
    /// through a mapping made for the purpose: the page cache's own pages, where a read copies
    /// them into a buffer first (a third of the CPU, `Benchmarks/c/mapped-check.c`). Any other,
    /// or one cut short while it is hashed, is read through a 64 KiB buffer, so that the memory
    /// used stays bounded whatever the size.
    static func hash(fd: Int32, count: Int) -> Result<(count: Int, checksum: UInt64), SyscallError> {
        var checksum: UInt64 = 0
        if case .success(let info) = Syscall.fstat(fd), info.st_mode & S_IFMT == S_IFREG,
           Int64(info.st_size) >= MappedBodies.minimumSize, min(Int64(count), Int64(info.st_size)) <= mappedHashLimit {
            let size = Int(min(Int64(count), Int64(info.st_size)))
            if let bytes = mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0), bytes != MAP_FAILED {
                defer { munmap(bytes, size) }
                if cdiskcache_hash_mapped(bytes, size, &checksum, 0) == 0 { return .success((size, checksum)) }
            }
        }
        let read = cdiskcache_hash_file(fd, 0, count, &checksum, 0)
        guard read >= 0 else { return .failure(SyscallError.current) }
        return .success((read, checksum))
    }

    /// The most bytes ``hash(fd:count:)`` hashes through a mapping: 8 MiB, mapped for the time
    /// of its hash only, so that the process's resident size (which counts mapped pages of the
    /// page cache) grows by no more for each store, hand-out or check under way.
    static let mappedHashLimit: Int64 = 8 << 20

    /// Allocates `count` bytes and lets `fill` read into them from `fd` (returning how many it
    /// read): the bytes when that is `count`, nil when the file was shorter.
    private static func readInto(fd: Int32, count: Int,
                                 fill: (Int32, UnsafeMutableRawBufferPointer) -> Result<Int, SyscallError>)
        -> Result<EntryBytes?, SyscallError> {
        guard let buffer = allocateForRead(count) else { return .failure(SyscallError(rawValue: ENOMEM)) }
        let bytes = EntryBytes(buffer)  // freed on every path that does not hand it out
        switch bytes.withBufferToFill({ fill(fd, $0) }) {
        case .success(let read) where read == count: return .success(bytes)
        case .success: return .success(nil)
        case .failure(let error): return .failure(error)
        }
    }

    /// Reads a whole file (of at most `limit` bytes, and at most ``maximumReadSize``) as an
    /// array; nil content if it is larger or is not a regular file.
    static func readAll(_ path: String, limit: Int, in directory: CacheDirectory?) -> Result<[UInt8]?, SyscallError> {
        withFileToRead(path, in: directory) { readAll(fd: $0, limit: limit) }
    }

    /// The whole of the open file `fd`, read from offset 0; nil if it is not a regular file or
    /// is larger than `limit`.
    static func readAll(fd: Int32, limit: Int) -> Result<[UInt8]?, SyscallError> {
        let size: Int
        switch Syscall.fstat(fd) {
        case .success(let info) where info.st_mode & S_IFMT == S_IFREG: size = Int(info.st_size)
        case .success: return .success(nil)
        case .failure(let error): return .failure(error)
        }
        guard size <= min(limit, maximumReadSize) else { return .success(nil) }
        // Read straight into the array's storage: no zero-fill first (a journal can be tens of MB).
        var result: Result<Int, SyscallError> = .success(0)
        let bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
            result = Syscall.preadAll(fd, UnsafeMutableRawBufferPointer(buffer), at: 0)
            if case .success(let read) = result { initialized = read }
        }
        return result.map { _ in bytes }
    }
}

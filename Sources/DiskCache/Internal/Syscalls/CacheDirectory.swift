import CDiskCacheSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The cache directory, held open while a cache (or an inspector) uses it. Every file and
/// directory inside the cache is reached from this descriptor without following a symbolic
/// link at any component (`openat2` with `RESOLVE_NO_SYMLINKS`, plus `RESOLVE_BENEATH` for a
/// path with "..", see `cdiskcache_open_beneath`), so a shard directory or `tmp/` replaced by a link is refused
/// (ELOOP) instead of leading outside the cache. Names are changed with the `*at` calls on a
/// descriptor of the parent directory opened the same way.
///
/// The path the user gave is followed once, when the directory is opened: links in it are the
/// user's to choose. Paths passed in are full paths inside the cache (what ``Layout`` makes);
/// they are reported to ``FileSystemObservers`` as they are.
/// What wants to know of a body file before the cache removes it (its device and inode in
/// `info`): ``MappedBodies``. Asked only while `isWatching`, which costs the removal nothing else.
protocol BodyRemovalObserver: Sendable {
    var isWatching: Bool { get }
    func willRemove(_ info: stat)
}

final class CacheDirectory: Sendable {
    /// The cache directory's path, without a trailing slash.
    let path: String
    /// `O_RDONLY | O_DIRECTORY`: usable with `fsync`, `openat` and `fdopendir`.
    let fd: Int32
    /// Told of each body file this directory is about to remove (``MappedBodies``, which
    /// unmaps it so that its blocks are freed with it); nil: nobody is.
    let bodyRemovals: (any BodyRemovalObserver)?

    private init(path: String, fd: Int32, bodyRemovals: (any BodyRemovalObserver)?) {
        self.path = path
        self.fd = fd
        self.bodyRemovals = bodyRemovals
    }

    deinit { Syscall.close(fd) }

    /// Opens the directory at `path` (following links in `path` itself).
    static func open(_ path: String, bodyRemovals: (any BodyRemovalObserver)? = nil) -> Result<CacheDirectory, SyscallError> {
        let root = Layout(root: path).root
        return Syscall.open(root, O_RDONLY | O_DIRECTORY).map { CacheDirectory(path: root, fd: $0, bodyRemovals: bodyRemovals) }
    }

    /// `path` relative to the cache directory ("" for the directory itself). On every read and
    /// write: sliced as bytes (String's character counting would walk the whole path).
    private func relative(_ path: String) -> String {
        var path = path, root = self.path
        return path.withUTF8 { full in
            root.withUTF8 { root in
                if full.count == root.count, memcmp(full.baseAddress!, root.baseAddress!, root.count) == 0 { return "" }
                // Every path comes from `Layout` (or a listing) built on this very root: never from a file's bytes.
                precondition(full.count > root.count + 1 && memcmp(full.baseAddress!, root.baseAddress!, root.count) == 0
                                 && full[root.count] == UInt8(ascii: "/"),
                             "\(String(decoding: full, as: UTF8.self)) is not inside the cache directory \(String(decoding: root, as: UTF8.self))")
                return String(decoding: UnsafeBufferPointer(rebasing: full[(root.count + 1)...]), as: UTF8.self)
            }
        }
    }

    /// Opens a file or directory inside the cache; never follows a link.
    func open(_ path: String, _ flags: Int32, _ mode: mode_t = 0o600) -> Result<OpenFile, SyscallError> {
        let relative = relative(path)
        if relative.isEmpty { return OpenFile.owning(Syscall.open(self.path, flags, mode)) }
        return OpenFile.owning(Syscall.openBeneath(fd, relative, flags, mode, reportingAs: path))
    }

    /// ``open(_:_:_:)`` of a path given relative to the cache directory as a C string (no
    /// `String` made); `fullPath` is asked for only when an observer is told of the open.
    func open(relative: UnsafePointer<CChar>, _ flags: Int32, fullPath: () -> String) -> Result<OpenFile, SyscallError> {
        OpenFile.owning(Syscall.openBeneath(fd, relative, flags, 0, reportingAs: fullPath))
    }

    /// Runs `body` with a descriptor of `path`'s parent directory (reached without links) and
    /// `path`'s last component.
    private func inParent<T>(_ path: String, _ body: (Int32, String) -> Result<T, SyscallError>) -> Result<T, SyscallError> {
        let relative = relative(path)
        guard let slash = relative.utf8.lastIndex(of: UInt8(ascii: "/")) else { return body(fd, relative) }
        let parent = String(relative[..<slash]), name = String(relative[relative.utf8.index(after: slash)...])
        switch Syscall.openBeneath(fd, parent, O_RDONLY | O_DIRECTORY, 0, reportingAs: nil) {
        case .success(let opened):
            let directory = OpenFile(opened)
            return body(directory.fd, name)
        case .failure(let error):
            return .failure(error)
        }
    }

    /// Removes the file at `path`; of a body file, ``bodyRemovals`` is told first.
    func unlink(_ path: String) -> Result<Void, SyscallError> {
        inParent(path) { parent, name in
            if let bodyRemovals, bodyRemovals.isWatching, path.utf8.last == UInt8(ascii: "y"), path.hasSuffix(".body"),
               case .success(let info) = Syscall.fstatat(parent, name) {
                bodyRemovals.willRemove(info)
            }
            return Syscall.unlinkat(parent, name, directory: false, reportingAs: path)
        }
    }

    func rmdir(_ path: String) -> Result<Void, SyscallError> {
        inParent(path) { Syscall.unlinkat($0, $1, directory: true, reportingAs: path) }
    }

    func mkdir(_ path: String, _ mode: mode_t = 0o700) -> Result<Void, SyscallError> {
        inParent(path) { Syscall.mkdirat($0, $1, mode, reportingAs: path) }
    }

    func rename(_ from: String, _ to: String) -> Result<Void, SyscallError> {
        inParent(from) { fromDirectory, fromName in
            inParent(to) { Syscall.renameat(fromDirectory, fromName, $0, $1, reportingAs: (from, to)) }
        }
    }

    /// Gives the file at `outside` (a path outside the cache, links in it followed as the
    /// user's, a link at its last component linked itself) a second name `path` inside the cache
    /// (`linkat(2)`); EXDEV when they are on different filesystems.
    func linkIn(from outside: String, to path: String) -> Result<Void, SyscallError> {
        inParent(path) { Syscall.linkat(AT_FDCWD, outside, $0, $1, reportingAs: (outside, path)) }
    }

    /// A second name for a file (`linkat(2)`, never following a link at `existing`).
    func link(_ existing: String, _ new: String) -> Result<Void, SyscallError> {
        inParent(existing) { existingDirectory, existingName in
            inParent(new) { Syscall.linkat(existingDirectory, existingName, $0, $1, reportingAs: (existing, new)) }
        }
    }

    /// The file's status, not following a link at the last component either.
    func lstat(_ path: String) -> Result<stat, SyscallError> {
        if relative(path).isEmpty { return Syscall.fstat(fd) }
        return inParent(path) { Syscall.fstatat($0, $1) }
    }

    /// Changes the mode of the directory or file itself (through its descriptor: never a link's target).
    func chmod(_ path: String, _ mode: mode_t) -> Result<Void, SyscallError> {
        switch open(path, O_RDONLY | O_NONBLOCK) {
        case .success(let file): return Syscall.fchmod(file.fd, mode, reportingAs: path)
        case .failure(let error): return .failure(error)
        }
    }

    /// Names in a directory inside the cache, with their types; a link is listed, never entered.
    func listDirectory(_ path: String) -> Result<[(name: String, type: UInt8)], SyscallError> {
        let relative = relative(path)
        // Not reported to observers: the stream closes the descriptor itself.
        return Syscall.openBeneath(fd, relative.isEmpty ? "." : relative, O_RDONLY | O_DIRECTORY, 0, reportingAs: nil)
            .flatMap { Syscall.listDirectory(fd: $0) }
    }

    /// Fsyncs a directory inside the cache (or the cache directory itself).
    func fsyncDirectory(_ path: String) -> Result<Void, SyscallError> {
        if relative(path).isEmpty { return Syscall.fsync(fd) }
        switch open(path, O_RDONLY | O_DIRECTORY) {
        case .success(let directory): return Syscall.fsync(directory.fd)
        case .failure(let error): return .failure(error)
        }
    }

    /// Whether a file or directory is there (not following a link: a link is there).
    func exists(_ path: String) -> Bool {
        if case .success = lstat(path) { return true }
        return false
    }

    /// Removes whatever is at an entry file's name: the file, a link (never its target), or a
    /// directory someone made there (with what it holds). Returns whether something was removed.
    func removeEntryFile(_ path: String) -> Bool {
        switch unlink(path) {
        case .success:
            return true
        case .failure(let error) where error == .isDirectory || error == .notPermitted:
            removeTree(path)
            return !exists(path)
        case .failure:
            return false
        }
    }

    /// Removes a directory tree inside the cache without following symbolic links (a link is
    /// unlinked, not entered).
    func removeTree(_ path: String) {
        guard case .success(let info) = lstat(path) else { return }
        if info.st_mode & S_IFMT == S_IFDIR {
            if case .success(let names) = listDirectory(path) {
                for (name, _) in names { removeTree(path + "/" + name) }
            }
            _ = rmdir(path)
        } else {
            _ = unlink(path)
        }
    }
}

extension Result where Success == stat, Failure == SyscallError {
    /// Whether the status is a directory's.
    var isDirectory: Bool {
        if case .success(let info) = self { return info.st_mode & S_IFMT == S_IFDIR }
        return false
    }
}

extension Result where Success == Void, Failure == SyscallError {
    /// Success when the failure was only that the name was not there.
    var orMissing: Result<Void, SyscallError> {
        if case .failure(.noSuchFileOrDirectory) = self { return .success(()) }
        return self
    }

    /// Success when the failure was only that the name was already there.
    var orExisting: Result<Void, SyscallError> {
        if case .failure(.fileExists) = self { return .success(()) }
        return self
    }
}


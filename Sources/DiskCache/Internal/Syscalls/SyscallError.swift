#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An `errno` value from a ``Syscall`` call, named the POSIX way. (Not swift-system's `Errno`:
/// this package does not depend on swift-system.)
struct SyscallError: Error, Hashable, CustomStringConvertible {
    var rawValue: Int32

    static var current: SyscallError { SyscallError(rawValue: errno) }

    static let interrupted = SyscallError(rawValue: EINTR)
    static let noSuchFileOrDirectory = SyscallError(rawValue: ENOENT)
    static let fileExists = SyscallError(rawValue: EEXIST)
    static let noSpace = SyscallError(rawValue: ENOSPC)
    static let quotaExceeded = SyscallError(rawValue: EDQUOT)
    static let wouldBlock = SyscallError(rawValue: EWOULDBLOCK)
    static let permissionDenied = SyscallError(rawValue: EACCES)
    static let notPermitted = SyscallError(rawValue: EPERM)
    static let notDirectory = SyscallError(rawValue: ENOTDIR)
    static let isDirectory = SyscallError(rawValue: EISDIR)
    static let tooManySymbolicLinks = SyscallError(rawValue: ELOOP)
    static let readOnlyFileSystem = SyscallError(rawValue: EROFS)

    /// True for the errors that mean "no room left": the caller gets `.diskFull`.
    var isOutOfSpace: Bool { self == .noSpace || self == .quotaExceeded }

    var description: String { String(cString: strerror(rawValue)) }
}

/// A file descriptor the cache opened, closed when it goes out of scope (on every path) unless
/// ``release()`` hands it on.
package struct OpenFile: ~Copyable, Sendable {
    /// The descriptor, open for as long as this value lives: a copy of it must not be used
    /// after the value is consumed or goes out of scope.
    package let fd: Int32

    init(_ fd: Int32) { self.fd = fd }

    /// What an open returned, the descriptor owned from here.
    static func owning(_ opened: Result<Int32, SyscallError>) -> Result<OpenFile, SyscallError> {
        switch opened {
        case .success(let fd): .success(OpenFile(fd))
        case .failure(let error): .failure(error)
        }
    }

    /// Runs `body` with the descriptor, which stays open while it runs.
    borrowing func withFD<R: ~Copyable>(_ body: (Int32) throws -> R) rethrows -> R { try body(fd) }

    /// The descriptor, for an owner that will close it.
    package consuming func release() -> Int32 {
        let fd = self.fd
        discard self
        return fd
    }

    deinit { Syscall.close(fd) }
}

/// An open file descriptor shared by reference, closed when the last reference goes. The
/// journal's descriptor is shared this way so that a group-commit fsync running while
/// compaction swaps in a new journal never fsyncs (or closes) a number that has meanwhile been
/// reused. (Not swift-system's `FileDescriptor`, a plain number its owner closes.)
final class SharedDescriptor: Sendable {
    let fd: Int32
    init(_ fd: Int32) { self.fd = fd }
    /// Shares `file`, which this owns from here.
    convenience init(_ file: consuming OpenFile) { self.init(file.release()) }
    deinit { Syscall.close(fd) }
}

import Foundation

/// A buffer an entry file was read into, freed when it goes out of scope (on every path), or
/// handed to a `Data` whole with ``data(_:)``.
struct EntryBytes: ~Copyable {
    private let buffer: UnsafeMutableRawBufferPointer

    init(_ buffer: UnsafeMutableRawBufferPointer) { self.buffer = buffer }

    /// Runs `body` with the bytes, which stay allocated while it runs (and only then: no
    /// pointer to them may outlive it).
    borrowing func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(buffer))
    }

    /// Runs `body` with the buffer to fill (a read into it), which stays allocated while it runs.
    borrowing func withBufferToFill<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        try body(buffer)
    }

    /// The bytes in `range` as a `Data` that frees the whole buffer when it goes: no copy.
    consuming func data(_ range: Range<Int>) -> Data {
        let buffer = self.buffer
        discard self
        guard !range.isEmpty else {
            buffer.deallocate()
            return Data()
        }
        let start = buffer.baseAddress! + range.lowerBound
        let offset = range.lowerBound
        return Data(bytesNoCopy: start, count: range.count, deallocator: .custom { pointer, _ in (pointer - offset).deallocate() })
    }

    deinit { buffer.deallocate() }
}

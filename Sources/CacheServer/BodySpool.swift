import DiskCache
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore

/// A response body on its way into the cache: written to a file in the cache's `tmp/` as it
/// passes through, at most 1 MiB held in memory, then taken into the store whole.
final class BodySpool: @unchecked Sendable { // used by one task at a time
    let url: URL
    private let fd: Int32
    private var pending: [UInt8] = []
    private var written: Int64 = 0
    private static let flushSize = 1 << 20

    /// A new file in `directory`, on the I/O threads.
    static func create(in directory: URL) async throws -> BodySpool {
        try await BlockingIOPool.shared.run {
            let url = directory.appendingPathComponent("server-\(UUID().uuidString)")
            let fd = open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard fd >= 0 else { throw SpoolError(action: "create", path: url.path, errno: errno) }
            return BodySpool(url: url, fd: fd)
        }
    }

    private init(url: URL, fd: Int32) {
        self.url = url
        self.fd = fd
    }

    deinit { close(fd) }

    /// Adds `buffer`; writes to the file (on the I/O threads) once 1 MiB has gathered.
    func append(_ buffer: ByteBuffer) async throws {
        pending.append(contentsOf: buffer.readableBytesView)
        if pending.count >= Self.flushSize { try await flush() }
    }

    /// Writes what is gathered.
    func flush() async throws {
        guard !pending.isEmpty else { return }
        let bytes = pending
        let offset = written
        pending.removeAll(keepingCapacity: true)
        try await BlockingIOPool.shared.run { [fd, url] in
            var done = 0
            while done < bytes.count {
                let count = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, $0.count - done, off_t(offset) + off_t(done)) }
                if count < 0 {
                    if errno == EINTR { continue }
                    throw SpoolError(action: "write", path: url.path, errno: errno)
                }
                done += count
            }
        }
        written += Int64(bytes.count)
    }

    /// Deletes the file (after the store took it, or when the body is not stored).
    func remove() async {
        _ = try? await BlockingIOPool.shared.run { [url] in unlink(url.path) }
    }
}

struct SpoolError: Error, CustomStringConvertible {
    let action: String
    let path: String
    let errno: Int32
    var description: String { "cannot \(action) \(path): \(String(cString: strerror(errno)))" }
}

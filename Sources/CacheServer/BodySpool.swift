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

/// A response body on its way into the cache, gathered as it passes through: in memory while it
/// is small (then stored as one record, its body inline), else written to a file in the cache's
/// `tmp/` with at most 1 MiB held in memory, and taken into the store whole.
final class BodySpool: @unchecked Sendable { // used by one task at a time
    private let directory: URL
    private var file: (url: URL, fd: Int32)?
    private var pending: [UInt8] = []
    private var written: Int64 = 0
    /// Bodies up to this size never touch a temporary file.
    static let memoryLimit = 256 << 10
    private static let flushSize = 1 << 20

    /// What was gathered.
    enum Body {
        case bytes(Data)
        case file(URL)
    }

    init(in directory: URL) {
        self.directory = directory
    }

    deinit {
        if let file { close(file.fd) }
    }

    /// Adds `buffer`; past the memory limit, writes to the file (on the I/O threads) once 1 MiB has gathered.
    func append(_ buffer: ByteBuffer) async throws {
        pending.append(contentsOf: buffer.readableBytesView)
        if file == nil, pending.count > Self.memoryLimit { try await createFile() }
        if file != nil, pending.count >= Self.flushSize { try await flush() }
    }

    /// The whole body: its bytes, or (flushed) the file holding it.
    func finish() async throws -> Body {
        guard let file else { return .bytes(Data(pending)) }
        try await flush()
        return .file(file.url)
    }

    private func createFile() async throws {
        let directory = self.directory
        file = try await BlockingIOPool.shared.run {
            let url = directory.appendingPathComponent("server-\(UUID().uuidString)")
            let fd = open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard fd >= 0 else { throw SpoolError(action: "create", path: url.path, errno: errno) }
            return (url, fd)
        }
    }

    private func flush() async throws {
        guard let file, !pending.isEmpty else { return }
        let bytes = pending
        let offset = written
        pending.removeAll(keepingCapacity: true)
        try await BlockingIOPool.shared.run {
            var done = 0
            while done < bytes.count {
                let count = bytes.withUnsafeBytes { pwrite(file.fd, $0.baseAddress! + done, $0.count - done, off_t(offset) + off_t(done)) }
                if count < 0 {
                    if errno == EINTR { continue }
                    throw SpoolError(action: "write", path: file.url.path, errno: errno)
                }
                done += count
            }
        }
        written += Int64(bytes.count)
    }

    /// Deletes the file, if there is one (after the store took it, or when the body is not stored).
    func remove() async {
        guard let url = file?.url else { return }
        _ = try? await BlockingIOPool.shared.run { unlink(url.path) }
    }
}

struct SpoolError: Error, CustomStringConvertible {
    let action: String
    let path: String
    let errno: Int32
    var description: String { "cannot \(action) \(path): \(String(cString: strerror(errno)))" }
}

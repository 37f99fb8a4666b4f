#if Server
import DiskCache
import HTTPCache
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
/// `tmp/` with at most 1 MiB held in memory, hashed as it is written (so that the store need
/// not read the file again), and taken into the store whole. The pieces are kept
/// as they came from the origin (NIO's buffers, shared with what goes to the client), not
/// copied into one growing array: that copy, and the fresh megabyte (page faults) each flush
/// made it take, were a third of a 1 MB miss's CPU.
final class BodySpool: @unchecked Sendable { // used by one task at a time
    private let cache: HTTPResponseStore
    private var file: (url: URL, fd: Int32, checksum: StreamingChecksum)?
    private var pieces: [ByteBuffer] = []
    private var pendingBytes = 0
    private var written: Int64 = 0
    /// Bodies up to this size never touch a temporary file.
    static let memoryLimit = 256 << 10
    private static let flushSize = 1 << 20

    /// What was gathered.
    enum Body {
        case bytes(Data)
        case file(URL, DiskCache.WrittenBody)
    }

    /// Nil for a cache without a disk tier, which a large body could not be spooled into.
    init?(for cache: HTTPResponseStore) {
        guard cache.hasDiskTier else { return nil }
        self.cache = cache
    }

    deinit {
        if let file { close(file.fd) }
    }

    /// Adds `buffer`; past the memory limit, writes to the file (on the I/O threads) once 1 MiB has gathered.
    func append(_ buffer: ByteBuffer) async throws {
        guard buffer.readableBytes > 0 else { return }
        pieces.append(buffer)
        pendingBytes += buffer.readableBytes
        if file == nil, pendingBytes > Self.memoryLimit { try await createFile() }
        if file != nil, pendingBytes >= Self.flushSize { try await flush() }
    }

    /// The whole body: its bytes, or (flushed) the file holding it.
    func finish() async throws -> Body {
        guard let file else {
            var bytes = Data(capacity: pendingBytes)
            for piece in pieces { piece.withUnsafeReadableBytes { bytes.append(contentsOf: $0) } }
            return .bytes(bytes)
        }
        try await flush()
        return .file(file.url, DiskCache.WrittenBody(size: written, checksum: file.checksum.digest))
    }

    private func createFile() async throws {
        let cache = self.cache
        let made = try await BlockingIOPool.shared.run { try cache.makeTemporaryFile() }
        guard let checksum = StreamingChecksum() else {
            close(made.fileDescriptor)
            _ = unlink(made.url.path)
            throw DiskCacheError(code: .ioFailure, message: "Could not allocate a checksum state for a response body")
        }
        file = (made.url, made.fileDescriptor, checksum)
    }

    private func flush() async throws {
        guard let file, pendingBytes > 0 else { return }
        let pieces = self.pieces
        let offset = written, count = pendingBytes
        self.pieces = []
        pendingBytes = 0
        try await BlockingIOPool.shared.run {
            var position = offset
            let path = file.url.path
            for piece in pieces {
                try piece.withUnsafeReadableBytes { bytes in
                    try DiskCache.write(bytes, toTemporaryFile: file.fd, at: position, path: path)
                    file.checksum.update(bytes)
                }
                position += Int64(piece.readableBytes)
            }
        }
        written += Int64(count)
    }

    /// Deletes the file, if there is one (after the store took it, or when the body is not stored).
    func remove() async {
        guard let url = file?.url else { return }
        _ = try? await BlockingIOPool.shared.run { unlink(url.path) }
    }
}
#endif

import Foundation
import DiskCache
import DiskCacheLocking
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A body in a file, open: one a streamed response is written to, or a stored response's body
/// held open for ``CachingHTTPClient/download(for:chunkSize:)``.
///
/// Any number of readers read it at once, each at its own offset (`pread`), however the cache
/// changes meanwhile: the descriptor keeps the bytes. When the last reference goes the
/// descriptor is closed, and a file this object created is removed (a file already moved into
/// the cache has no name of ours left to remove). Thread-safe.
final class BodyFile: Sendable {
    /// The file's name while it is ours to remove; `nil` for a stored body held open.
    let url: URL?
    private let fd: Int32
    private let length: PthreadMutex<Int64>

    private init(url: URL?, fd: Int32, size: Int64) {
        self.url = url
        self.fd = fd
        self.length = PthreadMutex(size)
    }

    deinit {
        close(fd)
        if let url { unlink(url.path) }
    }

    /// A new empty file (``HTTPURLCache/makeTemporaryFile()``).
    static func create(for cache: HTTPURLCache) throws -> BodyFile {
        let (url, fd) = try cache.responseStore.makeTemporaryFile()
        return BodyFile(url: url, fd: fd, size: 0)
    }

    /// The body of the record `recordKey` held open, with the metadata stored with these very
    /// bytes; `nil` when there is no such record. The body is checked against its checksum
    /// first (when the cache checks checksums), reading it once.
    static func holding(_ recordKey: String, in records: TieredCache) async throws -> (BodyFile, [String: String])? {
        try await records.withFile(for: recordKey) { file in
            let copy = dup(file.fileDescriptor)
            guard copy >= 0 else {
                throw DiskCacheError(code: .ioFailure, message: "Could not hold a stored body open", path: file.url.path, errno: errno)
            }
            return (BodyFile(url: nil, fd: copy, size: file.size), file.metadata)
        }
    }

    /// The most one `pread` is asked for: Darwin refuses more than `INT_MAX` bytes (EINVAL), and
    /// Linux transfers at most about 2 GiB a call.
    private static let largestTransfer = 1 << 30

    /// Bytes written so far (a held body's size).
    var size: Int64 { length.withLock { $0 } }

    /// Appends `bytes`. Called by one writer, before the file is read.
    func append(_ bytes: Data) throws {
        try length.withLock { length in
            try bytes.withUnsafeBytes { raw in
                try DiskCache.write(raw, toTemporaryFile: fd, at: length, path: url?.path ?? "a response body")
            }
            length += Int64(bytes.count)
        }
    }

    /// The whole body in memory.
    func readAll() throws -> Data {
        try read(at: 0, count: Int(size))
    }

    /// Up to `count` bytes from `offset` (fewer only at the end).
    func read(at offset: Int64, count: Int) throws -> Data {
        var data = Data(count: count)
        let got = try data.withUnsafeMutableBytes { raw -> Int in
            var done = 0
            while done < count {
                let read = pread(fd, raw.baseAddress! + done, min(count - done, Self.largestTransfer), off_t(offset) + off_t(done))
                if read < 0 {
                    if errno == EINTR { continue }
                    throw DiskCacheError(code: .ioFailure, message: "Could not read a response body", path: url?.path, errno: errno)
                }
                if read == 0 { break }
                done += read
            }
            return done
        }
        if got < count { data.count = got }
        return data
    }

    /// The body as chunks of `chunkSize` bytes, read on the caches' I/O threads as they are
    /// asked for; each iteration reads from the start. The chunks keep this object alive.
    func chunks(chunkSize: Int) -> HTTPBodyStream {
        let chunkSize = max(1, chunkSize)
        return HTTPBodyStream { [self] in
            var offset: Int64 = 0
            return {
                try Task.checkCancellation()
                let remaining = self.size - offset
                guard remaining > 0 else { return nil }
                let count = Int(min(Int64(chunkSize), remaining))
                let start = offset
                let chunk = try await BlockingIOPool.shared.run { try self.read(at: start, count: count) }
                offset += Int64(chunk.count)
                return chunk.isEmpty ? nil : chunk
            }
        }
    }
}

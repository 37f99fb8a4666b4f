public import Foundation
import DiskCacheLocking
import MemoryCache
#if canImport(Glibc)
import Glibc
#endif

// Large bodies through the two tiers: stored to disk without loading them, read from disk as
// chunks or as a file. The memory tier never takes a body stored this way (the first ordinary
// read of a small one promotes it, as for any disk hit); a memory-only record is handed out
// from memory.

extension TieredCache {
    /// Stores the contents of the file at `url` for `key` (see
    /// ``DiskCache/store(contentsOf:for:metadata:expires:transfer:)-5h4kl``): on disk without
    /// loading it, and the memory tier drops the key. With `.allowedInMemoryOnly`, or without a
    /// disk tier, the file is read into the memory tier instead, and left where it is whatever
    /// `transfer` says (the memory tier may not keep it).
    public func store(contentsOf url: URL, for key: String, metadata: [String: String] = [:], expires: Date? = nil,
                      transfer: DiskCache.FileTransfer = .copy, policy: StoragePolicy = .allowed) throws {
        try store(contentsOf: url, for: key, metadata: metadata, expires: expires, transfer: transfer, policy: policy, written: nil)
    }

    /// ``store(contentsOf:for:metadata:expires:transfer:policy:)-5brdm``, with the
    /// disk tier's `written` (``DiskCache/WrittenBody``).
    package func store(contentsOf url: URL, for key: String, metadata: [String: String], expires: Date?,
                       transfer: DiskCache.FileTransfer, policy: StoragePolicy, written: DiskCache.WrittenBody?) throws {
        guard policy == .allowed, let disk else {
            let data = policy == .notAllowed ? Data() : try Self.readWholeFile(url)
            try stripe(key).mutex.withLock { _ in
                try store(Record(data: data, metadata: metadata, created: now(), expires: expires), for: key, policy: policy)
            }
            return
        }
        // The copy and its hash run without the key's lock (they may take seconds); the memory
        // tier drops the key before and again after, so that a read that promoted the earlier
        // value meanwhile does not keep it.
        stripe(key).mutex.withLock { _ in removeFromMemory(key) }
        defer { stripe(key).mutex.withLock { _ in removeFromMemory(key) } }
        try disk.store(contentsOf: url, for: key, metadata: metadata, expires: expires, transfer: transfer, written: written)
    }

    /// Stores the chunks `chunks` yields as `key`'s value (see
    /// ``DiskCache/store(_:for:metadata:expires:)-(Chunks,_,_,_)``): written to disk a chunk at a
    /// time, committed when the sequence ends; the memory tier drops the key at the commit.
    /// With `.allowedInMemoryOnly`, or without a disk tier, the chunks are gathered in memory.
    public func store<Chunks: AsyncSequence>(_ chunks: Chunks, for key: String, metadata: [String: String] = [:],
                                             expires: Date? = nil, policy: StoragePolicy = .allowed) async throws
        where Chunks.Element: DataProtocol & Sendable {
        guard policy == .allowed, let disk else {
            var data = Data()
            if policy != .notAllowed { for try await chunk in chunks { data.append(contentsOf: chunk) } }
            try await store(data, for: key, metadata: metadata, expires: expires, policy: policy)
            return
        }
        let writer = try await disk.makeWriter(for: key, metadata: metadata, expires: expires)
        do {
            for try await chunk in chunks { try await writer.append(chunk) }
            // The commit and the memory tier's drop under the key's lock, as any store of the key.
            try await BlockingIOPool.shared.run {
                try self.stripe(key).mutex.withLock { _ in
                    self.removeFromMemory(key)
                    try writer.commit()
                }
            }
        } catch {
            writer.abort()
            throw error
        }
    }

    /// `key`'s value as chunks: a memory-tier record from memory, else read from disk a chunk at
    /// a time (see ``DiskCache/chunks(for:chunkSize:)``, which says when a damaged body is
    /// noticed). Counted as a memory hit, a disk hit or a miss. Nothing is promoted into memory.
    public func chunks(for key: String, chunkSize: Int = 1 << 20) async throws -> DiskCache.Chunks? {
        try DiskCache.checkChunkSize(chunkSize)
        dropWhatOthersChanged()
        if let record = memoryRecord(for: key) { return DiskCache.Chunks(record.data, metadata: record.metadata, chunkSize: chunkSize) }
        let chunks = try await disk?.chunks(for: key, chunkSize: chunkSize)
        count(hit: chunks != nil)
        return chunks
    }

    /// `key`'s value checked whole and handed out as an open file or a copy (see
    /// ``DiskCache/checkedBody(for:copying:)``); a memory-tier record as its bytes. Counted as
    /// ``chunks(for:chunkSize:)`` counts (a read that gave up rather than wait for the disk,
    /// with `pageCacheOnly`, counts nothing). Blocking: call it on an I/O thread, or with `pageCacheOnly`.
    package func checkedBody(for key: String, copying: DiskCache.BodyCopying? = nil,
                             pageCacheOnly: DiskCache.PageCacheOnly? = nil) throws -> DiskCache.CheckedBody? {
        dropWhatOthersChanged()
        if let record = memoryRecord(for: key) {
            return DiskCache.CheckedBody(source: .bytes(record.data), size: Int64(record.data.count), metadata: record.metadata)
        }
        let body = try disk?.checkedBody(for: key, copying: copying, pageCacheOnly: pageCacheOnly)
        if body != nil || pageCacheOnly?.gaveUp != true { count(hit: body != nil) }
        return body
    }

    /// Calls `body` with `key`'s value as a file (see ``DiskCache/withFile(for:_:)``):
    /// the disk tier's file; for a record only the memory tier holds, a temporary file with its
    /// bytes, removed when `body` returns. Nil, and `body` is not called, on a miss.
    // Disfavoured so that in an async context a plain closure picks the async form (whose
    // preparation runs on the I/O threads), not this blocking one; elsewhere this is the only fit.
    @_disfavoredOverload
    public func withFile<R>(for key: String, _ body: (DiskCache.File) throws -> R) throws -> R? {
        if let disk, let result = try disk.withFile(for: key, body) {
            count(hit: true)
            return result
        }
        dropWhatOthersChanged()
        guard let record = memoryOnlyRecord(for: key) else { return nil }
        let file = try Self.temporaryFile(holding: record)
        defer { Self.remove(file) }
        return try body(file)
    }

    /// ``withFile(for:_:)`` with the file prepared on the cache's I/O threads and `body`
    /// run on the caller's isolation.
    public func withFile<R>(for key: String, isolation: isolated (any Actor)? = #isolation,
                            _ body: (DiskCache.File) async throws -> R) async throws -> R? {
        if let disk, let result = try await disk.withFile(for: key, body) {
            count(hit: true)
            return result
        }
        dropWhatOthersChanged()
        guard let record = memoryOnlyRecord(for: key) else { return nil }
        let file = try await BlockingIOPool.shared.run { try Self.temporaryFile(holding: record) }
        defer { Self.remove(file) }
        return try await body(file)
    }

    /// ``store(contentsOf:for:metadata:expires:transfer:policy:)`` on the cache's I/O threads.
    public func store(contentsOf url: URL, for key: String, metadata: [String: String] = [:], expires: Date? = nil,
                      transfer: DiskCache.FileTransfer = .copy, policy: StoragePolicy = .allowed) async throws {
        try await BlockingIOPool.shared.run {
            try self.store(contentsOf: url, for: key, metadata: metadata, expires: expires, transfer: transfer, policy: policy)
        }
    }

    /// After the disk tier missed: the record only the memory tier holds (counted as a memory
    /// hit), or nil (counted as a miss).
    private func memoryOnlyRecord(for key: String) -> Record? {
        guard let record = memory.value(for: key), record.expires.map({ $0 > now() }) ?? true else {
            count(hit: false)
            return nil
        }
        shared.state.withLock { $0.statistics.memoryHits += 1 }
        return record
    }

    private func count(hit: Bool) {
        shared.state.withLock { if hit { $0.statistics.diskHits += 1 } else { $0.statistics.misses += 1 } }
    }

    /// The whole file at `url` (a regular file, no FIFO waited on), for a memory-only store.
    private static func readWholeFile(_ url: URL) throws -> Data {
        let path = url.path
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            throw DiskCacheError(code: code == ENOENT ? .notFound : code == EACCES ? .permissionDenied : .ioFailure,
                                 message: "Could not open the file to store", path: path, errno: code)
        }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw DiskCacheError(code: .invalidArgument, message: "Only a regular file can be stored", path: path)
        }
        do {
            return try handle.readToEnd() ?? Data()
        } catch {
            throw DiskCacheError(code: .ioFailure, message: "Could not read the file to store: \(error)", path: path)
        }
    }

    /// A file in the system's temporary directory holding `record`'s body, open for reading, mode 0600.
    private static func temporaryFile(holding record: Record) throws -> DiskCache.File {
        let data = record.data
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("TieredCache-\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: url.path, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw DiskCacheError(code: .ioFailure, message: "Could not write a temporary file for a memory-only record", path: url.path)
        }
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            try? FileManager.default.removeItem(at: url)
            throw DiskCacheError(code: .ioFailure, message: "Could not open a temporary file", path: url.path, errno: errno)
        }
        return DiskCache.File(url: url, fileDescriptor: fd, size: Int64(data.count), metadata: record.metadata)
    }

    private static func remove(_ file: DiskCache.File) {
        close(file.fileDescriptor)
        try? FileManager.default.removeItem(at: file.url)
    }
}

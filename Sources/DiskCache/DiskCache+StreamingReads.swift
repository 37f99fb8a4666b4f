public import Foundation
import CDiskCacheSupport
import DiskCacheLocking
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Reading bodies that need not fit in memory: as chunks read as they are asked for, or as a
// file handed out for the length of a closure; and the check of a whole body file against its
// entry (type, size, checksum) that the server's reads and the confirmation of damage make.
extension DiskCache {
    /// Calls `body` with `key`'s value as a file, and returns what it returns; nil (and `body`
    /// is not called) on a miss, an expired entry or an entry that fails its checks.
    ///
    /// The file stays valid for the whole call even if the entry is replaced, removed or evicted
    /// meanwhile. With ``Configuration/verifiesChecksums`` (the default) the file's bytes were
    /// checked against the body's checksum before `body` is called: a mismatch is a miss, and the
    /// entry is removed, as for ``data(for:)-7qmtl``.
    ///
    /// #### Implementation details
    /// A second name for the `.body` file in `tmp/` (`linkat(2)`, no bytes copied), removed when
    /// `body` returns (or at the next open, if the process stops first). An inline body is
    /// written to a new file there instead. The check reads the file once, 1 MiB at a time.
    // Disfavoured so that in an async context a plain closure picks the async form (whose
    // preparation runs on the I/O threads), not this blocking one; elsewhere this is the only fit.
    @_disfavoredOverload
    public func withFile<R>(for key: String, _ body: (File) throws -> R) throws -> R? {
        guard let handout = try openHandout(for: key) else { return nil }
        defer { closeHandout(handout) }
        return try body(handout)
    }

    /// ``withFile(for:_:)`` with the file prepared on the cache's I/O threads and `body` run
    /// on the caller's isolation (an actor's code may pass a closure that uses its state).
    public func withFile<R>(for key: String, isolation: isolated (any Actor)? = #isolation,
                            _ body: (File) async throws -> R) async throws -> R? {
        guard let handout = try await BlockingIOPool.shared.run({ try self.openHandout(for: key) }) else { return nil }
        defer { closeHandout(handout) }
        return try await body(handout)
    }

    private func closeHandout(_ handout: File) {
        Syscall.close(handout.fileDescriptor)
        _ = layout.directory.unlink(handout.url.path)
    }

    /// Prepares the file ``withFile(for:_:)`` hands out: a second name in `tmp/` for the entry's
    /// `.body` file, checked against the entry; or, for an inline body, a new file holding it.
    private func openHandout(for key: String) throws(DiskCacheError) -> File? {
        try openBody(for: key) { hash, entry, meta, inline throws(DiskCacheError) -> ReadOutcome<File> in
            let handout = temporaryFile("handout")
            func opened(_ fd: Int32) -> ReadOutcome<File> {
                .found(File(url: URL(fileURLWithPath: handout), fileDescriptor: fd, size: entry.size, metadata: meta.metadata))
            }
            if let inline {
                let written = try createTemporaryFile(handout).withFD { fd in
                    inline.withUnsafeBytes { Syscall.pwriteAll(fd, $0, at: 0) }
                }
                // Handed out read-only, as a body file is.
                switch written.flatMap({ layout.directory.open(handout, FileIO.readFlags) }) {
                case .success(let readOnly): return opened(readOnly.release())
                case .failure(let error):
                    _ = layout.directory.unlink(handout)
                    throw DiskCacheError.io(error, "write the handed-out file", path: handout)
                }
            }
            let body = layout.bodyFile(hash, slot: entry.slot)
            var linked = layout.directory.link(body, handout)
            if case .failure(let error) = linked, error == .tooManySymbolicLinks || error == .notDirectory
                                                  || error == .noSuchFileOrDirectory, !layout.directory.lstat(layout.temp).isDirectory {
                _ = restoreDirectory(layout.temp)
                linked = layout.directory.link(body, handout)
            }
            switch linked {
            case .success: break
            case .failure(.noSuchFileOrDirectory): return missing(hash, entry)
            case .failure(let error): throw DiskCacheError.io(error, "link the body into tmp/", path: handout)
            }
            guard isCurrent(hash, entry) else {
                _ = layout.directory.unlink(handout)
                return .replaced
            }
            let file: OpenFile
            switch layout.directory.open(handout, FileIO.readFlags) {
            case .success(let value): file = value
            case .failure(let error):
                _ = layout.directory.unlink(handout)
                return error == .tooManySymbolicLinks || FileIO.isNotAFile(error) ? .damaged : .unavailable
            }
            let fd = file.fd  // for the closure below, which may not capture `file`
            let verdict: ReadOutcome<File>
            switch Syscall.fstat(fd) {
            case .success(let info) where info.st_mode & S_IFMT != S_IFREG || Int64(info.st_size) != entry.size:
                verdict = .damaged
            case .success where !configuration.verifiesChecksums:
                return opened(file.release())
            case .success:
                switch Result(catching: { () throws(DiskCacheError) in try Self.hashFile(fd, path: handout) }) {
                case .success(let (_, checksum)) where checksum == entry.checksum: return opened(file.release())
                case .success: verdict = .damaged
                case .failure: verdict = .unavailable
                }
            case .failure:
                verdict = .unavailable
            }
            _ = consume file  // closed here, not earlier: `fd` was in use until now
            _ = layout.directory.unlink(handout)
            return verdict
        }
    }

    /// `key`'s value as a sequence of chunks of at most `chunkSize` bytes (1 byte to 1 GiB), read
    /// from disk as they are asked for; nil on a miss or an expired entry. Each chunk is read on
    /// the cache's I/O threads; a task cancelled between chunks gets `CancellationError` from
    /// the next one.
    ///
    /// **When a reader can tell the body is damaged.** The body's checksum covers the whole
    /// body, so it can only be checked once the last byte has been read: the sequence delivers
    /// the final chunk only after that check passed. A body that fails it (or a file shorter
    /// than its entry records) ends the sequence with ``DiskCacheError/Code/corruptEntry``
    /// *instead of* the final chunk, and the entry is removed. So a consumer that reaches the
    /// end without an error received exactly the bytes stored; one that gets the error must
    /// discard what it received. (A body that fits in one chunk is checked before it is
    /// delivered.) Without ``Configuration/verifiesChecksums`` only the length is checked.
    ///
    /// The chunks come from the file that held the value when this call was made: an entry
    /// replaced or evicted meanwhile does not change them.
    public func chunks(for key: String, chunkSize: Int = 1 << 20) async throws -> Chunks? {
        try Self.checkChunkSize(chunkSize)
        return try await BlockingIOPool.shared.run { try self.openChunks(for: key, chunkSize: chunkSize) }
    }

    /// Throws `invalidArgument` unless `chunkSize` is 1 byte to 1 GiB.
    static func checkChunkSize(_ chunkSize: Int) throws(DiskCacheError) {
        guard chunkSize > 0 && chunkSize <= 1 << 30 else {
            throw DiskCacheError(code: .invalidArgument, message: "A chunk size must be 1 byte to 1 GiB, not \(chunkSize)")
        }
    }

    /// Opens `entry`'s body file to read: see ``ReadOutcome/init(opening:)``; a missing file
    /// is a replacement instead of damage if the index moved on.
    func openBodyFile(_ hash: KeyHash, _ entry: IndexEntry) -> ReadOutcome<OpenFile> {
        switch layout.openEntryFileToRead(hash, slot: entry.slot, body: true) {
        case .failure(.noSuchFileOrDirectory): return missing(hash, entry)
        case let result: return ReadOutcome(opening: result)
        }
    }

    /// Opens the reader behind ``chunks(for:chunkSize:)``: the body file, open (or, inline,
    /// the body already in memory).
    private func openChunks(for key: String, chunkSize: Int) throws(DiskCacheError) -> Chunks? {
        try openBody(for: key) { hash, entry, meta, inline throws(DiskCacheError) -> ReadOutcome<Chunks> in
            if let inline { return .found(Chunks(inline, metadata: meta.metadata, chunkSize: chunkSize)) }
            let file: OpenFile
            switch openBodyFile(hash, entry) {
            case .found(let opened): file = opened
            case let other: return other.withoutValue()
            }
            guard isCurrent(hash, entry) else { return .replaced }
            guard let pieces = BodyPieces(file, size: entry.size, checksum: configuration.verifiesChecksums ? entry.checksum : nil) else {
                return .unavailable
            }
            return .found(Chunks(ChunkReader(cache: self, hash: hash, key: key, entry: entry, metadata: meta.metadata,
                                              pieces: pieces, chunkSize: chunkSize)))
        }
    }

    /// Checks the body file open as `fd`, `hash`'s in `entry`'s slot, against `entry`: its type
    /// and size, then (with checksums on) its XXH3-64, hashed from its mapping when the cache
    /// keeps body files mapped (``MappedBodies``), else read through a 64 KiB buffer; either
    /// way a body of any size is checked in bounded memory. A body hashed from its mapping is
    /// copied into memory as it is hashed when `copying` allows it (``BodyCopying``).
    ///
    /// Found: a regular file of the entry's size whose bytes match its checksum (when checksums
    /// are verified), with its copy when one was made (of the entry's size). Unavailable: it could not be read, so nothing is known of it
    /// (with `pageCacheOnly`, one that would have waited for the disk is noted there).
    func checkBodyFile(_ fd: Int32, _ hash: KeyHash, _ entry: IndexEntry, copying: BodyCopying? = nil,
                       pageCacheOnly: PageCacheOnly? = nil) -> ReadOutcome<CopiedBody?> {
        guard case .success(let info) = Syscall.fstat(fd) else { return .unavailable }
        guard info.st_mode & S_IFMT == S_IFREG, Int64(info.st_size) == entry.size else { return .damaged }
        guard configuration.verifiesChecksums else { return .found(nil) }
        var checksum: UInt64 = 0
        let withoutWaiting: Int32 = pageCacheOnly == nil ? 0 : 1
        if let mapping = mappedBodies.mapping(of: fd, info, size: entry.size, path: { layout.bodyFile(hash, slot: entry.slot) }) {
            let copy = copying?.allocate(entry.size)  // freed on every path that does not hand it out
            let result = copy?.withBytes { cdiskcache_copy_hash_mapped(mapping.bytes, mapping.size, $0, &checksum, withoutWaiting) }
                ?? cdiskcache_hash_mapped(mapping.bytes, mapping.size, &checksum, withoutWaiting)
            let error = result == 0 ? 0 : errno
            if result == 0, checksum == entry.checksum { return .found(copy) }
            // EFAULT: cut short since it was mapped. EAGAIN: not all in the page cache, for a
            // read that must not wait for the disk. ENOMEM: no memory for the hash's state.
            if result != 0, error != EFAULT {
                pageCacheOnly?.note(SyscallError(rawValue: error))
                return .unavailable
            }
            mappedBodies.drop(mapping.id)
            return .damaged
        }
        let read = cdiskcache_hash_file(fd, 0, Int(entry.size), &checksum, withoutWaiting)
        if read < 0 {
            pageCacheOnly?.note(SyscallError.current)
            return .unavailable
        }
        return read == entry.size && checksum == entry.checksum ? .found(nil) : .damaged
    }

    /// A stored body read chunk by chunk (see ``DiskCache/chunks(for:chunkSize:)``). It can be
    /// iterated once: its iterators share one reader, so a second one continues where the first
    /// stopped (or yields nothing after the end).
    public struct Chunks: AsyncSequence, Sendable {
        public typealias Element = Data
        private let reader: ChunkReader

        fileprivate init(_ reader: ChunkReader) { self.reader = reader }

        /// The chunks of a body already in memory, `chunkSize` bytes each (the last may be
        /// shorter; an empty body is one empty chunk): what a memory tier hands out in place
        /// of a file's chunks.
        public init(_ bytes: Data, metadata: [String: String] = [:], chunkSize: Int = 1 << 20) {
            self.init(ChunkReader(bytes: bytes, metadata: metadata, chunkSize: Swift.max(1, chunkSize)))
        }

        /// The body's size in bytes.
        public var size: Int64 { reader.size }

        /// The metadata stored with the value, read together with the body's file (so it is the
        /// metadata of these very bytes, whatever was stored for the key since).
        public var metadata: [String: String] { reader.metadata }

        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(reader: reader) }

        public struct AsyncIterator: AsyncIteratorProtocol {
            fileprivate let reader: ChunkReader

            public mutating func next() async throws -> Data? {
                if let chunk = reader.nextInMemory() { return chunk }
                guard !reader.isFinished else { return nil }
                return try await BlockingIOPool.shared.run { [reader] in try reader.next() }
            }
        }
    }

    /// The state behind ``Chunks``: an open body file, how far it was read and the checksum so
    /// far; or an inline body already in memory.
    fileprivate final class ChunkReader: Sendable {
        let size: Int64
        let metadata: [String: String]
        private let chunkSize: Int
        private let source: Source
        private let state: PthreadMutex<State>

        private enum Source {
            case memory(Data)
            case file(cache: DiskCache, hash: KeyHash, key: String, entry: IndexEntry)
        }

        private struct State {
            /// The body file being read (nil for a body in memory, and once finished).
            var pieces: BodyPieces?
            /// How far a body in memory was handed out.
            var offset: Int64 = 0
            var isFinished = false
        }

        init(bytes: Data, metadata: [String: String], chunkSize: Int) {
            size = Int64(bytes.count)
            self.metadata = metadata
            self.chunkSize = chunkSize
            source = .memory(bytes)
            state = PthreadMutex(State())
        }

        init(cache: DiskCache, hash: KeyHash, key: String, entry: IndexEntry, metadata: [String: String],
             pieces: BodyPieces, chunkSize: Int) {
            size = entry.size
            self.metadata = metadata
            self.chunkSize = chunkSize
            source = .file(cache: cache, hash: hash, key: key, entry: entry)
            state = PthreadMutex(State(pieces: pieces))
        }

        deinit {
            state.withLock { $0.pieces?.close() }
        }

        var isFinished: Bool { state.withLock { $0.isFinished } }

        /// The next chunk of an in-memory body (no I/O, so no hop to the pool); nil otherwise.
        func nextInMemory() -> Data? {
            guard case .memory(let bytes) = source else { return nil }
            return state.withLock { state in
                guard !state.isFinished else { return nil }
                let start = Int(state.offset), end = min(bytes.count, start + chunkSize)
                state.offset = Int64(end)
                if end == bytes.count { state.isFinished = true }
                // An empty body is one empty chunk: a sequence that ends without one would look
                // like a miss to a consumer that counts chunks.
                return bytes.subdata(in: bytes.startIndex + start..<bytes.startIndex + end)
            }
        }

        /// Reads the next chunk of the file; checks the whole body before returning the last one.
        func next() throws -> Data? {
            guard case .file(let cache, let hash, let key, let entry) = source else { return nil }
            return try state.withLock { state throws(DiskCacheError) -> Data? in
                guard !state.isFinished, var pieces = state.pieces else { return nil }
                defer { state.pieces = pieces }
                var chunk = Data(count: Int(min(Int64(chunkSize), size - pieces.offset)))
                switch chunk.withUnsafeMutableBytes({ pieces.read(into: $0) }) {
                case .success:
                    if pieces.isDone { finish(&state, &pieces) }
                    return chunk
                case .failure(.short):
                    throw damaged(&state, &pieces, cache, hash, key, entry, "is shorter than its entry records")
                case .failure(.mismatch):
                    throw damaged(&state, &pieces, cache, hash, key, entry, "does not match its checksum")
                case .failure(.io(let error)):
                    finish(&state, &pieces)
                    throw DiskCacheError.io(error, "read the body", path: cache.layout.bodyFile(hash, slot: entry.slot))
                }
            }
        }

        private func finish(_ state: inout State, _ pieces: inout BodyPieces) {
            state.isFinished = true
            pieces.close()
        }

        private func damaged(_ state: inout State, _ pieces: inout BodyPieces, _ cache: DiskCache, _ hash: KeyHash,
                             _ key: String, _ entry: IndexEntry, _ what: String) -> DiskCacheError {
            finish(&state, &pieces)
            // The open counted a hit; the removal (if any) counts the miss, as for `data(for:)`.
            cache.takeBackHit(countingMiss: false)
            let path = cache.layout.bodyFile(hash, slot: entry.slot)
            if cache.removeIfUnchanged(hash, entry, key: key) {
                return DiskCacheError(code: .corruptEntry, message: "The stored body \(what); the entry was removed", path: path)
            }
            cache.countMiss()
            return DiskCacheError(code: .corruptEntry,
                                  message: "The stored body \(what) as it was read; the entry was replaced meanwhile, or reads well now, and was kept",
                                  path: path)
        }
    }
}

public import Foundation
import CDiskCacheSupport
import DiskCacheLocking
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// Bodies that need not fit in memory, written from a file, from chunks or through a writer (read
// back in DiskCache+StreamingReads.swift).
//
// A body that arrives in pieces is written to a file of its own in `tmp/` (which every open
// empties, so an abort or a crash leaves no trace), hashed as it is written, and committed like
// any store: under the key's lock the file is renamed into the slot the committed entry does not
// use, its `.meta` is written beside it, and the journal record commits both. Such a body is
// always a `.body` file, whatever its size.

extension DiskCache {
    /// How ``DiskCache/store(contentsOf:for:metadata:expires:transfer:)-5h4kl`` brings a file into the cache.
    public enum FileTransfer: Sendable, Hashable {
        /// The file is copied and left where it is. On filesystems that share blocks between
        /// files (btrfs, XFS: `FICLONE`) no bytes are copied; elsewhere the kernel copies them
        /// (`copy_file_range(2)`), or the cache reads and writes them.
        case copy
        /// The file is moved into the cache: on the cache's filesystem it gets a second name in
        /// the cache (`link(2)`, no bytes copied) and loses its own once the store has committed;
        /// elsewhere it is copied, then removed. Until the commit the file stays where it was, so
        /// a store that fails, or a process that dies part way, leaves it there untouched. A file
        /// with more than one name already is copied (and its given name removed), so that
        /// nobody can change what the cache holds through another name. (A process that still
        /// has the file open for writing can; the cache's checksum then turns its reads into
        /// misses.)
        case move
    }

    /// The size and XXH3-64 of a body file, computed by whoever wrote it as it was written (a
    /// server's spool): a file moved into the cache with them is not read again to hash it.
    /// The store still checks the size; a checksum that does not match the bytes makes the
    /// entry's reads damage (misses) while `verifiesChecksums` is on (the default), never wrong
    /// bytes.
    package struct WrittenBody: Sendable, Hashable {
        package var size: Int64
        package var checksum: UInt64
        package init(size: Int64, checksum: UInt64) {
            self.size = size
            self.checksum = checksum
        }
    }

    /// A stored body handed out as a file by ``withFile(for:_:)``.
    public struct File: Sendable {
        /// A name for the file that stays valid until the closure returns, even if the entry is
        /// replaced, removed or evicted meanwhile (it is a second name, in the cache's `tmp/`,
        /// for the same bytes). Open it, map it, or hand it to an API that wants a URL; do not
        /// write to it, rename it or delete it.
        public let url: URL
        /// The file, open for reading (`O_RDONLY`); valid until the closure returns. Do not close it.
        public let fileDescriptor: Int32
        /// The body's size in bytes.
        public let size: Int64
        /// The metadata stored with the value, read together with the file it came with.
        public let metadata: [String: String]
    }

    // MARK: - Storing large bodies

    /// Stores the contents of the file at `url` for `key`, without reading the whole file into
    /// memory.
    ///
    /// The checksum is computed from the cache's own copy after it was made, so a source that
    /// changes during a copy never leaves a body that fails its checksum.
    ///
    /// #### Errors
    /// As ``store(_:for:metadata:expires:)-9xfei``; ``DiskCacheError/Code/invalidArgument``
    /// when `url` is not a file URL or names something other than a regular file;
    /// ``DiskCacheError/Code/notFound`` when there is nothing at `url`. On failure the earlier
    /// value of `key` stays, and the file is where it was, untouched.
    ///
    /// #### Implementation details
    /// `.move`: `linkat(2)` into `tmp/` (EXDEV, EPERM, EMLINK: copied instead), and the file's
    /// own name unlinked after the commit. `.copy`: a new file in `tmp/`, then `ioctl(FICLONE)`,
    /// else `copy_file_range(2)`, else `pread`/`pwrite` in 1 MiB pieces. Then the cache's file
    /// is hashed (from 64 KiB to 8 MiB through a mapping of it, made for the hash and unmapped
    /// after; otherwise in 64 KiB pieces), and committed as any store is (see the top of this file).
    /// Memory used: one 1 MiB buffer, whatever the file's size (up to 8 MiB of the page cache
    /// mapped while a smaller file is hashed, counted in the resident size).
    public func store(contentsOf url: URL, for key: String, metadata: [String: String] = [:], expires: Date? = nil,
                      transfer: FileTransfer = .copy) throws {
        try store(contentsOf: url, for: key, metadata: metadata, expires: expires, transfer: transfer, written: nil)
    }

    /// ``store(contentsOf:for:metadata:expires:transfer:)-5h4kl``; `written`, for a file linked
    /// in (`.move` on the cache's filesystem) whose size it gives, stands for the hash.
    package func store(contentsOf url: URL, for key: String, metadata: [String: String], expires: Date?,
                       transfer: FileTransfer, written: WrittenBody?) throws {
        guard url.isFileURL else {
            throw DiskCacheError(code: .invalidArgument, message: "Only a file URL can be stored from: \(url)")
        }
        try throwIfClosed()
        try checkMetadataFits(key: key, metadata: metadata)
        let source = url.path
        let temp = temporaryFile("incoming")
        // A move on the cache's filesystem: a second name for the file, the first removed only
        // after the commit. Not for a file with other names, nor one whose name this process
        // could not remove afterwards: those are copied.
        var linked = false
        if transfer == .move, case .success(let info) = Syscall.lstat(source),
           info.st_mode & S_IFMT == S_IFREG, info.st_nlink == 1,
           Syscall.access((source as NSString).deletingLastPathComponent, W_OK | X_OK) {
            var result = layout.directory.linkIn(from: source, to: temp)
            if case .failure(let error) = result, error == .noSuchFileOrDirectory || error == .tooManySymbolicLinks || error == .notDirectory,
               !layout.directory.lstat(layout.temp).isDirectory {
                // tmp/ removed, or replaced by a link: made a directory again, as a copy would.
                _ = restoreDirectory(layout.temp)
                result = layout.directory.linkIn(from: source, to: temp)
            }
            switch result {
            case .success: linked = true
            case .failure(let error) where error.rawValue == EXDEV || error == .notPermitted || error.rawValue == EMLINK:
                break  // another filesystem, or one without hard links: copied below
            case .failure(.noSuchFileOrDirectory):
                throw DiskCacheError(code: .notFound, message: "There is no file to store", path: source, errno: ENOENT)
            case .failure(let error): throw DiskCacheError.io(error, "link the file into the cache", path: source)
            }
        }
        let file: OpenFile
        do throws(DiskCacheError) {
            file = linked ? try openLinkedFile(temp) : try copyIntoCache(source, temp)
        } catch {
            if linked { _ = layout.directory.unlink(temp) }
            throw error
        }
        do throws(DiskCacheError) {
            let (size, checksum) = try Self.sizeAndChecksum(file.fd, path: temp, written: linked ? written : nil)
            try commitBodyFile(temp, fd: file.fd, size: size, checksum: checksum, key: key, metadata: metadata, expires: expires)
        } catch {
            // Not committed (the file is still in tmp/), or committed and then not made durable
            // (it is the entry's body): either way the caller's file is where it was.
            _ = layout.directory.unlink(temp)
            throw error
        }
        guard transfer == .move else { return }
        // Committed: the file's own name goes (a copy's original too). Its inode, if linked, is
        // the cache's now: nobody else's permissions on it.
        if linked { _ = Syscall.fchmod(file.fd, 0o600, reportingAs: temp) }
        if case .failure(let error) = Syscall.unlink(source) {
            logger.warning("Stored a moved file but could not remove its name", metadata: ["path": "\(source)", "error": "\(error)"])
        } else if configuration.durability.mode == .immediate {
            // The name's removal is durable too, so that a power cut cannot bring it back as a
            // second name for the cache's body.
            _ = Syscall.fsyncDirectory((source as NSString).deletingLastPathComponent)
        }
    }

    /// Throws `invalidArgument` when `key` and `metadata` cannot fit in an entry's `.meta` file:
    /// checked before a body is streamed or copied, not after.
    func checkMetadataFits(key: String, metadata: [String: String]) throws(DiskCacheError) {
        let meta = EntryMetadata(key: key, size: 0, checksum: 0, created: 0, accessed: 0, expires: nil,
                                 metadata: metadata, inlineBody: nil)
        let parts = meta.encodedParts(inlineBodyCount: nil)
        // Sizes, checksums and dates are written at a fixed width: only the expiry date can add
        // to this (a date object and its key, well under 64 bytes).
        try EntryMetadata.checkFits(parts.head.count + parts.tail.count + 64, about: true)
    }

    /// Stores the chunks `chunks` yields, one after the other, as `key`'s value, holding one
    /// chunk in memory at a time. The value replaces the earlier one only once the sequence has
    /// ended and the body is committed: if the sequence throws, or the task is cancelled, nothing
    /// is stored, the earlier value stays and the partial file is removed.
    ///
    /// ```swift
    /// // Any AsyncSequence of byte chunks (Data, [UInt8], ...): a download read in pieces, say.
    /// let (pieces, continuation) = AsyncStream<Data>.makeStream()
    /// async let stored: Void = cache.store(pieces, for: "video-42")
    /// for piece in downloadedPieces { continuation.yield(piece) }
    /// continuation.finish()
    /// try await stored
    /// ```
    public func store<Chunks: AsyncSequence>(_ chunks: Chunks, for key: String, metadata: [String: String] = [:],
                                             expires: Date? = nil) async throws
        where Chunks.Element: DataProtocol & Sendable {
        let writer = try await makeWriter(for: key, metadata: metadata, expires: expires)
        do {
            for try await chunk in chunks { try await writer.append(chunk) }
            try await writer.commit()
        } catch {
            writer.abort()
            throw error
        }
    }

    /// A writer that builds `key`'s next value piece by piece: ``Writer/append(_:)-(DataProtocol)``, then
    /// ``Writer/commit()-cvw1`` (or ``Writer/abort()``). Until the commit, readers see the
    /// earlier value; a writer dropped without a commit aborts, and a crash leaves no trace
    /// (its file is in `tmp/`, which the next open empties).
    ///
    /// #### Errors
    /// ``DiskCacheError/Code/closed``; ``DiskCacheError/Code/invalidArgument`` when the key and
    /// metadata cannot fit in an entry; or the failure to create the writer's file.
    public func makeWriter(for key: String, metadata: [String: String] = [:], expires: Date? = nil) throws -> Writer {
        try throwIfClosed()
        try checkMetadataFits(key: key, metadata: metadata)
        guard let hasher = StreamingChecksum() else {
            throw DiskCacheError(code: .ioFailure, message: "Out of memory for a checksum state", errno: ENOMEM)
        }
        let temp = temporaryFile("incoming")
        let fd = try createTemporaryFile(temp).release()
        return Writer(cache: self, key: key, metadata: metadata, expires: expires, temp: temp, fd: fd, hasher: hasher)
    }

    /// A value being written piece by piece (see ``DiskCache/makeWriter(for:metadata:expires:)-8wrae``).
    /// Its methods may be called from any thread, one at a time.
    public final class Writer: Sendable {
        /// The key the value will be stored for.
        public let key: String
        private let cache: DiskCache
        private let metadata: [String: String]
        private let expires: Date?
        private let temp: String
        private let state: PthreadMutex<State>

        private struct State {
            var fd: Int32
            var length: Int64 = 0
            var hasher: StreamingChecksum
            /// Committed or aborted (or failed): nothing more may be appended.
            var isFinished = false
        }

        fileprivate init(cache: DiskCache, key: String, metadata: [String: String], expires: Date?, temp: String,
                         fd: Int32, hasher: StreamingChecksum) {
            self.cache = cache
            self.key = key
            self.metadata = metadata
            self.expires = expires
            self.temp = temp
            self.state = PthreadMutex(State(fd: fd, hasher: hasher))
        }

        deinit { abort() }

        /// Bytes appended so far.
        public var size: Int64 { state.withLock { $0.length } }

        /// Appends `bytes` to the value. A failure (a full disk, say) aborts the writer: its file
        /// is removed and later calls throw.
        public func append(_ bytes: some DataProtocol) throws {
            try state.withLock { state throws(DiskCacheError) in
                guard !state.isFinished else { throw Self.finished() }
                for region in bytes.regions {
                    let result = region.withUnsafeBytes { raw in
                        Syscall.pwriteAll(state.fd, raw, at: state.length).map { state.hasher.update(raw) }
                    }
                    if case .failure(let error) = result {
                        finish(&state, removing: true)
                        throw DiskCacheError.io(error, "write the body", path: temp)
                    }
                    state.length += Int64(region.count)
                }
            }
        }

        /// Commits the value: from now on readers get it, and the earlier value is gone. A
        /// failure leaves the earlier value (and aborts the writer).
        public func commit() throws {
            try state.withLock { state throws(DiskCacheError) in
                guard !state.isFinished else { throw Self.finished() }
                do throws(DiskCacheError) {
                    try cache.commitBodyFile(temp, fd: state.fd, size: state.length, checksum: state.hasher.digest,
                                             key: key, metadata: metadata, expires: expires)
                    finish(&state, removing: false)
                } catch {
                    finish(&state, removing: true)
                    throw error
                }
            }
        }

        /// Drops what was appended; the earlier value stays. Does nothing after a commit.
        public func abort() {
            state.withLock { state in
                guard !state.isFinished else { return }
                finish(&state, removing: true)
            }
        }

        private func finish(_ state: inout State, removing: Bool) {
            state.isFinished = true
            Syscall.close(state.fd)
            if removing { _ = cache.layout.directory.unlink(temp) }
        }

        private static func finished() -> DiskCacheError {
            DiskCacheError(code: .invalidArgument, message: "The writer was already committed or aborted")
        }
    }

    /// A name in `tmp/` no other file has.
    /// `<prefix>-<pid>-<tag>-<n>`: the tag is this instance's, so that a writer or handout
    /// outliving its cache (closed, then the directory opened again) can never remove a file of
    /// the next instance's.
    func temporaryFile(_ prefix: String) -> String {
        layout.tempFile(temporaryName(prefix))
    }

    /// A name no other file of this cache's has had: ``temporaryFile(_:)``'s, without the folder.
    func temporaryName(_ prefix: String) -> String {
        "\(prefix)-\(getpid())-\(temporaryTag)-\(temporaryCounter.add(1, ordering: .relaxed).newValue)"
    }

    /// A new empty file of the cache's own in `tmp/`, open for reading and writing (mode 0600):
    /// for a body that arrives before it can be stored (`HTTPCache`'s streamed responses). Stored
    /// with ``store(contentsOf:for:metadata:expires:transfer:)-5h4kl`` and `.move`, it is linked
    /// in, no byte copied. The caller closes the descriptor and removes the file; one that a
    /// crash leaves behind goes when the cache is next recovered (every recovery empties `tmp/`).
    ///
    /// #### Errors
    /// ``DiskCacheError/Code/closed``, or the failure to create the file.
    package func makeTemporaryFile() throws(DiskCacheError) -> (url: URL, fileDescriptor: Int32) {
        try throwIfClosed()
        let temp = temporaryFile("incoming")
        return (URL(fileURLWithPath: temp), try createTemporaryFile(temp).release())
    }

    /// Writes all of `bytes` at `offset` of a file ``makeTemporaryFile()`` made (`path` is its
    /// name, for errors), over short writes and interruptions.
    ///
    /// #### Errors
    /// The write's failure: ``DiskCacheError/Code/diskFull`` when the volume is full.
    package static func write(_ bytes: UnsafeRawBufferPointer, toTemporaryFile fd: Int32, at offset: Int64,
                              path: String) throws(DiskCacheError) {
        try Syscall.pwriteAll(fd, bytes, at: offset).get(orThrow: "write a file in tmp/", path: path)
    }

    /// Creates a file of the cache's own in `tmp/` (which must not exist), open for reading and writing.
    func createTemporaryFile(_ temp: String) throws(DiskCacheError) -> OpenFile {
        func create() -> Result<OpenFile, SyscallError> { layout.directory.open(temp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600) }
        switch create() {
        case .success(let file): return file
        case .failure(let error) where error == .noSuchFileOrDirectory || error == .tooManySymbolicLinks || error == .notDirectory:
            // tmp/ removed, or replaced by a link: made a directory again, as removeAll does.
            _ = restoreDirectory(layout.temp)
            return try create().get(orThrow: "create a file in tmp/", path: temp)
        case .failure(let error): throw DiskCacheError.io(error, "create a file in tmp/", path: temp)
        }
    }

    /// Opens a file just linked into `tmp/` and checks it is a regular file (a link put at the
    /// source meanwhile is refused here: `O_NOFOLLOW`). Its mode is left as it was until the
    /// store commits.
    private func openLinkedFile(_ temp: String) throws(DiskCacheError) -> OpenFile {
        let file = try layout.directory.open(temp, FileIO.readFlags).get(orThrow: "open the file to store", path: temp)
        guard case .success(let info) = Syscall.fstat(file.fd), info.st_mode & S_IFMT == S_IFREG else {
            throw DiskCacheError(code: .invalidArgument, message: "Only a regular file can be stored", path: temp)
        }
        return file
    }

    /// Copies the regular file at `source` to a new file `temp`; returns the copy, open.
    private func copyIntoCache(_ source: String, _ temp: String) throws(DiskCacheError) -> OpenFile {
        let input: OpenFile
        switch OpenFile.owning(Syscall.open(source, O_RDONLY | O_NONBLOCK)) {
        case .success(let file): input = file
        case .failure(.noSuchFileOrDirectory):
            throw DiskCacheError(code: .notFound, message: "There is no file to store", path: source, errno: ENOENT)
        case .failure(let error): throw DiskCacheError.io(error, "open the file to store", path: source)
        }
        guard case .success(let info) = Syscall.fstat(input.fd), info.st_mode & S_IFMT == S_IFREG else {
            throw DiskCacheError(code: .invalidArgument, message: "Only a regular file can be stored", path: source)
        }
        let output = try createTemporaryFile(temp)
        if case .failure(let error) = Self.copyFile(from: input.fd, to: output.fd) {
            _ = consume output
            _ = layout.directory.unlink(temp)
            throw DiskCacheError.io(error, "copy the file into the cache", path: source)
        }
        return output
    }

    /// `written` when the file's size is the one it gives, else the file hashed.
    private static func sizeAndChecksum(_ fd: Int32, path: String, written: WrittenBody?) throws(DiskCacheError) -> (size: Int64, checksum: UInt64) {
        if let written, case .success(let info) = Syscall.fstat(fd), Int64(info.st_size) == written.size {
            return (written.size, written.checksum)
        }
        return try hashFile(fd, path: path)
    }

    /// The size of the file open as `fd` and the XXH3-64 of its bytes, read to its end
    /// (``FileIO/hash(fd:count:)``).
    static func hashFile(_ fd: Int32, path: String) throws(DiskCacheError) -> (size: Int64, checksum: UInt64) {
        switch FileIO.hash(fd: fd, count: .max) {
        case .success(let hashed): return (Int64(hashed.count), hashed.checksum)
        case .failure(let error): throw DiskCacheError.io(error, "read the body", path: path)
        }
    }

    /// How much a copy, a hash or a streamed read moves at a time.
    static let pieceSize = 1 << 20

    /// Copies all of `source` to the empty file `destination`: a shared-block clone where the
    /// filesystem offers one, else an in-kernel copy, else `pread`/`pwrite`. Observers (the
    /// power-loss tests) are told of an in-kernel copy's bytes as writes.
    static func copyFile(from source: Int32, to destination: Int32) -> Result<Void, SyscallError> {
        var sourceOffset: Int64 = 0, destinationOffset: Int64 = 0
        if cdiskcache_clone(destination, source) == 0 {
            var info = stat()
            if FileSystemObservers.isObserved, fstat(source, &info) == 0 {
                Syscall.reportCopy(from: source, to: destination, at: 0, count: Int64(info.st_size))
            }
            return .success(())
        }
        while true {
            let start = destinationOffset
            let copied = cdiskcache_copy_range(source, &sourceOffset, destination, &destinationOffset, 1 << 30)
            if copied > 0 {
                Syscall.reportCopy(from: source, to: destination, at: start, count: Int64(copied))
                continue
            }
            // 0 is the end of the source, or a filesystem that copies nothing this way: the
            // loop below finds which (its first read returns 0 at the end).
            if copied == 0 { break }
            let error = SyscallError.current
            if error == .interrupted { continue }
            // Not possible for this pair (another filesystem on an old kernel, a special file
            // system): the plain copy below goes on from where this one stopped.
            guard [EXDEV, ENOSYS, EINVAL, EOPNOTSUPP, EBADF, ETXTBSY].contains(error.rawValue) else { return .failure(error) }
            break
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: pieceSize, alignment: 64)
        defer { buffer.deallocate() }
        while true {
            let read: Int
            switch Syscall.preadAll(source, buffer, at: sourceOffset) {
            case .success(let count): read = count
            case .failure(let error): return .failure(error)
            }
            if read == 0 { return .success(()) }
            if case .failure(let error) = Syscall.pwriteAll(destination, UnsafeRawBufferPointer(rebasing: buffer[0..<read]),
                                                            at: destinationOffset) {
                return .failure(error)
            }
            sourceOffset += Int64(read)
            destinationOffset += Int64(read)
        }
    }

    /// Commits the file `temp` (open as `fd`, `size` bytes hashing to `checksum`) as `key`'s
    /// value: see the top of this file.
    func commitBodyFile(_ temp: String, fd: Int32, size: Int64, checksum: UInt64, key: String,
                        metadata: [String: String], expires: Date?) throws(DiskCacheError) {
        // The index keeps a body's size in 62 bits (`IndexEntry`): a file claiming more (a sparse
        // one, on a filesystem that allows it) is refused, not trapped on.
        guard size >= 0, size <= IndexEntry.maximumBodySize else {
            throw DiskCacheError(code: .invalidArgument,
                                 message: "The body has \(size) bytes; an entry's body may have at most \(IndexEntry.maximumBodySize)",
                                 path: temp)
        }
        let hash = configuration.keyHasher.hash(key)
        let now = configuration.clock()
        let meta = EntryMetadata(key: key, size: size, checksum: checksum, created: now, accessed: now,
                                 expires: expires?.milliseconds, metadata: metadata, inlineBody: nil)
        let parts = meta.encodedParts(inlineBodyCount: nil)
        let metaSize = parts.head.count + parts.tail.count
        try EntryMetadata.checkFits(metaSize)
        let immediate = configuration.durability.mode == .immediate
        // The bytes are durable before the name that makes them part of an entry can be.
        if immediate { try Syscall.fsync(fd).get(orThrow: "sync the body", path: temp) }
        try commitWrite(hash) { _, slot throws(DiskCacheError) in
            try moveIntoSlot(temp, layout.bodyFile(hash, slot: slot), hash: hash)
            let metaPath = layout.metaFile(hash, slot: slot)
            try parts.head.withUnsafeBytes { head in
                parts.tail.withUnsafeBytes { tail in
                    Result { () throws(DiskCacheError) in
                        try writeEntryFile(metaPath, [head, tail], hash: hash, sync: immediate, reusing: true, action: "write the metadata")
                    }
                }
            }.get()
            return PlacedFiles(put: Journal.Put(hash: hash, size: size, metaSize: UInt32(metaSize), isInline: false,
                                                slot: slot, checksum: checksum, created: now, accessed: now,
                                                expires: meta.expires))
        }
    }

    /// Renames `temp` to the entry file `path` in a slot no record vouches for, replacing what an
    /// interrupted write left there (a directory too), and making the shard again if it has gone.
    private func moveIntoSlot(_ temp: String, _ path: String, hash: KeyHash) throws(DiskCacheError) {
        var result = layout.directory.rename(temp, path)
        switch result {
        case .failure(.noSuchFileOrDirectory) where !layout.directory.lstat(layout.shardDirectory(hash)).isDirectory:
            try restoreShard(hash)
            result = layout.directory.rename(temp, path)
        case .failure(let error) where error == .isDirectory || error == .fileExists || error.rawValue == ENOTEMPTY:
            _ = layout.directory.removeEntryFile(path)
            result = layout.directory.rename(temp, path)
        default:
            break
        }
        try result.get(orThrow: "move the body into place", path: path)
    }

}

// The async forms, on the cache's I/O threads (see DiskCache+Async.swift).
extension DiskCache {
    /// ``store(contentsOf:for:metadata:expires:transfer:)-5h4kl`` on the cache's I/O threads.
    public func store(contentsOf url: URL, for key: String, metadata: [String: String] = [:], expires: Date? = nil,
                      transfer: FileTransfer = .copy) async throws {
        try await BlockingIOPool.shared.run {
            try self.store(contentsOf: url, for: key, metadata: metadata, expires: expires, transfer: transfer)
        }
    }

    /// ``makeWriter(for:metadata:expires:)-8wrae`` on the cache's I/O threads.
    public func makeWriter(for key: String, metadata: [String: String] = [:], expires: Date? = nil) async throws -> Writer {
        try await BlockingIOPool.shared.run { try self.makeWriter(for: key, metadata: metadata, expires: expires) }
    }
}

extension DiskCache.Writer {
    /// Appends `bytes` on the cache's I/O threads. A task cancelled before the write starts
    /// gets `CancellationError` and the writer is unchanged (abort it, or go on).
    public func append(_ bytes: some DataProtocol & Sendable) async throws {
        try await BlockingIOPool.shared.run { try self.append(bytes) }
    }

    /// ``commit()`` on the cache's I/O threads.
    public func commit() async throws {
        try await BlockingIOPool.shared.run { try self.commit() }
    }
}

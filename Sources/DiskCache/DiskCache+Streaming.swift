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

// Bodies that need not fit in memory: written from a file, from chunks or through a writer;
// read as chunks or as a file handed out for the length of a closure.
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
    /// As ``store(_:for:metadata:expires:)-3d9hu``; ``DiskCacheError/Code/invalidArgument``
    /// when `url` is not a file URL or names something other than a regular file;
    /// ``DiskCacheError/Code/notFound`` when there is nothing at `url`. On failure the earlier
    /// value of `key` stays, and the file is where it was, untouched.
    ///
    /// #### Implementation details
    /// `.move`: `linkat(2)` into `tmp/` (EXDEV, EPERM, EMLINK: copied instead), and the file's
    /// own name unlinked after the commit. `.copy`: a new file in `tmp/`, then `ioctl(FICLONE)`,
    /// else `copy_file_range(2)`, else `pread`/`pwrite` in 1 MiB pieces. Then the cache's file
    /// is hashed in 1 MiB pieces, and committed as any store is (see the top of this file).
    /// Memory used: one 1 MiB buffer, whatever the file's size.
    public func store(contentsOf url: URL, for key: String, metadata: [String: String] = [:], expires: Date? = nil,
                      transfer: FileTransfer = .copy) throws {
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
        let fd: Int32
        do throws(DiskCacheError) {
            fd = linked ? try openLinkedFile(temp) : try copyIntoCache(source, temp)
        } catch {
            if linked { _ = layout.directory.unlink(temp) }
            throw error
        }
        defer { Syscall.close(fd) }
        do throws(DiskCacheError) {
            let (size, checksum) = try Self.hashFile(fd, path: temp)
            try commitBodyFile(temp, fd: fd, size: size, checksum: checksum, key: key, metadata: metadata, expires: expires)
        } catch {
            // Not committed (the file is still in tmp/), or committed and then not made durable
            // (it is the entry's body): either way the caller's file is where it was.
            _ = layout.directory.unlink(temp)
            throw error
        }
        guard transfer == .move else { return }
        // Committed: the file's own name goes (a copy's original too). Its inode, if linked, is
        // the cache's now: nobody else's permissions on it.
        if linked { _ = Syscall.fchmod(fd, 0o600, reportingAs: temp) }
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
        let temp = temporaryFile("incoming")
        let fd = try createTemporaryFile(temp)
        guard let hasher = StreamingChecksum() else {
            Syscall.close(fd)
            _ = layout.directory.unlink(temp)
            throw DiskCacheError(code: .ioFailure, message: "Out of memory for a checksum state", errno: ENOMEM)
        }
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
        layout.tempFile("\(prefix)-\(getpid())-\(temporaryTag)-\(temporaryCounter.add(1, ordering: .relaxed).newValue)")
    }

    /// Creates a file of the cache's own in `tmp/` (which must not exist), open for reading and writing.
    private func createTemporaryFile(_ temp: String) throws(DiskCacheError) -> Int32 {
        var opened = layout.directory.open(temp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600)
        if case .failure(let error) = opened, error == .noSuchFileOrDirectory || error == .tooManySymbolicLinks || error == .notDirectory {
            // tmp/ removed, or replaced by a link: made a directory again, as removeAll does.
            _ = restoreDirectory(layout.temp)
            opened = layout.directory.open(temp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600)
        }
        return try opened.get(orThrow: "create a file in tmp/", path: temp)
    }

    /// Opens a file just linked into `tmp/` and checks it is a regular file (a link put at the
    /// source meanwhile is refused here: `O_NOFOLLOW`). Its mode is left as it was until the
    /// store commits.
    private func openLinkedFile(_ temp: String) throws(DiskCacheError) -> Int32 {
        let fd = try layout.directory.open(temp, FileIO.readFlags).get(orThrow: "open the file to store", path: temp)
        guard case .success(let info) = Syscall.fstat(fd), info.st_mode & S_IFMT == S_IFREG else {
            Syscall.close(fd)
            throw DiskCacheError(code: .invalidArgument, message: "Only a regular file can be stored", path: temp)
        }
        return fd
    }

    /// Copies the regular file at `source` to a new file `temp`; returns the copy, open.
    private func copyIntoCache(_ source: String, _ temp: String) throws(DiskCacheError) -> Int32 {
        let input: Int32
        switch Syscall.open(source, O_RDONLY | O_NONBLOCK) {
        case .success(let fd): input = fd
        case .failure(.noSuchFileOrDirectory):
            throw DiskCacheError(code: .notFound, message: "There is no file to store", path: source, errno: ENOENT)
        case .failure(let error): throw DiskCacheError.io(error, "open the file to store", path: source)
        }
        defer { Syscall.close(input) }
        guard case .success(let info) = Syscall.fstat(input), info.st_mode & S_IFMT == S_IFREG else {
            throw DiskCacheError(code: .invalidArgument, message: "Only a regular file can be stored", path: source)
        }
        let output = try createTemporaryFile(temp)
        if case .failure(let error) = Self.copyFile(from: input, to: output) {
            Syscall.close(output)
            _ = layout.directory.unlink(temp)
            throw DiskCacheError.io(error, "copy the file into the cache", path: source)
        }
        return output
    }

    /// The size of the file open as `fd` and the XXH3-64 of its bytes, read to its end through
    /// a 64 KiB buffer.
    static func hashFile(_ fd: Int32, path: String) throws(DiskCacheError) -> (size: Int64, checksum: UInt64) {
        var checksum: UInt64 = 0
        let read = cdiskcache_hash_file(fd, 0, Int.max, &checksum)
        guard read >= 0 else { throw DiskCacheError.io(SyscallError.current, "read the body", path: path) }
        return (Int64(read), checksum)
    }

    /// Checks the body file open as `fd`, `hash`'s in `entry`'s slot, against `entry`: its type
    /// and size, then (with checksums on) its XXH3-64, hashed from its mapping when the cache
    /// keeps body files mapped (``MappedBodies``), else read through a 64 KiB buffer; either
    /// way a body of any size is checked in bounded memory. A body hashed from its mapping is
    /// copied into memory as it is hashed when `copying` allows it (``BodyCopying``).
    ///
    /// Found: a regular file of the entry's size whose bytes match its checksum (when checksums
    /// are verified), with its copy when one was made (of the entry's size, allocated with
    /// `cdiskcache_copy_allocate`). Unavailable: it could not be read, so nothing is known of it.
    func checkBodyFile(_ fd: Int32, _ hash: KeyHash, _ entry: IndexEntry, copying: BodyCopying? = nil)
        -> ReadOutcome<UnsafeMutableRawPointer?> {
        guard case .success(let info) = Syscall.fstat(fd) else { return .unavailable }
        guard info.st_mode & S_IFMT == S_IFREG, Int64(info.st_size) == entry.size else { return .damaged }
        guard configuration.verifiesChecksums else { return .found(nil) }
        var checksum: UInt64 = 0
        let mappedBodies = layout.directory.mappedBodies
        if let mapping = mappedBodies.mapping(of: fd, info, size: entry.size, path: { layout.bodyFile(hash, slot: entry.slot) }) {
            let copy = copying.flatMap { $0.allocate(entry.size) }
            let result = copy.map { cdiskcache_copy_hash_mapped(mapping.bytes, mapping.size, $0, &checksum) }
                ?? cdiskcache_hash_mapped(mapping.bytes, mapping.size, &checksum)
            if result == 0, checksum == entry.checksum { return .found(copy) }
            let error = errno
            cdiskcache_copy_free(copy)
            // EFAULT: cut short since it was mapped. EAGAIN: not all in the page cache, on a
            // thread that must not wait for the disk. ENOMEM: no memory for the hash's state.
            if result != 0, error != EFAULT { return .unavailable }
            mappedBodies.drop(mapping.id)
            return .damaged
        }
        let read = cdiskcache_hash_file(fd, 0, Int(entry.size), &checksum)
        if read < 0 { return .unavailable }
        return read == entry.size && checksum == entry.checksum ? .found(nil) : .damaged
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
                        try writeEntryFile(metaPath, [head, tail], hash: hash, sync: immediate, action: "write the metadata")
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

    // MARK: - Reading large bodies

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
                let fd = try createTemporaryFile(handout)
                let written = inline.withUnsafeBytes { Syscall.pwriteAll(fd, $0, at: 0) }
                Syscall.close(fd)
                // Handed out read-only, as a body file is.
                let reopened = written.flatMap { layout.directory.open(handout, FileIO.readFlags) }
                guard case .success(let readOnly) = reopened else {
                    _ = layout.directory.unlink(handout)
                    if case .failure(let error) = reopened { throw DiskCacheError.io(error, "write the handed-out file", path: handout) }
                    return .unavailable
                }
                return opened(readOnly)
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
            let fd: Int32
            switch layout.directory.open(handout, FileIO.readFlags) {
            case .success(let value): fd = value
            case .failure(let error):
                _ = layout.directory.unlink(handout)
                return error == .tooManySymbolicLinks || FileIO.isNotAFile(error) ? .damaged : .unavailable
            }
            let verdict: ReadOutcome<File>
            switch Syscall.fstat(fd) {
            case .success(let info) where info.st_mode & S_IFMT != S_IFREG || Int64(info.st_size) != entry.size:
                verdict = .damaged
            case .success where !configuration.verifiesChecksums:
                return opened(fd)
            case .success:
                switch Result(catching: { () throws(DiskCacheError) in try Self.hashFile(fd, path: handout) }) {
                case .success(let (_, checksum)) where checksum == entry.checksum: return opened(fd)
                case .success: verdict = .damaged
                case .failure: verdict = .unavailable
                }
            case .failure:
                verdict = .unavailable
            }
            Syscall.close(fd)
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
    private func openBodyFile(_ hash: KeyHash, _ entry: IndexEntry) -> ReadOutcome<Int32> {
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
            let fd: Int32
            switch openBodyFile(hash, entry) {
            case .found(let value): fd = value
            case let other: return other.withoutValue()
            }
            guard isCurrent(hash, entry),
                  let pieces = BodyPieces(fd: fd, size: entry.size, checksum: configuration.verifiesChecksums ? entry.checksum : nil)
            else {
                Syscall.close(fd)
                return isCurrent(hash, entry) ? .unavailable : .replaced
            }
            return .found(Chunks(ChunkReader(cache: self, hash: hash, key: key, entry: entry, metadata: meta.metadata,
                                              pieces: pieces, chunkSize: chunkSize)))
        }
    }

    /// A stored body checked whole against its checksum, then handed out as an open file (or,
    /// for a body inline in its `.meta` file, as the bytes already read): for a server that
    /// passes the file to the kernel (`sendfile`) instead of reading the bytes itself.
    package struct CheckedBody: Sendable {
        package enum Source: Sendable {
            /// The body, read and checked with the entry's `.meta` file.
            case bytes(Data)
            /// The `.body` file, open for reading; the caller closes it. Its bytes were checked
            /// just before it was handed out, and the store never writes a committed file again
            /// (a new value goes to a new file), so they are the bytes checked.
            case file(descriptor: Int32)
            /// The body copied from its file's mapping as it was checked (``BodyCopying``): the
            /// bytes hashed are these very bytes. The caller frees it with
            /// `cdiskcache_copy_free`, or hands it to something that will.
            case copy(CopiedBody)
        }

        package let source: Source
        package let size: Int64
        /// The metadata stored with the value, read together with the body's file.
        package let metadata: [String: String]

        /// Lets go of what the body holds, for a caller that will not send it: closes the file
        /// or frees the copy.
        package func discard() {
            switch source {
            case .bytes: break
            case .file(let descriptor): Syscall.close(descriptor)
            case .copy(let copy): cdiskcache_copy_free(copy.bytes)
            }
        }
    }

    /// A body copied into memory allocated with `cdiskcache_copy_allocate`.
    package struct CopiedBody: @unchecked Sendable {  // unchecked: the memory has one owner at a time
        package let bytes: UnsafeMutableRawPointer
    }

    /// When ``checkedBody(for:copying:)`` copies a body checked through its file's mapping into
    /// memory as it hashes it (so that what is sent is what was hashed, and written from memory
    /// rather than sent from the file): bodies of at most `limit` bytes, while the copies
    /// allocated in the whole process (`cdiskcache_copies_in_flight`) stay within `budget`;
    /// any other body is handed out as its file.
    package struct BodyCopying: Sendable {
        package var limit: Int64
        package var budget: Int

        package init(limit: Int64, budget: Int) {
            self.limit = limit
            self.budget = budget
        }

        /// Memory for a copy of `size` bytes, or nil when it is above the limit or over budget.
        func allocate(_ size: Int64) -> UnsafeMutableRawPointer? {
            guard size <= limit, budget > 0 else { return nil }
            return cdiskcache_copy_allocate(Int(size), budget)
        }
    }

    /// Runs `body` with every read of an entry file on this thread taking only what the page
    /// cache holds: a read that would wait for the disk (or on a system that cannot tell) fails
    /// at once instead, and the read it was part of ends as a plain miss that leaves the entry
    /// alone and counts nothing in the statistics. `waited` says whether that happened; the
    /// value is then incomplete and should be thrown away (after closing any file it holds), and
    /// the work done again where waiting is allowed. For a caller that must not block, such as
    /// an event loop answering from the page cache. Not to be nested.
    package static func withoutWaitingForDisk<T>(_ body: () throws -> T) rethrows -> (value: T, waited: Bool) {
        cdiskcache_set_reads_without_waiting(1)
        defer { cdiskcache_set_reads_without_waiting(0) }
        let value = try body()
        return (value, readGaveUpWaiting)
    }

    /// A read on this thread inside ``withoutWaitingForDisk(_:)`` gave up rather than wait:
    /// the miss it ends in is not counted.
    static var readGaveUpWaiting: Bool { cdiskcache_read_would_have_waited() != 0 }

    /// How many bytes of body files may be kept mapped so that ``checkedBody(for:)`` hashes
    /// them straight from the page cache instead of reading them into a buffer first (see
    /// `MappedBodies`); 0, the default, maps nothing and unmaps what is mapped. For a server
    /// that sends checked bodies with `sendfile`: the mapped pages are the page cache's,
    /// counted in the process's resident size but never copied.
    package var mappedBodyCapacity: Int64 {
        get { layout.directory.mappedBodies.capacity }
        set { layout.directory.mappedBodies.capacity = newValue }
    }

    /// `key`'s value as a ``CheckedBody``; nil on a miss, an expired entry, or a body that fails
    /// its checksum (the entry is then removed, as a read removes it). The check hashes the
    /// file's mapping (``mappedBodyCapacity``) or reads it through a 64 KiB buffer, so no memory
    /// the size of the body is used, unless `copying` asks for a copy made as it is hashed.
    /// Blocking: call it on an I/O thread.
    package func checkedBody(for key: String, copying: BodyCopying? = nil) throws(DiskCacheError) -> CheckedBody? {
        try openBody(for: key) { hash, entry, meta, inline throws(DiskCacheError) -> ReadOutcome<CheckedBody> in
            if let inline { return .found(CheckedBody(source: .bytes(inline), size: entry.size, metadata: meta.metadata)) }
            let fd: Int32
            switch openBodyFile(hash, entry) {
            case .found(let value): fd = value
            case let other: return other.withoutValue()
            }
            switch isCurrent(hash, entry) ? checkBodyFile(fd, hash, entry, copying: copying) : .replaced {
            case .found(nil): return .found(CheckedBody(source: .file(descriptor: fd), size: entry.size, metadata: meta.metadata))
            case .found(let bytes?):
                Syscall.close(fd)
                return .found(CheckedBody(source: .copy(CopiedBody(bytes: bytes)), size: entry.size, metadata: meta.metadata))
            case let other:
                Syscall.close(fd)
                return other.withoutValue()
            }
        }
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

package import Foundation
import CDiskCacheSupport

// The interface the caching server (CacheServer) reads the store through, and nothing else
// does: `package` access, so no user of the library sees it. A body checked whole and handed
// out as a file to send (`sendfile`) or as a copy made as it was hashed; body files kept mapped
// so that the check reads the page cache in place; reads that must not wait for the disk.
extension DiskCache {
    /// A stored body checked whole against its checksum, then handed out as an open file (or,
    /// for a body inline in its `.meta` file, as the bytes already read): for a server that
    /// passes the file to the kernel (`sendfile`) instead of reading the bytes itself. It owns
    /// its file or copy: one that is not consumed (``Source/file(_:)`` released, a
    /// ``CopiedBody`` released) closes or frees it when it goes.
    package struct CheckedBody: ~Copyable, Sendable {
        package enum Source: ~Copyable, Sendable {
            /// The body, read and checked with the entry's `.meta` file.
            case bytes(Data)
            /// The `.body` file, open for reading. Its bytes were checked just before it was
            /// handed out, and the store never writes a committed file again (a new value goes
            /// to a new file), so they are the bytes checked.
            case file(OpenFile)
            /// The body copied from its file's mapping as it was checked (``BodyCopying``): the
            /// bytes hashed are these very bytes.
            case copy(CopiedBody)
        }

        package let source: Source
        package let size: Int64
        /// The metadata stored with the value, read together with the body's file.
        package let metadata: [String: String]

        /// The body, for a caller that sends it (its file or copy then goes with the result).
        package consuming func takeSource() -> Source { source }
    }

    /// A body copied into memory allocated with `cdiskcache_copy_allocate`, freed when it goes
    /// unless ``release()`` hands it on.
    package struct CopiedBody: ~Copyable, @unchecked Sendable {  // unchecked: the memory has one owner at a time
        private let bytes: UnsafeMutableRawPointer

        init(_ bytes: UnsafeMutableRawPointer) { self.bytes = bytes }

        /// Runs `body` with the copy's memory, which stays allocated while it runs.
        package borrowing func withBytes<R>(_ body: (UnsafeMutableRawPointer) throws -> R) rethrows -> R { try body(bytes) }

        /// The memory, for an owner that frees it with `cdiskcache_copy_free` (or hands it to
        /// something that will).
        package consuming func release() -> UnsafeMutableRawPointer {
            let bytes = self.bytes
            discard self
            return bytes
        }

        deinit { cdiskcache_copy_free(bytes) }
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
        func allocate(_ size: Int64) -> CopiedBody? {
            guard size <= limit, budget > 0, let bytes = cdiskcache_copy_allocate(Int(size), budget) else { return nil }
            return CopiedBody(bytes)
        }
    }

    /// Reads that take only what the page cache holds, for a caller that must not block (an
    /// event loop answering from the page cache). Passed to a read (`pageCacheOnly:`), it makes
    /// every read of an entry file that would wait for the disk (or on a system that cannot
    /// tell) fail at once; the read ends as a plain miss that leaves the entry alone and counts
    /// nothing in the statistics, and ``gaveUp`` says so. What that read returned is then
    /// incomplete: throw it away (after closing any file it holds) and ask again where waiting
    /// is allowed. Used by one caller at a time, on its own thread.
    package final class PageCacheOnly {
        /// A read given this gave up rather than wait for the disk.
        package private(set) var gaveUp = false

        package init() {}

        /// Notes a read that failed with `error`: EAGAIN is one that would have waited.
        func note(_ error: SyscallError) {
            if error.rawValue == EAGAIN { gaveUp = true }
        }
    }

    /// How many bytes of body files may be kept mapped so that ``checkedBody(for:)`` hashes
    /// them straight from the page cache instead of reading them into a buffer first (see
    /// `MappedBodies`); 0, the default, maps nothing and unmaps what is mapped. For a server
    /// that sends checked bodies with `sendfile`: the mapped pages are the page cache's,
    /// counted in the process's resident size but never copied.
    package var mappedBodyCapacity: Int64 {
        get { mappedBodies.capacity }
        set { mappedBodies.capacity = newValue }
    }

    /// `key`'s value as a ``CheckedBody``; nil on a miss, an expired entry, or a body that fails
    /// its checksum (the entry is then removed, as a read removes it). The check hashes the
    /// file's mapping (``mappedBodyCapacity``) or reads it through a 64 KiB buffer, so no memory
    /// the size of the body is used, unless `copying` asks for a copy made as it is hashed.
    /// Blocking: call it on an I/O thread, or with `pageCacheOnly`.
    package func checkedBody(for key: String, copying: BodyCopying? = nil,
                             pageCacheOnly: PageCacheOnly? = nil) throws(DiskCacheError) -> CheckedBody? {
        try openBody(for: key, pageCacheOnly: pageCacheOnly) { hash, entry, meta, inline throws(DiskCacheError) -> ReadOutcome<CheckedBody> in
            if let inline { return .found(CheckedBody(source: .bytes(inline), size: entry.size, metadata: meta.metadata)) }
            let file: OpenFile
            switch openBodyFile(hash, entry) {
            case .found(let opened): file = opened
            case let other: return other.withoutValue()
            }
            guard isCurrent(hash, entry) else { return .replaced }
            switch checkBodyFile(file.fd, hash, entry, copying: copying, pageCacheOnly: pageCacheOnly) {
            case .found(let copy?):
                return .found(CheckedBody(source: .copy(copy), size: entry.size, metadata: meta.metadata))
            case .found(nil):
                return .found(CheckedBody(source: .file(file), size: entry.size, metadata: meta.metadata))
            case let other:
                return other.withoutValue()
            }
        }
    }
}

/// The one error type the store throws.
///
/// Match on ``code`` (new codes may be added in later versions without breaking a
/// `switch`, since ``Code`` is a struct):
/// ```swift
/// do { cache = try DiskCache(directory: url) }
/// catch DiskCacheError.Code.locked { print("another process owns this cache") }
/// ```
public struct DiskCacheError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, coarsely, for programs to act on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Wrapped: Hashable, Sendable {
            case notFound, notADirectory, permissionDenied, notACache, locked, newerFormat
            case diskFull, ioFailure, closed, invalidArgument, undecodableValue, corruptEntry
            case lockTimeout, sharedPageReplaced, sharedPageDamaged, otherKind
        }
        private let wrapped: Wrapped
        private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

        /// There is no cache at the path (only read-only inspection reports this; opening creates one).
        public static let notFound = Code(.notFound)
        /// The path exists but is not a directory (a file, or a symbolic link, which the store never follows).
        public static let notADirectory = Code(.notADirectory)
        /// The directory (or a file in it) cannot be read, written or searched by this process.
        public static let permissionDenied = Code(.permissionDenied)
        /// The directory holds files but is not a cache: the store refuses to take it over.
        public static let notACache = Code(.notACache)
        /// Another `DiskCache`, in this process or another, has the directory open.
        public static let locked = Code(.locked)
        /// The cache was written by a newer version of this library; it is left untouched.
        public static let newerFormat = Code(.newerFormat)
        /// No space (or quota) left on the volume. Earlier entries are unaffected.
        public static let diskFull = Code(.diskFull)
        /// A system call failed; ``DiskCacheError/errno`` says how.
        public static let ioFailure = Code(.ioFailure)
        /// The cache was closed.
        public static let closed = Code(.closed)
        /// An argument the store cannot accept (for example metadata too large for an entry, or a
        /// value its coder cannot encode).
        public static let invalidArgument = Code(.invalidArgument)
        /// A stored value could not be decoded as the type asked for (``DiskCache/value(_:for:coder:removingIfUndecodable:)-4kx9e``).
        /// The entry stays unless the call asked for its removal.
        public static let undecodableValue = Code(.undecodableValue)

        /// A body read in pieces (``DiskCache/chunks(for:chunkSize:)``) failed its checksum or was
        /// shorter than its entry records, after some of it had been handed out: discard what was
        /// received. The entry was removed. (Reads that return the whole value report such an
        /// entry as a miss instead.)
        public static let corruptEntry = Code(.corruptEntry)

        /// A lock another instance sharing the cache holds was not had within
        /// ``DiskCache/Configuration/lockTimeout`` (its holder may be stopped, or hung): nothing
        /// was done. Try again later.
        public static let lockTimeout = Code(.lockTimeout)
        /// The cache's `SHARED` file was removed or replaced (by a file of another inode, a
        /// directory, a link, a FIFO) while instances had the cache open: the instance that
        /// reports it writes nothing more, and an open waits (``DiskCache/Configuration/lockTimeout``)
        /// for the instances that had it to close. Close them; the next open rebuilds the file
        /// from the journal. See docs/on-disk-format.md, "Sharing a cache".
        public static let sharedPageReplaced = Code(.sharedPageReplaced)
        /// The cache's `SHARED` file was overwritten (zeros, garbage) or cut short while
        /// instances had the cache open; as for ``sharedPageReplaced``, close them and open again.
        public static let sharedPageDamaged = Code(.sharedPageDamaged)
        /// The directory holds a cache of another kind (``DiskCache/Configuration/kind``: another
        /// component's or application's data) than the open asks for; the message names both.
        /// Nothing in it was changed. Give each kind of cache its own directory.
        public static let otherKind = Code(.otherKind)

        public var description: String { "\(wrapped)" }

        /// Lets `catch DiskCacheError.Code.locked` match a thrown ``DiskCacheError``.
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? DiskCacheError)?.code == code
        }
    }

    public var code: Code
    /// A sentence saying what is wrong and, where it helps, what to do.
    public var message: String
    /// The file or directory concerned.
    public var path: String?
    /// The `errno` of the failing system call, if one failed.
    public var errno: Int32?

    public init(code: Code, message: String, path: String? = nil, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.errno = errno
    }

    public var description: String {
        var text = message
        if let path { text += " (\(path))" }
        if let errno { text += ": \(SyscallError(rawValue: errno)) (errno \(errno))" }
        return text
    }
}

extension DiskCacheError {
    /// The error for a failed system call: out of space, permission, or plain I/O failure.
    static func io(_ errno: SyscallError, _ action: String, path: String?) -> DiskCacheError {
        if errno.isOutOfSpace {
            return DiskCacheError(code: .diskFull, message: "No space left on the volume to \(action)",
                                  path: path, errno: errno.rawValue)
        }
        if errno == .permissionDenied || errno == .notPermitted || errno == .readOnlyFileSystem {
            return DiskCacheError(code: .permissionDenied, message: "Permission denied to \(action)",
                                  path: path, errno: errno.rawValue)
        }
        return DiskCacheError(code: .ioFailure, message: "Could not \(action)", path: path, errno: errno.rawValue)
    }

    static func closed() -> DiskCacheError {
        DiskCacheError(code: .closed, message: "The cache is closed")
    }
}

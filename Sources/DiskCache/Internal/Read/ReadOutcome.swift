/// How a read of an entry ended, at every step of the read path (an entry file read, its
/// metadata and body checked, what a reader makes of them): one word for each way a read ends.
/// A value that owns something (``EntryBytes``, ``OpenFile``, ``DiskCache/CheckedBody``) is
/// owned by the outcome: an outcome dropped on any path lets go of it.
enum ReadOutcome<Value: ~Copyable>: ~Copyable {
    /// What was read, checked against what the index vouches for.
    case found(Value)
    /// No entry for the key: a miss.
    case absent
    /// The entry has expired: removed, a miss.
    case expired
    /// The files belong to another key with the same hash: a miss, the entry left alone.
    case otherKey
    /// The files do not match what the index vouches for (missing, short, a link or not a
    /// regular file, failing the checksum): removed once confirmed, a miss.
    case damaged
    /// The index moved on between the lookup and the read: look again.
    case replaced
    /// The read failed for a reason that says nothing about the files (out of descriptors or
    /// memory, a transient I/O error, a read that would have waited for the disk): a miss, the
    /// entry left alone.
    case unavailable

    /// The same ending for a reader of another type. Only for an outcome that found nothing.
    consuming func withoutValue<Other: ~Copyable>() -> ReadOutcome<Other> {
        switch consume self {
        case .found: preconditionFailure("a found value has no other type")  // every caller handles `.found` before
        case .absent: return .absent
        case .expired: return .expired
        case .otherKey: return .otherKey
        case .damaged: return .damaged
        case .replaced: return .replaced
        case .unavailable: return .unavailable
        }
    }
}

extension ReadOutcome: Copyable where Value: Copyable {}

extension ReadOutcome where Value == OpenFile {
    /// How an open of an entry file (with `O_NOFOLLOW`) ended: a missing file, a link or
    /// anything that is not a regular file is damage; any other failure is not the file's fault.
    init(opening result: consuming Result<OpenFile, SyscallError>) {
        switch consume result {
        case .success(let file): self = .found(file)
        case .failure(let error) where ReadOutcome.isDamage(error): self = .damaged
        case .failure: self = .unavailable
        }
    }
}

extension ReadOutcome where Value: ~Copyable {
    /// Whether an error opening or reading an entry file means the file is not what its entry
    /// needs (missing, a symbolic link `O_NOFOLLOW` refused, not a regular file) rather than a
    /// failure that says nothing about it.
    static func isDamage(_ error: SyscallError) -> Bool {
        error == .noSuchFileOrDirectory || error == .tooManySymbolicLinks || FileIO.isNotAFile(error)
    }
}

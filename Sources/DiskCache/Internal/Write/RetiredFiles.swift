import DiskCacheLocking

/// `.meta` files of entries no record vouches for any more, moved into `retired/` for a later
/// write to take in place of creating a file: at capacity every put evicts, and on ext4 an
/// unlink and a create (which free and allocate an inode and its block, and with `discard`
/// trim it) cost several times two renames and an overwrite (see docs/on-disk-format.md).
///
/// Safe because a reader never trusts a `.meta` file's bytes alone: it checks, after reading,
/// that the index still holds the entry it read for (`DiskCache.readEntry`). A file is retired
/// only after the record that stops vouching for it (in shared mode, appended to the journal,
/// which every other instance follows before that check), so bytes written into it later
/// are seen only by a read whose check then fails. `.body` files are never reused: a server
/// sends them with `sendfile`, or keeps them mapped, after the check.
///
/// A file whose record is not yet durable (in `.immediate`, an eviction's, synced when its sweep
/// ends) is not taken before it is (``noteSynced(through:)``): written over sooner, a power cut
/// that lost the record would bring the entry back onto a later write's bytes.
///
/// Each instance keeps its own files: at most ``capacity`` of them, each of at most
/// ``largestFile`` bytes and ``byteBudget`` bytes together, which the cache's `diskCapacity`
/// does not count. The oldest is taken first, so that a file waits as long as it can before it
/// is written again. `close()` removes an instance's files, and opening a cache no other
/// instance has open empties `retired/` (what a crash left).
final class RetiredFiles: Sendable {
    static let capacity = 256
    static let largestFile: Int64 = 64 << 10
    static let byteBudget: Int64 = 4 << 20
    /// The files kept, oldest first; `record`: the end of the record that stopped vouching for
    /// one, while it is not known to be durable.
    private let kept = PthreadMutex((paths: [(path: String, size: Int64, record: Journal.Position?)](), bytes: Int64(0),
                                     waiting: 0))

    /// Moves the file at `path`, of `size` bytes, to `target` in `retired/` (made when missing);
    /// false when it is too large, when this instance keeps as many files or bytes as it may,
    /// or when the move failed: the caller unlinks it then. `record`: the end of a record that
    /// stopped vouching for it and may not be durable yet.
    func retire(_ path: String, size: Int64, to target: @autoclosure () -> String, layout: Layout,
                record: Journal.Position? = nil) -> Bool {
        guard size <= Self.largestFile,
              kept.withLock({ $0.paths.count < Self.capacity && $0.bytes + size <= Self.byteBudget }) else { return false }
        let target = target()
        var moved = layout.directory.rename(path, target)
        if case .failure(.noSuchFileOrDirectory) = moved, case .success = layout.directory.mkdir(layout.retired, 0o700) {
            moved = layout.directory.rename(path, target)
        }
        guard case .success = moved else { return false }
        kept.withLock {
            $0.paths.append((target, size, record))
            $0.bytes += size
            if record != nil { $0.waiting += 1 }
        }
        return true
    }

    /// The path of the oldest retired file of at most `size` bytes, no longer kept here: the
    /// caller moves it where it writes `size` bytes over it, or unlinks it. Never a longer one,
    /// which would have to be cut short: a power cut can keep the new bytes and lose the cut,
    /// leaving bytes past the length the journal records.
    func take(atMost size: Int) -> String? {
        kept.withLock { kept in
            guard let index = kept.paths.firstIndex(where: { $0.record == nil && $0.size <= size }) else { return nil }
            let taken = kept.paths.remove(at: index)
            kept.bytes -= taken.size
            return taken.path
        }
    }

    /// The journal is durable through `position`: the files whose record it holds may be taken.
    func noteSynced(through position: Journal.Position) {
        kept.withLock { kept in
            guard kept.waiting > 0 else { return }
            for index in kept.paths.indices where kept.paths[index].record.map(position.covers) == true {
                kept.paths[index].record = nil
                kept.waiting -= 1
            }
        }
    }

    /// Unlinks every file kept, then `retired/` unless another instance keeps files there.
    func removeAll(layout: Layout) {
        let paths = kept.withLock { kept in
            defer { kept = ([], 0, 0) }
            return kept.paths.map(\.path)
        }
        for path in paths { _ = layout.directory.unlink(path) }
        _ = layout.directory.rmdir(layout.retired)
    }
}

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
/// Each instance keeps its own files, at most ``capacity``; `close()` removes them, and opening
/// a cache no other instance has open empties `retired/` (what a crash left).
final class RetiredFiles: Sendable {
    static let capacity = 256
    private let paths = PthreadMutex([String]())

    /// Moves the file at `path` to `target` in `retired/` (made when missing); false when this
    /// instance keeps ``capacity`` files already or the move failed: the caller unlinks it then.
    func retire(_ path: String, to target: @autoclosure () -> String, layout: Layout) -> Bool {
        guard paths.withLock({ $0.count < Self.capacity }) else { return false }
        let target = target()
        var moved = layout.directory.rename(path, target)
        if case .failure(.noSuchFileOrDirectory) = moved, case .success = layout.directory.mkdir(layout.retired, 0o700) {
            moved = layout.directory.rename(path, target)
        }
        guard case .success = moved else { return false }
        paths.withLock { $0.append(target) }
        return true
    }

    /// A retired file's path, no longer kept here: the caller moves it where it writes, or
    /// unlinks it.
    func take() -> String? { paths.withLock { $0.popLast() } }

    /// Unlinks every file kept, then `retired/` unless another instance keeps files there.
    func removeAll(layout: Layout) {
        for path in paths.withLock({ paths in defer { paths = [] }; return paths }) { _ = layout.directory.unlink(path) }
        _ = layout.directory.rmdir(layout.retired)
    }
}

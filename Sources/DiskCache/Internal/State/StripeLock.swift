import DiskCacheLocking

/// A lock per group of keys: a writer holds its key's stripe from the moment its files are
/// renamed into place until its journal record is appended and the index updated, so two
/// writers of one key cannot interleave, while writers of other keys go on in parallel.
final class StripeLock: Sendable {
    let mutex = PthreadMutex(())
}

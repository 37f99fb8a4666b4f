import Foundation
import Logging
import DiskCacheLocking
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// Making appended records durable: the journal's fsync (shared by concurrent callers), its
// name's directory sync, and the pending access records.

extension DiskCache {
    /// Group commit: returns once the journal is durable through `position`. Concurrent
    /// callers queue on `journalSynced`; the first syncs everything written so far, and the rest
    /// find their records already covered.
    func syncJournal(through position: Journal.Position) throws(DiskCacheError) {
        try journalSynced.withLock { synced throws(DiskCacheError) in
            if synced.covers(position) {
                // A record appended before its file was retired may have been synced by then.
                retiredFiles.noteSynced(through: synced)
                return
            }
            let (journal, end) = state.withLock { ($0.journal, $0.journalEnd) }
            try syncJournalName()
            // A compaction since `position` wrote and synced a new journal holding the record.
            if end.generation > position.generation {
                synced = Journal.Position(generation: end.generation, end: 0)
                retiredFiles.noteSynced(through: synced)
                return
            }
            // Data only: the records, and the size when an append grew the file. Appends
            // overwrite zeros written ahead (`CacheState.writeAhead(for:)`), so as a rule this
            // flushes no metadata at all.
            try Syscall.fsync(journal.fd, dataOnly: true).get(orThrow: "sync the journal", path: layout.journal)
            synced = end
            retiredFiles.noteSynced(through: end)
        }
    }

    /// Syncs the cache directory when the journal's name may not be durable yet
    /// (`CacheState.journalNameUnsynced`): at most once after an open and after each compaction.
    func syncJournalName() throws(DiskCacheError) {
        let (unsynced, generation) = state.withLock { ($0.journalNameUnsynced, $0.journalGeneration) }
        guard unsynced else { return }
        try layout.directory.fsyncDirectory(layout.root).get(orThrow: "sync the cache directory", path: layout.root)
        state.withLock { if $0.journalGeneration == generation { $0.journalNameUnsynced = false } }
    }

    func flushPendingAccess() throws(DiskCacheError) {
        try state.withLock { state throws(DiskCacheError) in
            guard !state.isClosed, let record = state.takePendingAccessRecord() else { return }
            _ = try state.append(record, records: 1, path: layout.journal)
        }
    }
}

extension Result where Success: ~Copyable, Failure == SyscallError {
    /// The value, or a ``DiskCacheError`` saying what could not be done.
    consuming func get(orThrow action: String, path: String?) throws(DiskCacheError) -> Success {
        switch consume self {
        case .success(let value): return value
        case .failure(let error): throw DiskCacheError.io(error, action, path: path)
        }
    }
}

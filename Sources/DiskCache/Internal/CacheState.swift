import DiskCacheLocking
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An open file descriptor, closed when the last reference goes. The journal's descriptor
/// is shared this way so that a group-commit fsync running while compaction swaps in a new
/// journal never fsyncs (or closes) a number that has meanwhile been reused.
final class FileDescriptor: Sendable {
    let fd: Int32
    init(_ fd: Int32) { self.fd = fd }
    deinit { Syscall.close(fd) }
}

/// A lock per group of keys: a writer holds its key's stripe from the moment its files are
/// renamed into place until its journal record is appended and the index updated, so two
/// writers of one key cannot interleave, while writers of other keys go on in parallel.
final class StripeLock: Sendable {
    let mutex = PthreadMutex(())
}

/// Everything the store mutates, behind one lock. Only short work happens under it:
/// index updates and journal appends (one `pwrite`), never an fsync.
struct CacheState {
    var index: Index
    var journal: FileDescriptor
    /// Bytes in the journal file: where the next record goes.
    var journalLength: Int64
    /// Disk blocks are reserved up to here, so appends below it cannot fail with ENOSPC.
    var reservedEnd: Int64
    var canReserve = true
    /// Records in the current journal file (after a compaction, one a live entry).
    var journalRecords: Int
    /// Bumped by each compaction, which replaces the journal file.
    var journalGeneration = 0
    /// Access times waiting to be journaled as one ACCESS record, in the order of the reads
    /// (an array, not a dictionary: a hit appends without hashing; duplicates go at the flush).
    var pendingAccess: [(KeyHash, Int64)] = []
    /// While a compaction runs, the records appended meanwhile, to be copied to the new journal.
    var compactionDelta: [UInt8]?
    var journalRecordsAtSnapshot = 0
    /// Something was written since the last group commit.
    var isDirty = false
    /// The orphan scan an unclean shutdown calls for has not finished: until it has, `close()`
    /// writes no clean-shutdown record.
    var orphanScanPending = false
    var isClosed = false
    var statistics = DiskCache.Statistics()
    /// Limits in force (they can change while open).
    var diskCapacity: Int64 = 0
    var countLimit: Int?
    /// No entry expires before this second (0: none expires); lets an idle sweep skip the index scan.
    var earliestExpirySeconds: UInt32 = 0
    var lastSweep: DiskCache.SweepReport?

    /// Notes an inserted entry's expiry for the sweeper.
    mutating func noteExpiry(_ entry: IndexEntry) {
        guard entry.expiresSeconds != 0 else { return }
        if earliestExpirySeconds == 0 || entry.expiresSeconds < earliestExpirySeconds {
            earliestExpirySeconds = entry.expiresSeconds
        }
    }

    /// Bytes of the journal as the sweeper counts it.
    func journalDiskUsage(blockSize: Int64) -> Int64 { roundUp(journalLength, blockSize) }

    static let reservationChunk: Int64 = 1 << 20
    static let reservationMargin: Int64 = 64 << 10

    /// Makes sure an append of `bytes` will find reserved blocks. Called before a write
    /// renames its files into place, so that a full disk fails the write while nothing has
    /// changed yet.
    mutating func reserveJournalSpace(_ bytes: Int, path: String) throws(DiskCacheError) {
        guard canReserve, journalLength + Int64(bytes) + Self.reservationMargin > reservedEnd else { return }
        let length = max(Self.reservationChunk, Int64(bytes) + Self.reservationMargin)
        switch Syscall.reserve(journal.fd, offset: journalLength, length: length) {
        case .success:
            reservedEnd = journalLength + length
        case .failure(let error) where error.isOutOfSpace:
            // Room for this record alone may still be there; ask for exactly that before giving up.
            if case .success = Syscall.reserve(journal.fd, offset: journalLength, length: Int64(bytes)) {
                reservedEnd = journalLength + Int64(bytes)
                return
            }
            throw DiskCacheError.io(error, "reserve journal space", path: path)
        case .failure:
            // The filesystem cannot reserve (e.g. no fallocate); appends go ahead unreserved.
            canReserve = false
        }
    }

    /// Appends encoded records; returns the journal generation and its length after them.
    mutating func append(_ bytes: [UInt8], records: Int, path: String) throws(DiskCacheError) -> (generation: Int, end: Int64) {
        // After close the lock is released: another owner may be appending to this file.
        guard !isClosed else { throw DiskCacheError.closed() }
        let result = bytes.withUnsafeBytes { Syscall.pwriteAll(journal.fd, $0, at: journalLength) }
        if case .failure(let error) = result {
            // Do not leave half a record for the next one to follow.
            _ = Syscall.ftruncate(journal.fd, journalLength)
            reservedEnd = journalLength  // truncating also gave back the reserved blocks
            throw DiskCacheError.io(error, "append to the journal", path: path)
        }
        journalLength += Int64(bytes.count)
        journalRecords += records
        compactionDelta?.append(contentsOf: bytes)
        isDirty = true
        return (journalGeneration, journalLength)
    }

    /// Takes the pending access times as one encoded ACCESS record (nil if there are none).
    mutating func takePendingAccessRecord() -> [UInt8]? {
        guard !pendingAccess.isEmpty else { return nil }
        // The last access of each live entry; a removed entry's reads are dropped.
        var latest: [KeyHash: Int64] = [:]
        latest.reserveCapacity(pendingAccess.count)
        for (hash, time) in pendingAccess where index[hash] != nil { latest[hash] = time }
        pendingAccess.removeAll(keepingCapacity: true)
        guard !latest.isEmpty else { return nil }
        let items = latest.map { ($0.key, $0.value) }
        return Journal.encode(.access(items))
    }
}

/// The group-commit state: how much of which journal is known to be on stable storage.
struct SyncState {
    var generation = 0
    var syncedLength: Int64 = 0
}

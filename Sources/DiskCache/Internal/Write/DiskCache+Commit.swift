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

// The put transaction every write goes through (admission, the new slot's files, the PUT
// record, the old files discarded) and the writing of an entry file.

extension DiskCache {
    /// Whether `Configuration.admission` lets a store of `hash` write: always with
    /// `.everyStore`, for a key the cache holds or evicted lately (S3-FIFO's ghost), while the
    /// cache is below its limits' low watermark (there is room: nothing would be evicted for it),
    /// else on the key's `minimumUses`-th store (see ``DiskCache/Admission``). A declined store
    /// is counted.
    func admits(_ hash: KeyHash) -> Bool {
        let admission = configuration.admission
        guard admission.minimumUses > 1 else { return true }
        let mark = configuration.lowWatermark
        return state.withLock { state in
            // A closed cache's store goes on, to throw `closed`.
            if state.isClosed || state.index[hash] != nil || state.index.wasEvictedLately(hash) {
                state.declinedUses.forget(hash)
                return true
            }
            let usage = state.index.diskUsage + state.journalDiskUsage(blockSize: blockSize)
            if Double(usage) < mark * Double(state.diskCapacity),
               state.countLimit.map({ Double(state.index.count) < mark * Double($0) }) ?? true {
                return true
            }
            let window = admission.window ?? state.countLimit ?? max(4096, state.index.count)
            guard state.declinedUses.admits(hash, minimumUses: admission.minimumUses, window: window) else {
                state.statistics.declinedStores += 1
                return false
            }
            return true
        }
    }

    /// A write's new files, placed in the slot the committed entry does not use, and the PUT
    /// record that commits them (see ``commitWrite(_:recordSize:counting:placing:)``).
    struct PlacedFiles {
        var put: Journal.Put
        /// In `.immediate` only: a PUT+FILE record of `put` holding the whole `.meta` file (an
        /// inline entry), written but not synced. It is appended instead of the PUT, and the
        /// journal's one fsync makes the write durable; the file and its directory entry become
        /// durable at the next checkpoint (``checkpoint()``), and a power cut before that is
        /// repaired at open from the record (`Opener.restoreCarriedFiles`).
        var carryingRecord: [UInt8]? = nil
    }

    /// What a committed write counts as in ``DiskCache/Statistics``.
    enum WriteKind { case value, metadata }

    /// The put transaction: every write of an entry (``store(_:for:metadata:expires:)-9xfei``,
    /// the streamed commit, ``DiskCache/updateMetadata(_:for:)-8hehy``) goes through it. Holding the key's
    /// stripe, it
    /// 1. throws `closed` when the cache is, refuses while this instance is behind the journal
    ///    (the committed entry, whose slot the new files must not use, is not known), and
    ///    reserves `recordSize` bytes of journal so that a full disk fails the write before
    ///    anything is written;
    /// 2. calls `place` with the committed entry, if any, and the slot it does not use: `place`
    ///    writes the new files there and returns their PUT, or nil to commit nothing;
    /// 3. in `.immediate` (unless the record carries the file) syncs the shard directory;
    ///    appends the record and updates the index under one lock; in `.immediate` makes the
    ///    record durable before the earlier value's files go, so that power loss cannot leave
    ///    neither value;
    /// 4. discards the committed entry's files, garbage now (``discardFiles(_:of:)``).
    ///
    /// A failure before the append removes the new slot's files and leaves the committed entry.
    /// Returns whether a record was committed.
    @discardableResult
    func commitWrite(_ hash: KeyHash, recordSize: Int = Journal.putRecordSize, counting kind: WriteKind = .value,
                     placing place: (_ current: IndexEntry?, _ slot: UInt8) throws(DiskCacheError) -> PlacedFiles?)
        throws(DiskCacheError) -> Bool {
        let immediate = configuration.durability.mode == .immediate
        let committed = try withStripe(hash) { () throws(DiskCacheError) -> Bool in
            let current = try state.withLock { state throws(DiskCacheError) -> IndexEntry? in
                guard !state.isClosed else { throw DiskCacheError.closed() }
                guard !state.isBehind else { throw state.behindError() }
                try state.reserveJournalSpace(recordSize, path: layout.journal)
                return state.index[hash]
            }
            let slot: UInt8 = current?.slot == 0 ? 1 : 0
            let position: Journal.Position
            do throws(DiskCacheError) {
                guard let placed = try place(current, slot) else { return false }
                if immediate && placed.carryingRecord == nil {
                    let shard = layout.shardDirectory(hash)
                    try layout.directory.fsyncDirectory(shard).get(orThrow: "sync the shard directory", path: shard)
                }
                // Append and index update under one lock: a compaction snapshots the index and
                // collects later appends, so it must never see one without the other.
                position = try state.withLock { state throws(DiskCacheError) in
                    let record = placed.carryingRecord ?? Journal.encode(.put(placed.put))
                    let position = try state.append(record, records: 1, path: layout.journal)
                    if placed.carryingRecord != nil {
                        state.journalCarriesFiles = true
                        state.needsCheckpoint = true
                    }
                    let entry = IndexEntry(placed.put)
                    state.index.insert(entry, for: hash)
                    state.keptFiles?.drop(hash)
                    state.noteExpiry(entry)
                    switch kind {
                    case .value: state.statistics.writes += 1
                    case .metadata: state.statistics.metadataUpdates += 1
                    }
                    return position
                }
            } catch {
                // Not committed: the new slot's files go, the committed entry stays.
                unlinkFiles(hash, slot: slot, body: true)
                throw error
            }
            if immediate { try syncJournal(through: position) }
            if let current { discardFiles(hash, of: current) }
            return true
        }
        if committed { maintenance.noteWrite(owner: self) }
        return committed
    }

    /// Creates an entry file in a slot no record vouches for (see `FileIO.writeEntryFile`); a
    /// `.meta` file (`reusing`) reuses a retired one when this instance keeps one. A shard
    /// directory that has gone (removed by hand while the cache was open) is made again.
    func writeEntryFile(_ path: String, _ parts: [UnsafeRawBufferPointer], hash: KeyHash, sync: Bool,
                        reusing: Bool = false, action: String) throws(DiskCacheError) {
        let retired = reusing ? retiredFiles.take(atMost: parts.reduce(0) { $0 + $1.count }) : nil
        var result = FileIO.writeEntryFile(path, parts, sync: sync, in: layout.directory, reusing: retired)
        if case .failure(.noSuchFileOrDirectory) = result {
            try restoreShard(hash)
            result = FileIO.writeEntryFile(path, parts, sync: sync, in: layout.directory)
        }
        try result.get(orThrow: action, path: path)
    }

    /// Makes the shard directory of `hash` again (removed by hand while the cache was open), durably.
    func restoreShard(_ hash: KeyHash) throws(DiskCacheError) {
        let shard = layout.shardDirectory(hash)
        switch layout.directory.mkdir(shard, 0o700) {
        case .success, .failure(.fileExists): break
        case .failure(let error): throw DiskCacheError.io(error, "create a shard directory", path: shard)
        }
        // The shard's name is durable before anything in it can be acknowledged.
        try layout.directory.fsyncDirectory(layout.root).get(orThrow: "sync the cache directory", path: layout.root)
    }

    /// In `.immediate`, syncs the journal through its end: what an explicit removal calls when it
    /// found nothing (or less) to remove, since what it asked to remove may have gone in a
    /// removal not yet durable (one the cache made itself, see ``remove(_:reason:key:confirming:where:)``,
    /// or an earlier attempt that failed to sync), and a removal a caller asked for returns only
    /// once durable. Costs nothing when the journal is synced.
    package func syncRemovals() throws(DiskCacheError) {
        guard configuration.durability.mode == .immediate else { return }
        try syncJournal(through: state.withLock { $0.journalEnd })
    }
}

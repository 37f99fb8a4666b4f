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

// Removing an entry: the REMOVE record, then its files (the `.meta` retired for reuse, the
// `.body` unlinked); a read's damage confirmed under the stripe before it is removed.

extension DiskCache {
    /// Removes a damaged entry if the index still holds what the reader saw and its files are
    /// still damaged when read again under the key's lock; false if a writer replaced it
    /// meanwhile, or if it reads well now (the first read met a write of the same value into the
    /// same slot: the reader should look again).
    ///
    /// The second read is what makes this safe: writers of a key hold its stripe for the whole
    /// write, so under the stripe the committed entry's files are exactly what a read must find.
    /// Comparing index entries alone is not enough, since two commits of one value into one slot
    /// within a millisecond are equal.
    func removeIfUnchanged(_ hash: KeyHash, _ seen: IndexEntry, key: String, pageCacheOnly: PageCacheOnly? = nil) -> Bool {
        let confirmDamage: (IndexEntry) -> Bool = { entry in
            switch self.readEntry(hash, key: key, expected: entry, wantBody: entry.isInline, pageCacheOnly: pageCacheOnly) {
            case .damaged: return true
            case .found where !entry.isInline: return self.bodyFileIsDamaged(hash, entry, pageCacheOnly: pageCacheOnly)
            default: return false
            }
        }
        // A removal that throws (a closed cache, a failed journal append) ends the read as a miss.
        guard let removed = try? remove(hash, reason: .corrupt, key: key, confirming: confirmDamage, where: { $0.isSameCommit(as: seen) })
        else {
            countMiss()
            return true
        }
        if removed {
            logger.warning("Removed a damaged entry", metadata: ["hash": "\(hash)"])
        }
        return removed
    }

    /// Whether `entry`'s body file is missing, of the wrong size or (with checksums on) fails
    /// its checksum (see ``checkBodyFile(_:_:_:)``). A read that fails for another reason says
    /// nothing about the file: false.
    private func bodyFileIsDamaged(_ hash: KeyHash, _ entry: IndexEntry, pageCacheOnly: PageCacheOnly?) -> Bool {
        let file: OpenFile
        switch ReadOutcome(opening: layout.openEntryFileToRead(hash, slot: entry.slot, body: true)) {
        case .found(let opened): file = opened
        case .damaged: return true
        default: return false
        }
        if case .damaged = checkBodyFile(file.fd, hash, entry, pageCacheOnly: pageCacheOnly) { return true }
        return false
    }

    func removeExpired(_ hash: KeyHash, _ seen: IndexEntry, key: String) {
        _ = try? remove(hash, reason: .expired, key: key) { $0.isSameCommit(as: seen) }
        state.withLock {
            $0.statistics.misses += 1
            $0.statistics.expiredReads += 1
        }
    }

    /// Removes the entry for `hash` if `predicate` accepts it; returns whether it did. Reports
    /// the removal to `onEviction` with `key` (read from the metadata file when nil and a
    /// callback is set).
    @discardableResult
    ///
    /// `confirming`, when given, is asked about the entry holding the key's stripe (so with no
    /// write of the key part way), before anything is removed: false keeps the entry.
    func remove(_ hash: KeyHash, reason: RemovalReason, key: String?, confirming: ((IndexEntry) -> Bool)? = nil,
                where predicate: (IndexEntry) -> Bool = { _ in true }) throws(DiskCacheError) -> Bool {
        var key = key
        if key == nil, configuration.onEviction != nil, let entry = state.withLock({ $0.index[hash] }) {
            key = keyOfEntry(hash, entry)
        }
        let position: (journal: Journal.Position, size: Int64)? = try withStripe(hash) { () throws(DiskCacheError) in
            if let confirming {
                guard let entry = state.withLock({ $0.index[hash] }), predicate(entry), confirming(entry) else { return nil }
            }
            let removed = try state.withLock { state throws(DiskCacheError) in
                // Decided holding the append lock (shared mode), after the journal was followed
                // to its end: the entry whose files are unlinked is the one the record removes.
                let removed = try state.append(path: layout.journal) { state throws(DiskCacheError) -> (bytes: [UInt8], records: Int, result: IndexEntry)? in
                    guard let entry = state.index[hash], predicate(entry) else { return nil }
                    return (Journal.encode(.remove(hash)), 1, entry)
                }
                // The index changes only once the record is written (a failed append leaves both as they were).
                guard removed != nil else { return removed }
                state.index.remove(hash)
                state.keptFiles?.drop(hash)
                switch reason {
                case .corrupt:
                    state.statistics.corruptEntriesRemoved += 1
                    state.statistics.misses += 1
                case .explicit:
                    state.statistics.removals += 1
                default:
                    break
                }
                return removed
            }
            guard let removed else { return nil }
            // What frees space frees it; a damaged entry's files may not be files at all. In
            // `.immediate` the `.meta` file is not written over before the record is durable
            // (see `RetiredFiles`): an explicit removal syncs it below, one the cache makes itself
            // when its sweep ends.
            discardFiles(hash, of: removed.result, reusing: reason != .freeSpace && reason != .corrupt,
                         record: configuration.durability.mode == .immediate ? removed.position : nil)
            return (removed.position, removed.result.size)
        }
        guard let position else {
            if reason == .explicit { try syncRemovals() }
            return false
        }
        configuration.onEviction?(Eviction(key: key, size: position.size, reason: reason))
        // In `.immediate` a removal a caller asked for returns once durable. One the cache makes
        // itself (an eviction, an expiry, damage found) answers no caller: the sweep's end or
        // the next write's sync makes its record durable, so that puts at capacity pay one flush
        // each, not two.
        if reason == .explicit, configuration.durability.mode == .immediate { try syncJournal(through: position.journal) }
        return true
    }

    /// Discards the files of `entry`, which no record vouches for any more: the `.meta` file is
    /// retired for a later write to reuse (``RetiredFiles``) when `reusing` (once the journal is
    /// durable through `record`, when given), or unlinked; a `.body` file is unlinked (never
    /// written again: a server may be sending it).
    func discardFiles(_ hash: KeyHash, of entry: IndexEntry, reusing: Bool = true, record: Journal.Position? = nil) {
        let meta = layout.metaFile(hash, slot: entry.slot)
        if reusing, retiredFiles.retire(meta, size: Int64(entry.metaSize), to: layout.retired + "/" + temporaryName("meta"),
                                        layout: layout, record: record) {
            unlinkFiles(hash, slot: entry.slot, meta: false, body: !entry.isInline)
        } else {
            unlinkFiles(hash, slot: entry.slot, body: !entry.isInline)
        }
    }

    /// Unlinks the `.meta` file of `slot` (unless `meta` is false), and its `.body` file when `body`.
    func unlinkFiles(_ hash: KeyHash, slot: UInt8, meta: Bool = true, body: Bool) {
        if meta { _ = layout.directory.unlink(layout.metaFile(hash, slot: slot)) }
        if body { _ = layout.directory.unlink(layout.bodyFile(hash, slot: slot)) }
    }
}

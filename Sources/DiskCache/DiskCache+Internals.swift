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

extension DiskCache {
    /// Why an entry left the cache.
    public enum RemovalReason: String, Hashable, Sendable, CaseIterable {
        /// The sweeper evicted it to bring the cache under its disk capacity.
        case capacity
        /// The sweeper evicted it to bring the cache under its count limit.
        case countLimit
        /// The sweeper evicted it because the volume's free space fell under the floor.
        case freeSpace
        /// Its expiry date passed.
        case expired
        /// A read found its files damaged or missing.
        case corrupt
        /// `removeValue` or `removeEntries(modifiedSince:)`.
        case explicit
    }

    /// An entry's metadata as read, with the body when one was read.
    typealias EntryRead = (meta: EntryMetadata, body: Data?)

    /// Reads an entry file whole (and its XXH3-64, when `hashing`); the caller owns the buffer
    /// (``EntryBytes``). A short file is damage, as ``ReadOutcome/init(opening:)`` says of an open.
    private func readEntryFile(_ hash: KeyHash, slot: UInt8, body: Bool, count: Int, hashing: Bool = false,
                               pageCacheOnly: PageCacheOnly?) -> ReadOutcome<(buffer: UnsafeMutableRawBufferPointer, checksum: UInt64?)> {
        let opening = { self.layout.openEntryFileToRead(hash, slot: slot, body: body) }
        let withoutWaiting = pageCacheOnly != nil
        let result = hashing
            ? FileIO.readHashing(opening: opening, count: count, withoutWaiting: withoutWaiting).map { $0.map { ($0.0, Optional($0.1)) } }
            : FileIO.read(opening: opening, count: count, withoutWaiting: withoutWaiting).map { $0.map { ($0, UInt64?.none) } }
        switch result {
        case .success(let (buffer, checksum)?): return .found((buffer, checksum))
        case .success(nil): return .damaged
        case .failure(let error):
            pageCacheOnly?.note(error)
            return ReadOutcome<Int32>(opening: .failure(error)).withoutValue()
        }
    }

    static func systemMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    /// Runs `body` holding the stripe of `hash`: its mutex, and in shared mode its byte in
    /// ``SharedRegion`` too, so that no writer of the key in any instance is part way.
    /// In shared mode it throws what ``SharedRegion/withStripes(from:count:_:)`` throws (a lock
    /// not had in time, a page that cannot be trusted) without running `body`.
    func withStripe<T>(_ hash: KeyHash, _ body: () throws(DiskCacheError) -> T) throws(DiskCacheError) -> T {
        let index = SharedRegion.stripe(of: hash)  // `stripes` has one lock per stripe of the page
        return try stripes[index].mutex.withLock { _ throws(DiskCacheError) -> T in
            guard let sharedRegion else { return try body() }
            return try sharedRegion.withStripes(from: index, body)
        }
    }

    /// Runs `body` holding every stripe, so no write is between rename and journal append.
    /// `acrossInstances: false` takes only this instance's (closing does not wait for others).
    func withAllStripes<T: Sendable>(acrossInstances: Bool = true, _ body: () throws(DiskCacheError) -> T) throws(DiskCacheError) -> T {
        func lock(_ i: Int) throws(DiskCacheError) -> T {
            if i == stripes.count {
                guard acrossInstances, let sharedRegion else { return try body() }
                return try sharedRegion.withStripes(from: 0, count: stripes.count, body)
            }
            return try stripes[i].mutex.withLock { _ throws(DiskCacheError) in try lock(i + 1) }
        }
        return try lock(0)
    }

    /// Starts collecting the keys other instances store or remove (shared mode only; see
    /// ``takeExternalChanges()``).
    func trackExternalChanges() {
        state.withLock { state in
            if state.shared != nil, state.externalChanges == nil { state.externalChanges = ExternalChanges() }
        }
    }

    /// The keys other instances stored or removed since the last call (after following the
    /// journal), or nil when there are none or nothing is collected.
    func takeExternalChanges() -> ExternalChanges? {
        state.withLock { state in
            guard let changes = state.externalChanges, !changes.isEmpty else { return nil }
            state.externalChanges = ExternalChanges()
            return changes
        }
    }

    func throwIfClosed() throws(DiskCacheError) {
        if state.withLock({ $0.isClosed }) { throw DiskCacheError.closed() }
    }

    func countMiss() {
        state.withLock { $0.statistics.misses += 1 }
    }

    /// The entry for a read, counted as a hit and its access time noted, all under one lock:
    /// a read that then fails takes the hit back with ``takeBackHit(countingMiss:)``. Nil (a miss) when absent.
    /// An entry that has surely expired is returned uncounted; the caller removes it.
    func lookupForRead(_ hash: KeyHash, at now: Int64) -> IndexEntry? {
        state.withLock { state in
            // One lookup finds the entry and notes the access (an expired entry's note is moot:
            // it is removed next).
            guard !state.isClosed, let (entry, touched) = state.index.entry(hash, touchingAt: now) else {
                state.statistics.misses += 1
                return nil
            }
            if entry.hasExpired(atMilliseconds: now) { return entry }
            state.statistics.hits += 1
            // An entry whose access time is already this second (kept to the second) was
            // stored or noted in this second: nothing more to note. (If that note's batch fails
            // to append, the second is lost until a later read moves it: access times are
            // advisory, and a compaction writes the index's own.)
            guard touched else { return entry }
            state.pendingAccess.append((hash, now))
            if state.pendingAccess.count >= 8192, let record = state.takePendingAccessRecord() {
                // Access times are advisory: losing a batch only blurs the eviction order.
                _ = try? state.append(record, records: 1, path: layout.journal)
            }
            return entry
        }
    }

    /// ``openBody(for:pageCacheOnly:reading:_:)`` reading the entry's metadata file (and an
    /// inline body with it).
    func openBody<T>(for key: String, pageCacheOnly: PageCacheOnly? = nil,
                     _ open: (KeyHash, IndexEntry, EntryMetadata, Data?) throws(DiskCacheError) -> ReadOutcome<T>)
        throws(DiskCacheError) -> T? {
        try openBody(for: key, pageCacheOnly: pageCacheOnly, reading: { hash, entry in
            readEntry(hash, key: key, expected: entry, wantBody: entry.isInline, pageCacheOnly: pageCacheOnly)
        }, open)
    }

    /// The read path every read of a value takes: the lookup (counting a hit), the expiry,
    /// `reading` the entry's files, their key and expiry; then `open` makes what the caller
    /// hands out, from the entry, its metadata and the body if one was read. A hit that turns
    /// out a miss is taken back, a damaged entry is removed (once confirmed, see
    /// ``removeIfUnchanged(_:_:key:)``), and the whole is tried again when a writer replaced the
    /// entry meanwhile: up to four times without the key's lock, then once holding it.
    /// `pageCacheOnly`, which `reading` and `open` read with: a read that gave up rather than
    /// wait for the disk ends as a miss that is not counted.
    ///
    /// Both closures are non-escaping, so a read allocates no closure context and retains
    /// nothing for them.
    func openBody<T>(for key: String, pageCacheOnly: PageCacheOnly?,
                     reading: (KeyHash, IndexEntry) -> ReadOutcome<EntryRead>,
                     _ open: (KeyHash, IndexEntry, EntryMetadata, Data?) throws(DiskCacheError) -> ReadOutcome<T>)
        throws(DiskCacheError) -> T? {
        let hash = configuration.keyHasher.hash(key)
        /// One attempt; `seen` is the entry it looked up.
        func once(_ seen: inout IndexEntry?) throws(DiskCacheError) -> ReadOutcome<T> {
            let now = configuration.clock()
            guard let entry = lookupForRead(hash, at: now) else { return .absent }
            seen = entry
            // Not counted as a hit by the lookup: nothing to take back.
            if entry.hasExpired(atMilliseconds: now) { return .expired }
            let outcome: ReadOutcome<T>
            switch reading(hash, entry) {
            case .found(let read) where read.meta.expires.map({ $0 <= now }) ?? false:
                outcome = .expired
            case .found(let read):
                do throws(DiskCacheError) {
                    outcome = try open(hash, entry, read.meta, read.body)
                } catch {
                    takeBackHit(countingMiss: pageCacheOnly?.gaveUp != true)
                    throw error
                }
            case let other:
                outcome = other.withoutValue()
            }
            switch outcome {
            case .found, .absent: break
            case .otherKey:
                takeBackHit(countingMiss: pageCacheOnly?.gaveUp != true)
                state.withLock { $0.statistics.hashCollisions += 1 }
            case .unavailable:
                takeBackHit(countingMiss: pageCacheOnly?.gaveUp != true)
            case .expired, .damaged, .replaced:
                // The removal, or the next attempt, counts what the read ends as.
                takeBackHit(countingMiss: false)
            }
            return outcome
        }
        // Without the key's lock first; a reader that a writer of the key (in any instance)
        // overtook four times tries once more holding it, which no writer of the key can
        // overtake: a key that always had a value never reads as a miss.
        for attempt in 0..<5 {
            var seen: IndexEntry?
            let outcome = attempt < 4 ? try once(&seen) : try withStripe(hash) { () throws(DiskCacheError) in try once(&seen) }
            switch (outcome, seen) {
            case (.found(let value), _): return value
            case (.expired, let entry?):
                removeExpired(hash, entry, key: key)
                return nil
            case (.damaged, let entry?):
                if removeIfUnchanged(hash, entry, key: key, pageCacheOnly: pageCacheOnly) { return nil }
            case (.replaced, _):
                continue
            default:
                return nil
            }
        }
        countMiss()
        return nil
    }

    /// Whether the index still holds `entry` for `hash`. A body file opened (or linked) while
    /// it does is that entry's: nothing writes to a committed slot's files, and a slot is reused
    /// only after its entry was replaced.
    func isCurrent(_ hash: KeyHash, _ entry: IndexEntry) -> Bool {
        state.withLock { $0.index[hash]?.isSameCommit(as: entry) ?? false }
    }

    /// Whether a journal record vouches for this entry file: its entry uses the slot, and a body
    /// file belongs to an entry whose body is not inline. Call under the hash's stripe, so that
    /// no store of the key is between writing its files and committing them.
    /// nil from an instance behind the journal (``CacheState/isBehind``): it cannot tell, and
    /// must neither remove the file nor count the question as answered.
    func isVouched(_ hash: KeyHash, slot: UInt8, kind: ShardScanner.FileKind) -> Bool? {
        let (entry, isBehind) = state.withLock { ($0.index[hash], $0.isBehind) }
        guard !isBehind else { return nil }
        return entry?.vouches(forSlot: slot, kind: kind) ?? false
    }

    /// A missing body file is damage if the entry is still the one looked up, else a replacement.
    func missing<T>(_ hash: KeyHash, _ entry: IndexEntry) -> ReadOutcome<T> {
        isCurrent(hash, entry) ? .damaged : .replaced
    }

    /// Takes back the hit ``lookupForRead(_:at:)`` counted, for a read that found nothing.
    /// `countingMiss`: the read ends here, as a miss; otherwise what ends it counts it (a
    /// removal, or the next attempt's lookup), or nothing does (a read that gave up rather than
    /// wait for the disk, see ``PageCacheOnly``).
    func takeBackHit(countingMiss: Bool) {
        state.withLock {
            $0.statistics.hits -= 1
            if countingMiss { $0.statistics.misses += 1 }
        }
    }

    /// Reads an entry's `.meta` file, then checks that the index still holds `expected`: the
    /// file may have been retired and written again for another entry since it was opened
    /// (``RetiredFiles``), which only a replacement or removal of `expected` lets happen.
    /// The caller owns the buffer (``EntryBytes``).
    private func readMetaFile(_ hash: KeyHash, expected: IndexEntry,
                              pageCacheOnly: PageCacheOnly?) -> ReadOutcome<UnsafeMutableRawBufferPointer> {
        let outcome = readEntryFile(hash, slot: expected.slot, body: false, count: Int(expected.metaSize), pageCacheOnly: pageCacheOnly)
        // Behind the journal, the index cannot say: the read is not trusted.
        let current = state.withLock { !$0.isBehind && $0.index[hash]?.isSameCommit(as: expected) == true }
        switch outcome {
        case .found(let read) where current: return .found(read.buffer)
        case .found(let read):
            read.buffer.deallocate()
            return .replaced
        case .damaged where !current: return .replaced  // gone or cut short by a later write
        case let other: return other.withoutValue()
        }
    }

    /// Reads and checks an entry's files against what the index vouches for.
    func readEntry(_ hash: KeyHash, key: String, expected: IndexEntry, wantBody: Bool,
                   pageCacheOnly: PageCacheOnly? = nil) -> ReadOutcome<EntryRead> {
        let file: EntryBytes
        switch readMetaFile(hash, expected: expected, pageCacheOnly: pageCacheOnly) {
        case .found(let read): file = EntryBytes(read)
        case let other: return other.withoutValue()
        }
        guard var meta = file.withBytes(EntryMetadata.decode) else { return .damaged }
        // Another key of the same hash is a collision; one of another hash, a misplaced file.
        guard meta.key == key else { return configuration.keyHasher.hash(meta.key) == hash ? .otherKey : .damaged }
        guard meta.checksum == expected.checksum, meta.size == expected.size,
              (meta.inlineBody != nil) == expected.isInline else { return .damaged }
        if let inline = meta.inlineBody {
            meta.inlineBody = nil
            guard wantBody else { return .found((meta, nil)) }
            if configuration.verifiesChecksums, inline.withUnsafeBytes({ Checksum.xxh3($0) }) != meta.checksum {
                return .damaged
            }
            return .found((meta, Data(inline)))
        }
        guard wantBody else { return .found((meta, nil)) }
        return readBody(hash, meta: meta, slot: expected.slot, pageCacheOnly: pageCacheOnly)
    }

    /// ``readEntry(_:key:expected:wantBody:)`` for a read that wants only the value: the metadata
    /// file is read in place, and an inline body is handed out without a copy. The result's
    /// metadata carries only the key, size, checksum and expiry.
    func readValue(_ hash: KeyHash, key: String, expected: IndexEntry, pageCacheOnly: PageCacheOnly? = nil) -> ReadOutcome<EntryRead> {
        let file: EntryBytes
        switch readMetaFile(hash, expected: expected, pageCacheOnly: pageCacheOnly) {
        case .found(let read): file = EntryBytes(read)
        case let other: return other.withoutValue()
        }
        let view = file.withBytes { bytes in
            EntryMetadata.ReadView.parse(bytes).flatMap { $0.hasKey(key, in: bytes) ? $0 : nil }
        }
        guard let view else {
            // Not the layout this library writes, or another key: the full decoder decides.
            return readEntry(hash, key: key, expected: expected, wantBody: true, pageCacheOnly: pageCacheOnly)
        }
        let meta = EntryMetadata(key: key, size: view.size, checksum: view.checksum, created: expected.created,
                                 accessed: expected.accessedMilliseconds, expires: view.expires, metadata: [:], inlineBody: nil)
        guard view.checksum == expected.checksum, view.size == expected.size,
              (view.inlineBody != nil) == expected.isInline else { return .damaged }
        guard let inline = view.inlineBody else { return readBody(hash, meta: meta, slot: expected.slot, pageCacheOnly: pageCacheOnly) }
        if configuration.verifiesChecksums,
           file.withBytes({ Checksum.xxh3(UnsafeRawBufferPointer(rebasing: $0[inline])) }) != view.checksum {
            return .damaged
        }
        return .found((meta, file.data(inline)))
    }

    /// Reads and checks a body file of exactly `meta.size` bytes.
    private func readBody(_ hash: KeyHash, meta: EntryMetadata, slot: UInt8, pageCacheOnly: PageCacheOnly?) -> ReadOutcome<EntryRead> {
        switch readEntryFile(hash, slot: slot, body: true, count: Int(meta.size), hashing: configuration.verifiesChecksums,
                             pageCacheOnly: pageCacheOnly) {
        case .found(let read):
            let file = EntryBytes(read.buffer)
            if let checksum = read.checksum, checksum != meta.checksum { return .damaged }
            return .found((meta, file.data(0..<Int(meta.size))))
        case let other:
            return other.withoutValue()
        }
    }

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
        let fd: Int32
        switch ReadOutcome(opening: layout.openEntryFileToRead(hash, slot: entry.slot, body: true)) {
        case .found(let value): fd = value
        case .damaged: return true
        default: return false
        }
        defer { Syscall.close(fd) }
        if case .damaged = checkBodyFile(fd, hash, entry, pageCacheOnly: pageCacheOnly) { return true }
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

    /// The put transaction: every write of an entry (``store(_:for:metadata:expires:)-3d9hu``,
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

extension Result where Failure == SyscallError {
    /// The value, or a ``DiskCacheError`` saying what could not be done.
    func get(orThrow action: String, path: String?) throws(DiskCacheError) -> Success {
        switch self {
        case .success(let value): return value
        case .failure(let error): throw DiskCacheError.io(error, action, path: path)
        }
    }
}

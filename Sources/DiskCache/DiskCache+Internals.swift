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

    enum ReadResult {
        case found(EntryMetadata, Data?)
        /// The files belong to a key with the same hash.
        case otherKey
        /// Missing, short, not what the journal vouches for, or failing the checksum.
        case damaged
        /// The read failed for a reason that says nothing about the files (out of descriptors,
        /// out of memory, a transient I/O error): a miss, and the entry is left alone.
        case unavailable
    }

    /// An entry file's bytes (and their XXH3-64, when asked for), or why there are none: a
    /// missing or short file, a symbolic link (which `O_NOFOLLOW` refuses) or anything that is
    /// not a regular file is damage; any other failure is not the file's fault.
    private enum EntryFile {
        case bytes(UnsafeMutableRawBufferPointer, checksum: UInt64?)
        case failed(ReadResult)
    }

    private func readEntryFile(_ hash: KeyHash, slot: UInt8, body: Bool, count: Int, hashing: Bool = false) -> EntryFile {
        let opening = { self.layout.openEntryFileToRead(hash, slot: slot, body: body) }
        let result = hashing ? FileIO.readHashing(opening: opening, count: count).map { $0.map { ($0.0, Optional($0.1)) } }
                             : FileIO.read(opening: opening, count: count).map { $0.map { ($0, UInt64?.none) } }
        switch result {
        case .success(let (buffer, checksum)?): return .bytes(buffer, checksum: checksum)
        case .success(nil): return .failed(.damaged)
        case .failure(let error) where error == .noSuchFileOrDirectory || error == .tooManySymbolicLinks
                                        || FileIO.isNotAFile(error):
            return .failed(.damaged)
        case .failure:
            return .failed(.unavailable)
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
    /// a read that then fails takes the hit back with ``undoHit()``. Nil (a miss) when absent.
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
                // Access times are advisory: losing a batch only blurs LRU order.
                _ = try? state.append(record, records: 1, path: layout.journal)
            }
            return entry
        }
    }

    /// How one attempt of ``openBody(for:reading:_:)`` ended.
    enum ReadAttempt<T> {
        case done(T?)
        /// Damaged: removed once confirmed (a miss), else looked at again.
        case damaged(IndexEntry)
        case expired(IndexEntry)
        /// A writer replaced the entry between the lookup and the read: look again.
        case again
    }

    /// What a reader made of an entry's body (see ``openBody(for:reading:_:)``).
    enum BodyOpening<T> {
        case opened(T)
        /// The files do not match what the index vouches for: removed, a miss.
        case damaged
        /// The index moved on between the lookup and the open: look again.
        case replaced
        /// Failed for a reason that says nothing about the files: a miss, the entry kept.
        case unavailable
    }

    /// ``openBody(for:reading:_:)`` reading the entry's metadata file (and an inline body with it).
    func openBody<T>(for key: String,
                     _ open: (KeyHash, IndexEntry, EntryMetadata, Data?) throws(DiskCacheError) -> BodyOpening<T>)
        throws(DiskCacheError) -> T? {
        try openBody(for: key, reading: { hash, entry in readEntry(hash, key: key, expected: entry, wantBody: entry.isInline) }, open)
    }

    /// The read path every read of a value takes: the lookup (counting a hit), the expiry,
    /// `reading` the entry's files, their key and expiry; then `open` makes what the caller
    /// hands out, from the entry, its metadata and the body if one was read. A hit that turns
    /// out a miss is taken back, a damaged entry is removed (once confirmed, see
    /// ``removeIfUnchanged(_:_:key:)``), and the whole is tried again when a writer replaced the
    /// entry meanwhile: up to four times without the key's lock, then once holding it.
    ///
    /// Both closures are non-escaping, so a read allocates no closure context and retains
    /// nothing for them.
    func openBody<T>(for key: String,
                     reading: (KeyHash, IndexEntry) -> ReadResult,
                     _ open: (KeyHash, IndexEntry, EntryMetadata, Data?) throws(DiskCacheError) -> BodyOpening<T>)
        throws(DiskCacheError) -> T? {
        let hash = configuration.keyHasher.hash(key)
        func takeBackHit() {
            let counted = !Self.readGaveUpWaiting
            state.withLock {
                $0.statistics.hits -= 1
                if counted { $0.statistics.misses += 1 }
            }
        }
        func once() throws(DiskCacheError) -> ReadAttempt<T> {
            let now = configuration.clock()
            guard let entry = lookupForRead(hash, at: now) else { return .done(nil) }
            if entry.hasExpired(atMilliseconds: now) { return .expired(entry) }
            switch reading(hash, entry) {
            case .found(let meta, let inline):
                if let expires = meta.expires, expires <= now {
                    undoHit()
                    return .expired(entry)
                }
                let opening: BodyOpening<T>
                do throws(DiskCacheError) {
                    opening = try open(hash, entry, meta, inline)
                } catch {
                    takeBackHit()
                    throw error
                }
                switch opening {
                case .opened(let value): return .done(value)
                case .damaged:
                    undoHit()
                    return .damaged(entry)
                case .replaced:
                    undoHit()
                    return .again
                case .unavailable:
                    takeBackHit()
                    return .done(nil)
                }
            case .otherKey:
                takeBackHit()
                state.withLock { $0.statistics.hashCollisions += 1 }
                return .done(nil)
            case .damaged:
                undoHit()
                return .damaged(entry)
            case .unavailable:
                takeBackHit()
                return .done(nil)
            }
        }
        // Without the key's lock first; a reader that a writer of the key (in any instance)
        // overtook four times tries once more holding it, which no writer of the key can
        // overtake: a key that always had a value never reads as a miss.
        for attempt in 0..<5 {
            let outcome = attempt < 4 ? try once() : try withStripe(hash) { () throws(DiskCacheError) in try once() }
            switch outcome {
            case .done(let value): return value
            case .expired(let entry):
                removeExpired(hash, entry, key: key)
                return nil
            case .damaged(let entry):
                if removeIfUnchanged(hash, entry, key: key) { return nil }
            case .again:
                continue
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
    func missing<T>(_ hash: KeyHash, _ entry: IndexEntry) -> BodyOpening<T> {
        isCurrent(hash, entry) ? .damaged : .replaced
    }

    /// Takes back the hit ``lookupForRead(_:at:)`` counted, for a read that found nothing.
    func undoHit() {
        state.withLock { $0.statistics.hits -= 1 }
    }

    /// Reads and checks an entry's files against what the index vouches for.
    func readEntry(_ hash: KeyHash, key: String, expected: IndexEntry, wantBody: Bool) -> ReadResult {
        let metaBuffer: UnsafeMutableRawBufferPointer
        switch readEntryFile(hash, slot: expected.slot, body: false, count: Int(expected.metaSize)) {
        case .bytes(let buffer, _): metaBuffer = buffer
        case .failed(let result): return result
        }
        let decoded = EntryMetadata.decode(UnsafeRawBufferPointer(metaBuffer))
        metaBuffer.deallocate()
        guard var meta = decoded else { return .damaged }
        guard meta.key == key else { return .otherKey }
        guard meta.checksum == expected.checksum, meta.size == expected.size,
              (meta.inlineBody != nil) == expected.isInline else { return .damaged }
        if let inline = meta.inlineBody {
            meta.inlineBody = nil
            guard wantBody else { return .found(meta, nil) }
            if configuration.verifiesChecksums, inline.withUnsafeBytes({ Checksum.xxh3($0) }) != meta.checksum {
                return .damaged
            }
            return .found(meta, Data(inline))
        }
        guard wantBody else { return .found(meta, nil) }
        return readBody(hash, meta: meta, slot: expected.slot)
    }

    /// ``readEntry(_:key:expected:wantBody:)`` for a read that wants only the value: the metadata
    /// file is read in place, and an inline body is handed out without a copy. The result's
    /// metadata carries only the key, size, checksum and expiry.
    func readValue(_ hash: KeyHash, key: String, expected: IndexEntry) -> ReadResult {
        let metaBuffer: UnsafeMutableRawBufferPointer
        switch readEntryFile(hash, slot: expected.slot, body: false, count: Int(expected.metaSize)) {
        case .bytes(let buffer, _): metaBuffer = buffer
        case .failed(let result): return result
        }
        let bytes = UnsafeRawBufferPointer(metaBuffer)
        guard let view = EntryMetadata.ReadView.parse(bytes), view.hasKey(key, in: bytes) else {
            // Not the layout this library writes, or another key: the full decoder decides.
            metaBuffer.deallocate()
            return readEntry(hash, key: key, expected: expected, wantBody: true)
        }
        let meta = EntryMetadata(key: key, size: view.size, checksum: view.checksum, created: expected.created,
                                 accessed: expected.accessedMilliseconds, expires: view.expires, metadata: [:], inlineBody: nil)
        guard view.checksum == expected.checksum, view.size == expected.size,
              (view.inlineBody != nil) == expected.isInline else {
            metaBuffer.deallocate()
            return .damaged
        }
        guard let inline = view.inlineBody else {
            metaBuffer.deallocate()
            return readBody(hash, meta: meta, slot: expected.slot)
        }
        let body = UnsafeRawBufferPointer(rebasing: bytes[inline])
        if configuration.verifiesChecksums, Checksum.xxh3(body) != view.checksum {
            metaBuffer.deallocate()
            return .damaged
        }
        guard !inline.isEmpty else {
            metaBuffer.deallocate()
            return .found(meta, Data())
        }
        let offset = inline.lowerBound
        let data = Data(bytesNoCopy: metaBuffer.baseAddress! + offset, count: inline.count,
                        deallocator: .custom { pointer, _ in (pointer - offset).deallocate() })
        return .found(meta, data)
    }

    /// Reads and checks a body file of exactly `meta.size` bytes.
    private func readBody(_ hash: KeyHash, meta: EntryMetadata, slot: UInt8) -> ReadResult {
        let size = Int(meta.size)
        let bodyBuffer: UnsafeMutableRawBufferPointer
        switch readEntryFile(hash, slot: slot, body: true, count: size, hashing: configuration.verifiesChecksums) {
        case .bytes(let buffer, let checksum):
            if let checksum, checksum != meta.checksum {
                buffer.deallocate()
                return .damaged
            }
            bodyBuffer = buffer
        case .failed(let result):
            return result
        }
        guard size > 0 else {
            bodyBuffer.deallocate()
            return .found(meta, Data())
        }
        return .found(meta, Data(bytesNoCopy: bodyBuffer.baseAddress!, count: size, deallocator: .custom { pointer, _ in pointer.deallocate() }))
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
    func removeIfUnchanged(_ hash: KeyHash, _ seen: IndexEntry, key: String) -> Bool {
        let confirmDamage: (IndexEntry) -> Bool = { entry in
            switch self.readEntry(hash, key: key, expected: entry, wantBody: entry.isInline) {
            case .damaged: return true
            case .found where !entry.isInline: return self.bodyFileIsDamaged(hash, entry)
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
    private func bodyFileIsDamaged(_ hash: KeyHash, _ entry: IndexEntry) -> Bool {
        let fd: Int32
        switch layout.openEntryFileToRead(hash, slot: entry.slot, body: true) {
        case .success(let value): fd = value
        case .failure(let error): return error == .noSuchFileOrDirectory || error == .tooManySymbolicLinks || FileIO.isNotAFile(error)
        }
        defer { Syscall.close(fd) }
        if case .damaged = checkBodyFile(fd, hash, entry) { return true }
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
        let position: (generation: Int, end: Int64, size: Int64)? = try withStripe(hash) { () throws(DiskCacheError) in
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
            let entry = removed.result
            _ = layout.directory.unlink(layout.metaFile(hash, slot: entry.slot))
            if !entry.isInline { _ = layout.directory.unlink(layout.bodyFile(hash, slot: entry.slot)) }
            return (removed.position.generation, removed.position.end, entry.size)
        }
        guard let position else {
            try syncForRetriedRemove()
            return false
        }
        configuration.onEviction?(Eviction(key: key, size: position.size, reason: reason))
        if configuration.durability.mode == .immediate { try syncJournal(through: (position.generation, position.end)) }
        return true
    }

    /// The first step of every write of `hash`, holding its stripe: throws `closed` when the
    /// cache is, reserves room for its journal record (`recordSize` bytes: one PUT unless
    /// told) so that a full disk fails the write before anything is written, and returns the
    /// committed entry, whose slot the new files must not use.
    func beginWrite(_ hash: KeyHash, recordSize: Int = Journal.putRecordSize) throws(DiskCacheError) -> IndexEntry? {
        try state.withLock { state throws(DiskCacheError) -> IndexEntry? in
            guard !state.isClosed else { throw DiskCacheError.closed() }
            // Behind the journal, the committed entry (whose slot the new files must not use)
            // is not known.
            guard !state.isBehind else { throw state.behindError() }
            try state.reserveJournalSpace(recordSize, path: layout.journal)
            return state.index[hash]
        }
    }

    /// Commits a write whose files are in place in `put.slot`, the slot `current` (the committed
    /// entry, if any) does not use: in `.immediate` syncs the shard directory first; appends the
    /// PUT record and updates the index under one lock; in `.immediate` makes the record durable;
    /// then unlinks `current`'s files. A failure before the append removes the new files and
    /// leaves `current` committed. Called holding the key's stripe.
    ///
    /// `carryingRecord`, in `.immediate` only, is a PUT+FILE record of `put` holding the whole
    /// `.meta` file (an inline entry), written but not synced: it is appended instead of the
    /// PUT, and the journal's one fsync makes the write durable. The file and its directory
    /// entry become durable at the next checkpoint (``checkpoint()``); a power cut before
    /// that is repaired at open from the record (`Opener.restoreCarriedFiles`).
    func commitPut(_ put: Journal.Put, replacing current: IndexEntry?, metaPath: String, bodyPath: String?,
                   carryingRecord: [UInt8]? = nil) throws(DiskCacheError) {
        let immediate = configuration.durability.mode == .immediate
        let position: (generation: Int, end: Int64)
        do throws(DiskCacheError) {
            if immediate && carryingRecord == nil {
                let shard = layout.shardDirectory(put.hash)
                try layout.directory.fsyncDirectory(shard).get(orThrow: "sync the shard directory", path: shard)
            }
            // Append and index update under one lock: a compaction snapshots the index and
            // collects later appends, so it must never see one without the other.
            position = try state.withLock { state throws(DiskCacheError) in
                let position = try state.append(carryingRecord ?? Journal.encode(.put(put)), records: 1, path: layout.journal)
                if carryingRecord != nil {
                    state.journalCarriesFiles = true
                    state.needsCheckpoint = true
                }
                let entry = IndexEntry(put)
                state.index.insert(entry, for: put.hash)
                state.noteExpiry(entry)
                state.statistics.writes += 1
                return position
            }
        } catch {
            // Not committed: the new slot's files go, the committed entry stays.
            _ = layout.directory.unlink(metaPath)
            if let bodyPath { _ = layout.directory.unlink(bodyPath) }
            throw error
        }
        // In `.immediate` mode the commit is made durable before the earlier value's files
        // go, so that power loss cannot leave neither value.
        if immediate { try syncJournal(through: position) }
        // Committed: the other slot's files are garbage now.
        if let current {
            _ = layout.directory.unlink(layout.metaFile(put.hash, slot: current.slot))
            if !current.isInline { _ = layout.directory.unlink(layout.bodyFile(put.hash, slot: current.slot)) }
        }
    }

    /// Creates an entry file in a slot no record vouches for (see `FileIO.writeEntryFile`). A
    /// shard directory that has gone (removed by hand while the cache was open) is made again.
    func writeEntryFile(_ path: String, _ parts: [UnsafeRawBufferPointer], hash: KeyHash, sync: Bool,
                        action: String) throws(DiskCacheError) {
        var result = FileIO.writeEntryFile(path, parts, sync: sync, in: layout.directory)
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

    /// A remove that finds nothing to remove may be the retry of one that removed the entry and
    /// then failed to make that durable: in `.immediate` it returns only once the journal is
    /// synced through its end, so the retry finishes the job. Costs nothing when it is synced.
    func syncForRetriedRemove() throws(DiskCacheError) {
        guard configuration.durability.mode == .immediate else { return }
        let end = state.withLock { ($0.journalGeneration, $0.journalLength) }
        try syncJournal(through: end)
    }

    /// Group commit: returns once the journal is durable through `position`. Concurrent
    /// callers queue on `syncState`; the first syncs everything written so far, and the rest
    /// find their records already covered.
    func syncJournal(through position: (generation: Int, end: Int64)) throws(DiskCacheError) {
        try syncState.withLock { synced throws(DiskCacheError) in
            if synced.generation > position.generation { return }
            if synced.generation == position.generation && synced.syncedLength >= position.end { return }
            let (journal, generation, length) = state.withLock { ($0.journal, $0.journalGeneration, $0.journalLength) }
            // A compaction since `position` wrote and synced a new journal holding the record.
            if generation > position.generation {
                synced = SyncState(generation: generation, syncedLength: 0)
                return
            }
            // Data only: the records, and the size when an append grew the file. Appends
            // overwrite zeros written ahead (`CacheState.writeAhead(for:)`), so as a rule this
            // flushes no metadata at all.
            try Syscall.fsync(journal.fd, dataOnly: true).get(orThrow: "sync the journal", path: layout.journal)
            synced = SyncState(generation: generation, syncedLength: length)
        }
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

import DiskCacheLocking
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Everything the store mutates, behind one lock (``StateLock``). What runs under it:
/// - index updates and journal appends (a `pwrite` each, the zeros written ahead of them,
///   see ``writeAhead(for:)``, and the blocks reserved for them with `fallocate`, see
///   ``reserveJournalSpace(_:path:)``);
/// - in shared mode, at every acquisition, following the journal: `pread` of the records other
///   instances appended since the last call, applied to the index; after another instance's
///   compaction, taking the cross-process append lock (waiting at most
///   `Configuration.lockTimeout`) and opening and reading the new journal file whole;
/// - in shared mode, once after a compactor died between its rename and its update of the
///   shared page: an `fsync` of the journal it left and of the directory (``followHoldingAppendLock()``).
///
/// No other fsync: durability work (group commit, checkpoints, `.immediate` syncs) runs
/// outside it.
struct CacheState {
    var index: Index
    var journal: SharedDescriptor
    /// Bytes in the journal file: where the next record goes.
    var journalLength: Int64
    /// Disk blocks are reserved up to here, so appends below it cannot fail with ENOSPC.
    var reservedEnd: Int64
    var canReserve = true
    /// Exclusive mode: the journal file holds zeros from `journalLength` up to here (see
    /// ``writeAhead(for:)``); shared mode keeps this in the page (``SharedRegion/Field/writtenAhead``).
    var writtenAheadEnd: Int64 = 0
    /// Bytes of zeros ``writeAhead(for:)`` writes at a time (`Configuration.journalWriteAhead`).
    var writeAheadChunk: Int64 = 1 << 20
    /// Records in the current journal file (after a compaction, one a live entry).
    var journalRecords: Int
    /// Bumped by each compaction, which replaces the journal file.
    var journalGeneration = 0
    /// Where the next record goes: the end of the records appended so far.
    var journalEnd: Journal.Position { Journal.Position(generation: journalGeneration, end: journalLength) }
    /// Access times waiting to be journaled as one ACCESS record, in the order of the reads
    /// (an array, not a dictionary: a hit appends without hashing; duplicates go at the flush).
    var pendingAccess: [(KeyHash, Int64)] = []
    /// A compaction is writing a new journal (records appended meanwhile are read back from
    /// the old file when it swaps them in).
    var isCompacting = false
    /// The journal's name may not be durable yet: a compaction may have renamed a new file over
    /// it with no directory sync known to have followed (another instance's or another
    /// process's, before this open or since, or this instance's own, whose sync failed). Until
    /// it is durable, a power loss may bring back the old file without the records appended
    /// since, so `DiskCache.syncJournalName()` syncs the directory before anything appended
    /// is reported durable.
    var journalNameUnsynced = true
    /// In shared mode, the page and locks the instances sharing the cache coordinate through;
    /// nil in exclusive mode.
    var shared: SharedJournal?
    /// Shared mode: another instance's compaction replaced the journal and this instance could
    /// not open or read the new file (e.g. out of file descriptors). Its index may lack what
    /// others stored since: until a later call catches up, it appends nothing, begins no write
    /// and removes no file (see ``followHoldingAppendLock()``).
    var isBehind = false
    /// The keys other instances stored or removed, collected while something in front of this
    /// cache (a `TieredCache`'s memory tier) wants to drop its copies of them; nil otherwise.
    var externalChanges: ExternalChanges?
    /// Something was written since the last group commit.
    var isDirty = false
    /// The journal may hold PUT+FILE records (appended by this instance, followed from
    /// another, or found at open): a compaction, which rewrites them as plain PUTs, must make
    /// their files durable first.
    var journalCarriesFiles = false
    /// This instance appended a PUT+FILE record since its last checkpoint began.
    var needsCheckpoint = false
    /// The orphan scan an unclean shutdown calls for has not finished: until it has, `close()`
    /// writes no clean-shutdown record.
    var orphanScanPending = false
    var isClosed = false {
        // A closed cache reads nothing more: its kept files go.
        didSet { if isClosed { keptFiles?.dropAll() } }
    }
    /// Entry files kept open after a read, let go here whenever an entry changes (see ``KeptFiles``).
    var keptFiles: KeptFiles?
    var statistics = DiskCache.Statistics()
    /// Stores declined lately by `Configuration.admission`, counted per key.
    var declinedUses = UseCounts<KeyHash>()
    /// Limits in force (they can change while open).
    var diskCapacity: Int64 = 0
    var countLimit: Int?
    /// No entry expires before this second (0: none expires); lets an idle sweep skip the index scan.
    var earliestExpirySeconds: UInt32 = 0

    /// Notes an inserted entry's expiry for the sweeper.
    mutating func noteExpiry(_ entry: IndexEntry) {
        guard entry.expiresSeconds != 0 else { return }
        if earliestExpirySeconds == 0 || entry.expiresSeconds < earliestExpirySeconds {
            earliestExpirySeconds = entry.expiresSeconds
        }
    }

    /// Notes the expiry of every entry afresh (after the index was built or rebuilt).
    mutating func noteEveryExpiry() {
        earliestExpirySeconds = 0
        for (_, entry) in index.entries { noteExpiry(entry) }
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
    /// In shared mode the append holds the append lock, first applies what others appended, and
    /// goes at the file's true end.
    mutating func append(_ bytes: [UInt8], records: Int, path: String) throws(DiskCacheError) -> Journal.Position {
        try append(path: path) { _ in (bytes, records, ()) }!.position
    }

    /// Appends the records `decide` returns, if any: in shared mode `decide` runs holding the
    /// append lock after following the journal, so it sees every record appended before its own
    /// (what a removal checks must still be there when its record goes in).
    mutating func append<T>(path: String, deciding decide: (inout CacheState) throws(DiskCacheError) -> (bytes: [UInt8], records: Int, result: T)?)
        throws(DiskCacheError) -> (position: Journal.Position, result: T)? {
        // After close the lock is released: another owner may be appending to this file.
        guard !isClosed else { throw DiskCacheError.closed() }
        return try withAppendLock { state throws(DiskCacheError) in
            guard let decided = try decide(&state) else { return nil }
            let position = try state.appendAtEnd(decided.bytes, records: decided.records, path: path)
            state.shared?.region[.end] = UInt64(position.end)
            return (position, decided.result)
        }
    }

    /// The error for a write or removal refused while ``isBehind``.
    func behindError() -> DiskCacheError {
        DiskCacheError(code: .ioFailure,
                       message: "Cannot read the journal another instance's compaction wrote; nothing was written",
                       path: shared?.layout.journal)
    }

    /// Runs `body` holding the append lock (shared mode: after following the journal to its
    /// true end, in whatever file is now current); in exclusive mode it just runs `body`.
    mutating func withAppendLock<T>(_ body: (inout CacheState) throws(DiskCacheError) -> T) throws(DiskCacheError) -> T {
        guard let region = shared?.region else { return try body(&self) }
        return try region.withLock(.append) { () throws(DiskCacheError) -> T in
            guard followHoldingAppendLock() else { throw behindError() }
            return try body(&self)
        }
    }

    private mutating func appendAtEnd(_ bytes: [UInt8], records: Int, path: String) throws(DiskCacheError) -> Journal.Position {
        var bytes = bytes, records = records
        // Reads not yet journaled go in before the record that follows them, so that a replay
        // meets them in the order the eviction order did (see Index+Eviction.swift).
        if let accesses = takePendingAccessRecord() {
            bytes = accesses + bytes
            records += 1
        }
        writeAhead(for: bytes.count)
        let result = bytes.withUnsafeBytes { Syscall.pwriteAll(journal.fd, $0, at: journalLength) }
        if case .failure(let error) = result {
            // Do not leave half a record for the next one to follow.
            cutJournal()
            throw DiskCacheError.io(error, "append to the journal", path: path)
        }
        journalLength += Int64(bytes.count)
        journalRecords += records
        isDirty = true
        return journalEnd
    }

    /// What the state takes from the configuration at open: the limits the sweeper keeps, the
    /// chunk of zeros written ahead, and the earliest expiry among the entries read.
    mutating func adopt(_ configuration: DiskCache.Configuration) {
        diskCapacity = configuration.diskCapacity
        countLimit = configuration.countLimit
        writeAheadChunk = Int64(max(configuration.journalWriteAhead, 0))
        noteEveryExpiry()
    }

    /// Where zeros written ahead end (in this instance's journal file; 0 when none are).
    var writtenAhead: Int64 {
        get { shared.map { Int64(bitPattern: $0.region[.writtenAhead]) } ?? writtenAheadEnd }
        set {
            if let shared { shared.region[.writtenAhead] = UInt64(newValue) } else { writtenAheadEnd = newValue }
        }
    }

    /// Makes sure the next `count` bytes of the journal overwrite zeros already in the file,
    /// writing the next chunk of them when they do not: an append then leaves the file's size
    /// and blocks alone, and the `fdatasync` a journal sync is flushes the record and no
    /// metadata (see docs/durability.md). A replay reads the zeros as space written ahead, not
    /// as a torn tail (``Journal/ReplaySummary/writtenAhead``); they are cut at open, by the
    /// close of the last instance and by a failed append.
    ///
    /// An optimisation only, and the extent a hint: zeros go at or after the end of the records
    /// (in shared mode holding the append lock, and only when this instance has followed the
    /// journal to the end the page names), so a failure, or a value left by another file, costs
    /// speed and nothing else. Not done where the shared locks are byte ranges: there every
    /// append reads the file up to its size.
    private mutating func writeAhead(for count: Int) {
        if let shared {
            guard SharedRegion.usesMutexes, Int64(bitPattern: shared.region[.end]) == journalLength else { return }
        }
        let ahead = writtenAhead
        guard journalLength + Int64(count) > ahead else { return }
        let start = max(journalLength, ahead)
        let end = journalLength + max(writeAheadChunk, 2 * Int64(count))
        // calloc: a megabyte comes zeroed from fresh pages, with no memset under the state lock.
        guard let memory = calloc(Int(end - start), 1) else { return }
        defer { free(memory) }
        let zeros = UnsafeRawBufferPointer(start: memory, count: Int(end - start))
        if case .failure = Syscall.pwriteAll(journal.fd, zeros, at: start) {
            // A full disk: give back what was written, and do not try again before the records
            // reach this chunk's end (appends until then grow the file, as without zeros). The
            // cut gives back blocks a reservation held past `start` too: the next write
            // reserves again (`reserveJournalSpace`) before its files are renamed in.
            _ = Syscall.ftruncate(journal.fd, start)
            reservedEnd = min(reservedEnd, start)
        }
        writtenAhead = end
    }

    /// Cuts the journal file at the end of its records: what a reservation or written-ahead
    /// zeros held past it is given back.
    mutating func cutJournal() {
        _ = Syscall.ftruncate(journal.fd, journalLength)
        reservedEnd = journalLength
        writtenAhead = journalLength
    }

    /// Takes the pending access times as one encoded ACCESS record (nil if there are none).
    /// Every read is kept, in order: each one a replay meets moves the eviction order as the
    /// read did. (Pending reads are journaled before any later record, so the entries they
    /// name are still the ones read.)
    mutating func takePendingAccessRecord() -> [UInt8]? {
        guard !pendingAccess.isEmpty else { return nil }
        let items = pendingAccess
        pendingAccess.removeAll(keepingCapacity: true)
        return Journal.encode(.access(items))
    }
}

// MARK: - Following other instances (shared mode)

extension CacheState {
    /// Shared mode: applies the records other instances appended since this one last looked.
    /// Costs three atomic loads when nothing changed. Called under the state lock at the start
    /// of every operation (see ``StateLock``).
    mutating func follow() {
        guard let region = shared?.region else { return }
        let generation = region[.generation]
        if UInt64(truncatingIfNeeded: journalGeneration) == generation {
            let end = Int64(bitPattern: region[.end])
            // A compaction stores the new generation before the new file's end: with the
            // generation unchanged after `end` was read, `end` is this file's.
            if region[.generation] == generation {
                if end > journalLength { applyRecords(through: end) }
                return
            }
        }
        // Another instance compacted: switch files holding the append lock, so that the old
        // file is known to be complete. (If the switch fails, this instance stays where it
        // is, marked behind, and tries again on its next call. A page that cannot be trusted
        // or a lock not had in time leaves it where it is too: its next write reports why.)
        do {
            try region.withLock(.append) { () throws(DiskCacheError) in _ = self.followHoldingAppendLock() }
        } catch {}
    }

    /// ``follow()`` to the journal's true end (its size): nothing is being appended meanwhile.
    /// Returns false (and sets ``isBehind``) when the journal another instance's compaction
    /// left could not be opened or read: this instance is then behind the journal and must not
    /// append.
    mutating func followHoldingAppendLock() -> Bool {
        guard let shared else { return true }
        isBehind = !followToTrueEnd(shared)
        return !isBehind
    }

    private mutating func followToTrueEnd(_ shared: SharedJournal) -> Bool {
        let region = shared.region
        // The page is another process's to write: any value is read without trapping.
        var generation = Int(truncatingIfNeeded: region[.generation])
        // Every append and compaction updates the page before it lets go of the lock; only one
        // whose process died holding it may have left the page behind the files, and only then
        // are the files looked at. (Where the lock is a byte range, whose holder's death is not
        // reported, they always are.)
        let holderMayHaveDied = !SharedRegion.usesMutexes || region[.holderDied] != 0
        if holderMayHaveDied, case .success(let info) = shared.layout.directory.lstat(shared.layout.journal),
           !region.namesJournal(info) {
            // A compaction renames its file over `journal` and then records the new file's
            // inode in the page, holding the append lock throughout. Another file there than the
            // page names means its process died in between: nothing was appended to either file
            // since, so every instance (this one first) reads the new file whole, and it is made
            // durable first (the dead compactor may not have synced the directory).
            generation &+= 2
            region[.generation] = UInt64(truncatingIfNeeded: generation)
            region.nameJournal(info)
            region[.writtenAhead] = 0  // it described the old file
            if case .success(let journal) = shared.layout.directory.open(shared.layout.journal, O_RDONLY | O_NOFOLLOW | O_NONBLOCK) {
                _ = Syscall.fsync(journal.fd)
            }
            _ = shared.layout.directory.fsyncDirectory(shared.layout.root)
        }
        if generation != journalGeneration { guard switchJournal(to: generation, shared) else { return false } }
        guard holderMayHaveDied else {
            let end = Int64(bitPattern: region[.end])
            if end > journalLength { applyRecords(through: end) }
            return true
        }
        // The file's true end: a record a dead appender wrote whole is applied, a part of one
        // is left for the next append to write over.
        if case .success(let info) = Syscall.fstat(journal.fd), Int64(info.st_size) > journalLength {
            applyRecords(through: Int64(info.st_size))
        }
        region[.end] = UInt64(journalLength)
        region[.holderDied] = 0
        return true
    }

    /// Reads the journal from `journalLength` up to `end` and applies every whole record; stops
    /// before a record that is not whole yet. Bytes no record parses in the middle (a writer
    /// killed part way through an append, which the next append went past) are skipped.
    private mutating func applyRecords(through end: Int64) {
        let capacity = Int(min(end - journalLength, Int64(Journal.maximumPayload) * 64))
        guard capacity > 0 else { return }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 8)
        defer { buffer.deallocate() }
        // In pieces of at most `capacity` bytes, until `end` or a record that is not whole yet.
        while journalLength < end {
            let count = Int(min(end - journalLength, Int64(capacity)))
            guard case .success(let read) = Syscall.preadAll(journal.fd, UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]),
                                                             at: journalLength), read > 0 else { return }
            let summary = Journal.replay(UnsafeRawBufferPointer(rebasing: buffer[0..<read]), from: 0) { apply(followed: $0) }
            if summary.carriedFiles > 0 { journalCarriesFiles = true }
            journalLength += Int64(summary.validLength)
            journalRecords += summary.records
            guard summary.validLength > 0 else { return }
        }
    }

    private mutating func apply(followed record: Journal.Record) {
        index.apply(record)
        switch record {
        case .put(let put):
            if let entry = index[put.hash] { noteExpiry(entry) }
            keptFiles?.drop(put.hash)
            externalChanges?.note(put.hash)
        case .remove(let hash):
            keptFiles?.drop(hash)
            externalChanges?.note(hash)
        case .clear:
            keptFiles?.dropAll()
            pendingAccess.removeAll()
            externalChanges?.noteEverything()
        case .access, .close, .checkpoint:
            break
        }
    }

    /// Another instance compacted the journal (`generation` is the shared page's). After one
    /// compaction the old file is complete and its end is the new file's `base`: this instance
    /// reads the old file to its end and goes on in the new one. After more than one, it reads
    /// the new file whole.
    private mutating func switchJournal(to generation: Int, _ shared: SharedJournal) -> Bool {
        #if DEBUG
        if let failsSwitch = shared.failsSwitch, failsSwitch() { return false }
        #endif
        let path = shared.layout.journal
        guard case .success(let opened) = shared.layout.directory.open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK) else { return false }
        let file = SharedDescriptor(opened)
        if generation == journalGeneration &+ 1 {
            if case .success(let info) = Syscall.fstat(journal.fd), Int64(info.st_size) > journalLength {
                applyRecords(through: Int64(info.st_size))
            }
            // Below 2^62 (or the page is damaged): no sum with them overflows.
            guard let base = try? shared.region.counter(.base), let records = try? shared.region.counter(.baseRecords) else { return false }
            journal = file
            journalLength = Int64(base)
            journalRecords = records
        } else {
            guard case .success(let bytes?) = FileIO.readAll(fd: file.fd, limit: Int.max),
                  bytes.withUnsafeBytes({ Journal.checkHeader($0) }) == .valid else { return false }
            let summary: Journal.ReplaySummary
            (index, summary) = Index.replaying(bytes, blockSize: index.blockSize, policy: index.policy)
            if summary.carriedFiles > 0 { journalCarriesFiles = true }
            pendingAccess.removeAll()
            // What changed meanwhile is not known entry by entry.
            keptFiles?.dropAll()
            externalChanges?.noteEverything()
            noteEveryExpiry()
            journal = file
            journalLength = Int64(summary.validLength)
            journalRecords = summary.records
        }
        journalGeneration = generation
        journalNameUnsynced = true  // the compactor's sync of the directory may have failed
        reservedEnd = journalLength
        canReserve = true
        return true
    }
}

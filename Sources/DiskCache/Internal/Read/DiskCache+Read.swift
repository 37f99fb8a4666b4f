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

// The read path: an entry looked up in the index (counted, its access noted), its files read
// and checked against what the index vouches for, the outcome a hit, a miss or damage.

extension DiskCache {
    /// An entry's metadata as read, with the body when one was read.
    typealias EntryRead = (meta: EntryMetadata, body: Data?)

    /// Reads an entry file of `expected` whole (and its XXH3-64 into `checksum`, when `hashing`), through the
    /// descriptor ``KeptFiles`` keeps for it, else opening its path: a file opened, read whole,
    /// that ``KeptFiles`` would keep is left in `opened`, for the caller to keep once it has checked
    /// that the index still holds `expected` (``keepIfCurrent(_:_:_:body:_:released:)``). A
    /// short file is damage, as ``ReadOutcome/init(opening:)`` says of an open.
    private func readEntryFile(_ hash: KeyHash, expected: IndexEntry, body: Bool, count: Int,
                               hashing: Bool = false, checksum: inout UInt64, pageCacheOnly: PageCacheOnly?,
                               opened: inout OpenFile?) -> ReadOutcome<EntryBytes> {
        var kept: SharedDescriptor?
        var keeping = false
        switch keptFiles.lookUp(hash, entry: expected, body: body) {
        case .kept(let descriptor):
            // A kept file that another program removed or renamed over (no link left) is let
            // go: the path is opened as if nothing were kept, and says what is there now.
            if case .success(let info) = Syscall.fstat(descriptor.fd), info.st_nlink == 0 {
                keptFiles.drop(hash)
            } else {
                kept = descriptor
            }
        case .keepAfterRead: keeping = true
        case .none: break
        }
        let fd: Int32
        if let kept {
            fd = kept.fd
        } else {
            switch layout.openEntryFileToRead(hash, slot: expected.slot, body: body) {
            case .success(let file):
                fd = file.fd
                opened = consume file
            case .failure(let error):
                pageCacheOnly?.note(error)
                return ReadOutcome<OpenFile>(opening: .failure(error)).withoutValue()
            }
        }
        let withoutWaiting = pageCacheOnly != nil
        // `kept` holds the descriptor open while it is read, whatever lets go of it meanwhile.
        let result = withExtendedLifetime(kept) {
            hashing
                ? FileIO.readHashing(fd: fd, count: count, checksum: &checksum, withoutWaiting: withoutWaiting)
                : FileIO.read(fd: fd, count: count, withoutWaiting: withoutWaiting)
        }
        // Closed now unless it was read whole and is to be kept.
        if !keeping { opened = nil }
        switch consume result {
        case .success(let bytes?): return .found(bytes)
        case .success(nil):
            opened = nil
            return .damaged
        case .failure(let error):
            opened = nil
            pageCacheOnly?.note(error)
            return ReadOutcome<OpenFile>(opening: .failure(error)).withoutValue()
        }
    }

    /// Whether the index still holds `expected` (behind the journal, it cannot say: no); if so,
    /// and the cache is open, `opened` (an entry file of `expected` just read whole, if any) may
    /// be kept open for the next read (``KeptFiles``). Under the state lock, as every change of
    /// the entry that lets its kept files go; `released` gets the descriptors let go, to
    /// release once the lock is left.
    private func keepIfCurrent(_ state: inout CacheState, _ hash: KeyHash, _ expected: IndexEntry, body: Bool,
                               _ opened: inout OpenFile?, released: inout KeptFiles.LetGo) -> Bool {
        let current = !state.isBehind && state.index[hash]?.isSameCommit(as: expected) == true
        if current, !state.isClosed, opened != nil { keptFiles.keep(&opened, for: hash, entry: expected, body: body, letGo: &released) }
        return current
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
    func openBody<T: ~Copyable>(for key: String, pageCacheOnly: PageCacheOnly? = nil,
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
    func openBody<T: ~Copyable>(for key: String, pageCacheOnly: PageCacheOnly?,
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
            case .found: break
            case .absent: break
            case .otherKey:
                takeBackHit(countingMiss: pageCacheOnly?.gaveUp != true)
                state.withLock { $0.statistics.hashCollisions += 1 }
            case .unavailable:
                takeBackHit(countingMiss: pageCacheOnly?.gaveUp != true)
            default:
                // Expired, damaged or replaced: the removal, or the next attempt, counts what
                // the read ends as.
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
            switch consume outcome {
            case .found(let value): return value
            case .expired:
                if let entry = seen { removeExpired(hash, entry, key: key) }
                return nil
            case .damaged:
                guard let entry = seen else { return nil }
                if removeIfUnchanged(hash, entry, key: key, pageCacheOnly: pageCacheOnly) { return nil }
            case .replaced:
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
    func missing<T: ~Copyable>(_ hash: KeyHash, _ entry: IndexEntry) -> ReadOutcome<T> {
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
    private func readMetaFile(_ hash: KeyHash, expected: IndexEntry, pageCacheOnly: PageCacheOnly?) -> ReadOutcome<EntryBytes> {
        var opened: OpenFile?
        var unhashed: UInt64 = 0
        let outcome = readEntryFile(hash, expected: expected, body: false, count: Int(expected.metaSize),
                                    checksum: &unhashed, pageCacheOnly: pageCacheOnly, opened: &opened)
        // A file read whole that is to be kept is kept in the same visit.
        var released = KeptFiles.LetGo()
        let current = state.withLock { keepIfCurrent(&$0, hash, expected, body: false, &opened, released: &released) }
        switch consume outcome {
        case .found(let bytes): return current ? .found(bytes) : .replaced
        case .damaged: return current ? .damaged : .replaced  // gone or cut short by a later write
        case let other: return other.withoutValue()
        }
    }

    /// Reads and checks an entry's files against what the index vouches for.
    func readEntry(_ hash: KeyHash, key: String, expected: IndexEntry, wantBody: Bool,
                   pageCacheOnly: PageCacheOnly? = nil) -> ReadOutcome<EntryRead> {
        let file: EntryBytes
        switch readMetaFile(hash, expected: expected, pageCacheOnly: pageCacheOnly) {
        case .found(let read): file = read
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
        return readBody(hash, meta: meta, expected: expected, pageCacheOnly: pageCacheOnly)
    }

    /// ``readEntry(_:key:expected:wantBody:)`` for a read that wants only the value: the metadata
    /// file is read in place, and an inline body is handed out without a copy. The result's
    /// metadata carries only the key, size, checksum and expiry.
    func readValue(_ hash: KeyHash, key: String, expected: IndexEntry, pageCacheOnly: PageCacheOnly? = nil) -> ReadOutcome<EntryRead> {
        let file: EntryBytes
        switch readMetaFile(hash, expected: expected, pageCacheOnly: pageCacheOnly) {
        case .found(let read): file = read
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
        guard let inline = view.inlineBody else { return readBody(hash, meta: meta, expected: expected, pageCacheOnly: pageCacheOnly) }
        if configuration.verifiesChecksums,
           file.withBytes({ Checksum.xxh3(UnsafeRawBufferPointer(rebasing: $0[inline])) }) != view.checksum {
            return .damaged
        }
        return .found((meta, file.data(inline)))
    }

    /// Reads and checks a body file of exactly `meta.size` bytes. (A body file is never written
    /// again: opened while the index held `expected`, as the caller's check of the `.meta` file
    /// said, it is the entry's.)
    private func readBody(_ hash: KeyHash, meta: EntryMetadata, expected: IndexEntry, pageCacheOnly: PageCacheOnly?) -> ReadOutcome<EntryRead> {
        var opened: OpenFile?
        var checksum: UInt64 = 0
        let hashing = configuration.verifiesChecksums
        switch readEntryFile(hash, expected: expected, body: true, count: Int(meta.size), hashing: hashing,
                             checksum: &checksum, pageCacheOnly: pageCacheOnly, opened: &opened) {
        case .found(let file):
            if hashing, checksum != meta.checksum { return .damaged }
            if opened != nil {
                var released = KeptFiles.LetGo()
                _ = state.withLock { keepIfCurrent(&$0, hash, expected, body: true, &opened, released: &released) }
            }
            return .found((meta, file.data(0..<Int(meta.size))))
        case let other:
            return other.withoutValue()
        }
    }
}

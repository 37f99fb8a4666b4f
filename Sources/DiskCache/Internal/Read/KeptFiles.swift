import DiskCacheLocking
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Entry files kept open after a read, so that the next read of the entry reads through the
/// descriptor instead of walking and opening its path again (nginx's `open_file_cache`): at
/// most `Configuration.keptOpenFiles` descriptors, and at most ``processLimit`` for all the
/// caches of the process together (``Budget``).
///
/// An entry's `.meta` file is kept on its second read among the reads that kept nothing lately
/// (a table of fingerprints of 4 × `limit` keys read, each key's place fixed by its hash), its
/// `.body` file with it: a file read once is not worth a descriptor. At the limit, keeping one
/// more lets go of an entry's files chosen by CLOCK (second chance): the hand passes over the
/// entries read since it last passed and takes the first one that was not.
///
/// A descriptor is kept for one committed entry (``IndexEntry/isSameCommit(as:)``, which
/// includes its slot) and handed out only for a read of that same entry. It is kept only while
/// the index holds the entry (``keep(_:for:entry:body:letGo:)`` is called under the state lock, after
/// the check every read makes), and let go under the same lock when the entry is replaced or
/// removed, by this instance or (followed in the journal) another, when the cache is emptied
/// and when it closes: a file the cache unlinks is not held open past that. What a kept `.meta`
/// descriptor reads is checked as a freshly opened file's bytes are: a retired file written
/// again for another entry (``RetiredFiles``) is caught by the key and index check after the
/// read. A file changed in place under the cache is caught as when it is opened afresh; one
/// that another program removed or renamed over (its link count 0, which the read checks with
/// `fstat`) is let go and its path opened again.
///
/// Its own lock, taken alone by a read, and inside the state lock by what keeps and lets go.
final class KeptFiles: Sendable {
    private struct Kept {
        var entry: IndexEntry
        var meta: SharedDescriptor?
        var body: SharedDescriptor?
        /// Read since the clock's hand last passed.
        var referenced = false
        /// Where its key is in `Files.ring`.
        var ringIndex: Int
        var count: Int { (meta == nil ? 0 : 1) + (body == nil ? 0 : 1) }
    }

    private struct Files {
        var kept: [KeyHash: Kept] = [:]
        /// The keys in `kept`, in the order the clock's hand visits them.
        var ring: [KeyHash] = []
        var hand = 0
        /// Fingerprints of keys read lately whose files were not kept (0: none); made on first use.
        var recent: [UInt32] = []
        var descriptors = 0
    }

    /// The most descriptors kept (0: none).
    let limit: Int
    private let budget: Budget
    private let files = PthreadMutex(Files())

    /// `budget`: what this table shares with others, by default every cache of the process
    /// (its limit then becomes ``processLimit`` as it is now).
    init(limit: Int, budget: Budget = .shared) {
        self.limit = max(0, limit)
        self.budget = budget
        if budget === Budget.shared { budget.limit.store(Self.processLimit, ordering: .relaxed) }
    }

    deinit { dropAll() }

    /// The most descriptors the caches of this process keep together, and the default of
    /// `Configuration.keptOpenFiles`: a quarter of the soft limit on open descriptors
    /// (`RLIMIT_NOFILE`), at most 16,384. Under a limit of 1,024 that is 256, which leaves
    /// three quarters to the rest of the process (a server's sockets); a process that raises its
    /// limit before opening a cache keeps more.
    static var processLimit: Int {
        var limits = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limits) == 0 else { return 256 }
        return Int(min(rlim_t(maximumProcessLimit), limits.rlim_cur / 4))
    }

    static let maximumProcessLimit = 16_384

    /// The descriptors a group of tables keeps together: at most `limit`.
    final class Budget: Sendable {
        let limit: Atomic<Int>
        private let kept = Atomic<Int>(0)

        /// Every cache of the process; its limit is ``KeptFiles/processLimit`` when the last cache opened.
        static let shared = Budget(limit: 256)

        init(limit: Int) { self.limit = Atomic(limit) }

        /// Takes one descriptor from the budget; false (nothing taken) when it is spent.
        func take() -> Bool {
            guard kept.add(1, ordering: .relaxed).newValue > limit.load(ordering: .relaxed) else { return true }
            kept.subtract(1, ordering: .relaxed)
            return false
        }

        func give(_ count: Int) { kept.subtract(count, ordering: .relaxed) }
    }

    /// Descriptors let go under a lock, to close once it is left: usually one entry's (at most
    /// two), held without allocating.
    struct LetGo {
        private var first: SharedDescriptor?
        private var second: SharedDescriptor?
        private var more: [SharedDescriptor] = []

        init() {}

        mutating func append(_ descriptor: SharedDescriptor?) {
            guard let descriptor else { return }
            if first == nil { first = descriptor } else if second == nil { second = descriptor } else { more.append(descriptor) }
        }
    }

    /// What a read of an entry file does with this table.
    enum Lookup {
        /// Reads through the descriptor kept.
        case kept(SharedDescriptor)
        /// Opens the file, and offers it to ``keep(_:for:entry:body:letGo:)`` once read.
        case keepAfterRead
        /// Opens the file and closes it.
        case none
    }

    /// The descriptor kept for the `.meta` (or `.body`) file of `entry`, or whether the file is
    /// to be kept once read: a `.meta` file on the entry's second read among those that kept
    /// nothing lately (this counts the read), a `.body` file while its `.meta` file is kept.
    func lookUp(_ hash: KeyHash, entry: IndexEntry, body: Bool) -> Lookup {
        guard limit > 0 else { return .none }
        return files.withLock { files in
            if let index = files.kept.index(forKey: hash), files.kept.values[index].entry.isSameCommit(as: entry) {
                files.kept.values[index].referenced = true
                let kept = files.kept.values[index]
                if let descriptor = body ? kept.body : kept.meta { return .kept(descriptor) }
                return .keepAfterRead
            }
            guard !body else { return .none }
            if files.recent.isEmpty { files.recent = Array(repeating: 0, count: 4 * min(limit, Self.maximumProcessLimit)) }
            let place = Int(truncatingIfNeeded: hash.high % UInt64(files.recent.count))
            let mark = UInt32(truncatingIfNeeded: hash.low) | 1
            guard files.recent[place] == mark else {
                files.recent[place] = mark
                return .none
            }
            files.recent[place] = 0
            return .keepAfterRead
        }
    }

    /// Keeps the file in `opened` (taking it), read whole for `entry` after ``lookUp(_:entry:body:)``
    /// said to, if the index still holds the entry. Call under the state lock; `released` gets the
    /// descriptors let go, for the caller to release once it has left the lock (a file left in
    /// `opened` is the caller's to close too).
    func keep(_ opened: inout OpenFile?, for hash: KeyHash, entry: IndexEntry, body: Bool, letGo released: inout LetGo) {
        guard limit > 0, opened != nil else { return }
        files.withLock { files in
            if let kept = files.kept[hash] {
                if !kept.entry.isSameCommit(as: entry) {
                    remove(hash, from: &files, into: &released)
                } else if (body ? kept.body : kept.meta) != nil {
                    return // kept by a read that raced this one
                }
            }
            // A `.body` file only beside its entry's `.meta` file.
            guard !body || files.kept[hash] != nil else { return }
            while files.descriptors >= limit {
                guard evictOne(from: &files, sparing: hash, into: &released) else { return }
            }
            // Another table may hold the rest of the budget: this one makes room from its own.
            while !budget.take() {
                guard evictOne(from: &files, sparing: hash, into: &released) else { return }
            }
            guard let file = opened.take() else { return }
            let descriptor = SharedDescriptor(file)
            if body {
                files.kept[hash]!.body = descriptor
            } else if files.kept[hash] != nil {
                files.kept[hash]!.meta = descriptor
            } else {
                files.kept[hash] = Kept(entry: entry, meta: descriptor, ringIndex: files.ring.count)
                files.ring.append(hash)
            }
            files.descriptors += 1
        }
    }

    /// Removes `hash`'s entry from `files`, adding its descriptors to `released`.
    private func remove(_ hash: KeyHash, from files: inout Files, into released: inout LetGo) {
        guard let kept = files.kept.removeValue(forKey: hash) else { return }
        let last = files.ring.removeLast()
        if kept.ringIndex < files.ring.count {
            files.ring[kept.ringIndex] = last
            files.kept[last]!.ringIndex = kept.ringIndex
        }
        files.descriptors -= kept.count
        budget.give(kept.count)
        released.append(kept.meta)
        released.append(kept.body)
    }

    /// Lets go of the first entry past the clock's hand not read since the hand last passed
    /// (clearing the mark of those that were), other than `spared`; false when there is none.
    private func evictOne(from files: inout Files, sparing spared: KeyHash,
                                 into released: inout LetGo) -> Bool {
        guard files.ring.count > (files.kept[spared] == nil ? 0 : 1) else { return false }
        while true {
            if files.hand >= files.ring.count { files.hand = 0 }
            let key = files.ring[files.hand]
            if key != spared {
                if !files.kept[key]!.referenced {
                    remove(key, from: &files, into: &released)
                    return true
                }
                files.kept[key]!.referenced = false
            }
            files.hand += 1
        }
    }

    /// Lets go of what is kept for `hash` (its entry was replaced or removed). The descriptors
    /// close as this returns.
    func drop(_ hash: KeyHash) {
        guard limit > 0 else { return }
        var released = LetGo()
        files.withLock { remove(hash, from: &$0, into: &released) }
        _ = released
    }

    /// Lets go of everything (the cache was emptied or closed).
    func dropAll() {
        guard limit > 0 else { return }
        let released = files.withLock { files -> [KeyHash: Kept] in
            budget.give(files.descriptors)
            defer { files = Files(recent: files.recent) }
            return files.kept
        }
        _ = released
    }

    /// Descriptors kept now.
    var count: Int { files.withLock { $0.descriptors } }
}

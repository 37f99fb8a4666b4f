import DiskCacheLocking

/// Entry files kept open after a read, so that the next read of the entry reads through the
/// descriptor instead of walking and opening its path again (nginx's `open_file_cache`): at
/// most `Configuration.keptOpenFiles` descriptors.
///
/// A table of `limit` places, each key's place fixed by its hash (a direct-mapped cache: a
/// key kept takes its place from the key there). An entry's `.meta` file is kept on its
/// second read among the reads that kept nothing lately (a second table of 4 × `limit` keys
/// read, by the same rule), its `.body` file with it while there is room (a `.meta` file kept
/// at the limit takes the place of another entry's `.body` file): a file read once is
/// not worth a descriptor, and a working set larger than the table, read uniformly, would
/// otherwise swap one descriptor for another on every read. A read that keeps nothing costs
/// one visit to this lock, with no hashing or allocation.
///
/// A descriptor is kept for one committed entry (``IndexEntry/isSameCommit(as:)``, which
/// includes its slot) and handed out only for a read of that same entry. It is kept only while
/// the index holds the entry (``keep(_:for:entry:body:)`` is called under the state lock, after
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
        var hash: KeyHash
        var entry: IndexEntry
        var meta: SharedDescriptor?
        var body: SharedDescriptor?
        var count: Int { (meta == nil ? 0 : 1) + (body == nil ? 0 : 1) }
    }

    private struct Files {
        var places: [Kept?]
        /// Keys read lately whose files were not kept.
        var recent: [KeyHash?]
        var descriptors = 0
    }

    /// The most descriptors kept (0: none).
    let limit: Int
    private let files: PthreadMutex<Files>

    init(limit: Int) {
        self.limit = max(0, limit)
        files = PthreadMutex(Files(places: Array(repeating: nil, count: self.limit),
                                   recent: Array(repeating: nil, count: 4 * self.limit)))
    }

    private func slot(_ hash: KeyHash, among count: Int) -> Int { Int(truncatingIfNeeded: hash.high % UInt64(count)) }

    /// What a read of an entry file does with this table.
    enum Lookup {
        /// Reads through the descriptor kept.
        case kept(SharedDescriptor)
        /// Opens the file, and offers it to ``keep(_:for:entry:body:)`` once read.
        case keepAfterRead
        /// Opens the file and closes it.
        case none
    }

    /// The descriptor kept for the `.meta` (or `.body`) file of `entry`, or whether the file is
    /// to be kept once read: a `.meta` file on the entry's second read among those that kept
    /// nothing lately (this counts the read), a `.body` file while its `.meta` file is kept.
    func lookUp(_ hash: KeyHash, entry: IndexEntry, body: Bool) -> Lookup {
        guard limit > 0 else { return .none }
        let place = slot(hash, among: limit), recentPlace = slot(hash, among: 4 * limit)
        return files.withLock { files in
            if let kept = files.places[place], kept.hash == hash, kept.entry.isSameCommit(as: entry) {
                if let descriptor = body ? kept.body : kept.meta { return .kept(descriptor) }
                return .keepAfterRead
            }
            guard !body else { return .none }
            guard files.recent[recentPlace] == hash else {
                files.recent[recentPlace] = hash
                return .none
            }
            files.recent[recentPlace] = nil
            return .keepAfterRead
        }
    }

    /// Keeps the file in `opened` (taking it), read whole for `entry` after ``lookUp(_:entry:body:)``
    /// said to, if the index still holds the entry. Call under the state lock; returns the
    /// descriptors let go, for the caller to release once it has left the lock (a file left in
    /// `opened` is the caller's to close too).
    func keep(_ opened: inout OpenFile?, for hash: KeyHash, entry: IndexEntry, body: Bool) -> [SharedDescriptor] {
        guard limit > 0, opened != nil else { return [] }
        let place = slot(hash, among: limit)
        return files.withLock { files in
            if var kept = files.places[place], kept.hash == hash, kept.entry.isSameCommit(as: entry) {
                // The entry's other file, while there is room.
                guard files.descriptors < limit, (body ? kept.body : kept.meta) == nil, let file = opened.take() else { return [] }
                let descriptor = SharedDescriptor(file.release())
                if body { kept.body = descriptor } else { kept.meta = descriptor }
                files.places[place] = kept
                files.descriptors += 1
                return []
            }
            guard !body else { return [] }
            var released: [SharedDescriptor] = []
            if let old = files.places[place] {
                files.descriptors -= old.count
                if let meta = old.meta { released.append(meta) }
                if let body = old.body { released.append(body) }
                files.places[place] = nil
            }
            // At the limit with this place empty, some place holds a body file too: it goes.
            if files.descriptors >= limit, let other = files.places.firstIndex(where: { $0?.body != nil }) {
                released.append(files.places[other]!.body!)
                files.places[other]!.body = nil
                files.descriptors -= 1
            }
            guard files.descriptors < limit, let file = opened.take() else { return released }
            files.places[place] = Kept(hash: hash, entry: entry, meta: SharedDescriptor(file.release()))
            files.descriptors += 1
            return released
        }
    }

    /// Lets go of what is kept for `hash` (its entry was replaced or removed). The descriptors
    /// close as this returns.
    func drop(_ hash: KeyHash) {
        guard limit > 0 else { return }
        let place = slot(hash, among: limit)
        let released = files.withLock { files -> Kept? in
            guard let kept = files.places[place], kept.hash == hash else { return nil }
            files.places[place] = nil
            files.descriptors -= kept.count
            return kept
        }
        _ = released
    }

    /// Lets go of everything (the cache was emptied or closed).
    func dropAll() {
        guard limit > 0 else { return }
        let released = files.withLock { files -> [Kept?] in
            defer {
                files.places = Array(repeating: nil, count: limit)
                files.descriptors = 0
            }
            return files.places
        }
        _ = released
    }

    /// Descriptors kept now.
    var count: Int { files.withLock { $0.descriptors } }
}

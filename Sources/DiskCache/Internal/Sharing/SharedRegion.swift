import CDiskCacheSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `SHARED`: what the processes (and `DiskCache` instances) that have one cache open in shared
/// mode coordinate through. Each of them maps it (`MAP_SHARED`). Its first page holds a few
/// counters; the pages after it hold the locks taken for every write: the append lock and one
/// lock per key stripe, each a process-shared robust mutex (no system call unless contended; a
/// process killed while holding one hands it to the next locker, which is told). The rarer
/// locks are byte ranges past the file's end (`fcntl` open-file-description locks, so two
/// instances in one process exclude each other as two processes do, and a process killed at any
/// moment lets go of all of them); where robust mutexes do not exist, the append and stripe
/// locks are such byte ranges too.
///
/// ```
/// offset  u64 LE (read and written atomically)
///   0     magic "DCSHARED"
///   8     version (2)
///  16     generation   bumped by each compaction, which replaces the journal file
///  24     base         length of the journal file the last compaction wrote
///  32     baseRecords  records in it
///  40     end          the journal's length after the last append (where followers read to)
///  48     openCount    instances open; a clean close counts itself out
///  56     flags        bit 0: an orphan scan is due and has not finished
///  64     holderDied   1 when an instance died holding the append lock (the next holder checks
///                      the journal's true length and which file it is, then clears it)
///  72     journalInode the inode and device of the journal file the page describes
///  80     journalDevice
///  88     writtenAhead the journal file holds zeros from `end` up to here, written ahead of the
///                      appends (a hint: zeros are only ever written at or after `end`)
/// 4096    the append lock (a pthread mutex, in 64 bytes)
/// 4160    key stripe i's lock at 4160 + 64 × i, i < 256
/// ```
///
/// The first instance to open (the one that finds no other: ``Lock/presence`` taken
/// exclusively, and no other holding ``directoryPresence``) recovers the cache and writes the
/// page afresh; the others only read and update it. Every wait for one of its locks is bounded
/// by ``lockTimeout``; a page removed, replaced, damaged or cut short under its instances is
/// noticed by ``checkUsable()`` before a write's locks and never waited on or trusted. See
/// docs/on-disk-format.md, "Sharing a cache".
final class SharedRegion: @unchecked Sendable {  // unchecked: the mapping is only touched through atomics
    static let fileName = "SHARED"
    static let size = 6 * 4096
    static let magic = Array("DCSHARED".utf8)
    /// ``magic`` as the one word ``isValid`` compares (in the machine's byte order, as loaded).
    private static let magicWord = magic.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
    static let version: UInt64 = 2
    /// Whether the append and stripe locks are robust mutexes in the mapping (else byte ranges).
    static let usesMutexes = (1...64).contains(Int(cdiskcache_shared_mutex_size()))
    static let appendMutexOffset = 4096
    static let stripeMutexBase = 4096 + 64
    static let stripeCount = 256

    /// The byte ranges used as locks, all past the mapped page.
    enum Lock: Int64 {
        /// Exclusive while an instance opens or closes: opens and closes happen one at a time.
        /// A verify of the open cache (``DiskCacheInspector``) takes it too while it settles
        /// whether files are orphans, so that no first instance writes the page's locks afresh.
        case opening = 1_048_576
        /// Shared by every open instance; taken exclusively only by one that finds itself alone
        /// (and, holding the opening lock, by a verify that asks whether any instance is open).
        case presence = 1_048_577
        /// Exclusive while one instance compacts, sweeps or verifies.
        case housekeeping = 1_048_578
        /// Exclusive around each journal append, and around a compaction's swap of journals.
        case append = 1_048_579
    }
    /// The byte of the cache directory itself (not of `SHARED`) that every instance open in
    /// shared mode holds a shared lock on (an open-file-description lock on its descriptor of the
    /// directory) for as long as it is open. Removing, renaming over or damaging `SHARED`
    /// cannot take it away: it is how an opener tells "no instance is open" from "`SHARED` was
    /// replaced under open instances" (see `Opener.joinShared`).
    static let directoryPresence: Int64 = 0
    /// Key stripe `i` is the byte `stripeBase + i`: a writer holds its key's stripe across
    /// processes as its own threads hold `StripeLock`.
    static let stripeBase: Int64 = 1_048_576 + 4096

    enum Field: Int, CaseIterable {
        case generation = 16, base = 24, baseRecords = 32, end = 40, openCount = 48, flags = 56, holderDied = 64
        case journalInode = 72, journalDevice = 80, writtenAhead = 88
    }
    static let flagOrphanScanDue: UInt64 = 1

    let fd: Int32
    let path: String
    private let page: UnsafeMutableRawPointer
    /// The directory `SHARED` is looked up in by ``checkUsable()``.
    private let directory: CacheDirectory
    /// Inode and device of the file mapped, to compare with what the name `SHARED` is now.
    private let inode: UInt64, device: UInt64
    /// How long a wait for a lock may last before it fails with ``DiskCacheError/Code/lockTimeout``.
    let lockTimeout: Duration
    private let timeoutNanoseconds: Int64
    /// Words of this instance's own (not the page's), read and written atomically: when `SHARED`
    /// was last looked up (monotonic nanoseconds), and what ``checkUsable()`` found wrong
    /// (``Broken``; 0 while nothing is).
    private let words: UnsafeMutablePointer<UInt64>

    /// What made the page unusable for this instance; it stays so until the instance closes.
    enum Broken: UInt64 {
        /// The name `SHARED` no longer leads to the file mapped (removed, renamed over, a directory, link or FIFO put there).
        case replaced = 1
        /// The page no longer holds what this library wrote (zeros, garbage, cut short).
        case damaged = 2
    }
    /// `SHARED` is looked up at most this often (a `fstatat` costs about as much as a percent of a put).
    static let identityCheckInterval: UInt64 = 1_000_000

    private init(fd: Int32, path: String, page: UnsafeMutableRawPointer, directory: CacheDirectory, identity: stat,
                 lockTimeout: Duration) {
        self.fd = fd
        self.path = path
        self.page = page
        self.directory = directory
        self.inode = UInt64(identity.st_ino)
        self.device = UInt64(identity.st_dev)
        self.lockTimeout = lockTimeout
        self.timeoutNanoseconds = max(0, lockTimeout.nanoseconds)
        words = UnsafeMutablePointer<UInt64>.allocate(capacity: 2)
        words.initialize(repeating: 0, count: 2)
        cdiskcache_atomic_store(words, cdiskcache_monotonic_nanoseconds())
        // Cut short under this process, the page reads as zeros (which fail validation) instead
        // of raising SIGBUS.
        _ = cdiskcache_guard_shared_mapping(page, Self.size, fd)
    }

    deinit {
        cdiskcache_unguard_shared_mapping(page)
        // A damaged page stays mapped (to private zeros: see `markBroken`) for the life of the
        // process: a thread's robust-mutex list may still point into it.
        if broken != .damaged { munmap(page, Self.size) }
        Syscall.close(fd)
        words.deallocate()
    }

    /// Opens (creating when missing) `SHARED` in the cache directory. The mapping is made only
    /// by ``map(fd:layout:initialise:)``, once the caller knows whether it is alone.
    static func openFile(_ layout: Layout) -> Result<OpenFile, SyscallError> {
        layout.directory.open(layout.root + "/" + fileName, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0o600)
    }

    /// Maps `file`, which the region then owns: it is closed with the region, or when the
    /// mapping fails. With `initialise` (the first instance, alone) the file is sized and every
    /// field and lock written afresh; otherwise it must already be one this library wrote.
    static func map(_ file: consuming OpenFile, layout: Layout, initialise: Bool,
                    lockTimeout: Duration = .seconds(10)) throws(DiskCacheError) -> SharedRegion {
        let path = layout.root + "/" + fileName, fd = file.fd
        let identity: stat
        switch Syscall.fstat(fd) {
        case .success(let info) where info.st_mode & S_IFMT == S_IFREG:
            identity = info
        case .success:
            throw DiskCacheError(code: .sharedPageReplaced, message: "SHARED is not a regular file", path: path)
        case .failure(let error):
            throw DiskCacheError.io(error, "read the shared page's status", path: path)
        }
        if initialise {
            // Sized, never cut to zero first: an instance that closed but is still referenced
            // keeps its mapping, and must not find its pages gone (SIGBUS). Every field and lock
            // is written afresh below.
            if case .failure(let error) = Syscall.ftruncate(fd, Int64(size)) {
                throw DiskCacheError.io(error, "size the shared page", path: path)
            }
        } else if Int(identity.st_size) < size {
            throw DiskCacheError(code: .sharedPageDamaged,
                                 message: "The shared page was cut short while other instances have the cache open",
                                 path: path)
        }
        guard let page = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), page != MAP_FAILED else {
            throw DiskCacheError.io(SyscallError.current, "map the shared page", path: path)
        }
        let region = SharedRegion(fd: file.release(), path: path, page: page, directory: layout.directory, identity: identity,
                                  lockTimeout: lockTimeout)
        if initialise {
            // The version last, so that a page left half written reads as not this library's.
            cdiskcache_atomic_store(page.advanced(by: 8).assumingMemoryBound(to: UInt64.self), 0)
            page.advanced(by: 16).initializeMemory(as: UInt8.self, repeating: 0, count: 4096 - 16)
            magic.withUnsafeBytes { page.copyMemory(from: $0.baseAddress!, byteCount: 8) }
            if usesMutexes {
                for offset in [appendMutexOffset] + (0..<stripeCount).map({ stripeMutexBase + 64 * $0 }) {
                    let result = cdiskcache_shared_mutex_init(page.advanced(by: offset))
                    guard result == 0 else {
                        // `region` unmaps the page and closes `fd` as it goes.
                        throw DiskCacheError.io(SyscallError(rawValue: result), "set up the shared page's locks", path: path)
                    }
                }
            }
            cdiskcache_atomic_store(page.advanced(by: 8).assumingMemoryBound(to: UInt64.self), version)
        } else {
            let locksAreValid = !usesMutexes || ([appendMutexOffset] + (0..<stripeCount).map { stripeMutexBase + 64 * $0 })
                .allSatisfy { cdiskcache_shared_mutex_is_valid(page.advanced(by: $0)) != 0 }
            guard region.isValid, locksAreValid else {
                throw DiskCacheError(code: .sharedPageDamaged,
                                     message: "The shared page is not one this library wrote while other instances have the cache open",
                                     path: path)
            }
        }
        return region
    }

    private func pointer(_ field: Field) -> UnsafeMutablePointer<UInt64> {
        page.advanced(by: field.rawValue).assumingMemoryBound(to: UInt64.self)
    }

    subscript(field: Field) -> UInt64 {
        get { cdiskcache_atomic_load(pointer(field)) }
        set { cdiskcache_atomic_store(pointer(field), newValue) }
    }

    /// Whether `info` (the journal's status) is the file the page describes.
    func namesJournal(_ info: stat) -> Bool {
        self[.journalInode] == UInt64(info.st_ino) && self[.journalDevice] == UInt64(info.st_dev)
    }

    /// Records `info`'s file as the journal the page describes.
    func nameJournal(_ info: stat) {
        self[.journalInode] = UInt64(info.st_ino)
        self[.journalDevice] = UInt64(info.st_dev)
    }

    @discardableResult
    func add(_ field: Field, _ delta: Int64) -> UInt64 { cdiskcache_atomic_add(pointer(field), delta) }

    // MARK: - Locks

    enum Kind: Int32 { case unlock = 0, shared = 1, exclusive = 2 }

    /// Takes (or, with `.unlock`, lets go of) one of the lock bytes; `wait: false` fails with
    /// `.wouldBlock` when another instance holds a conflicting lock, and a wait fails with
    /// `.timedOut` after ``lockTimeout``.
    @discardableResult
    func lock(_ lock: Lock, _ kind: Kind, wait: Bool = true) -> Result<Void, SyscallError> {
        guard wait, kind != .unlock else { return Self.range(fd, start: lock.rawValue, length: 1, kind, wait: false) }
        return cdiskcache_range_lock_timed(fd, lock.rawValue, 1, kind.rawValue, timeoutNanoseconds) == 0
            ? .success(()) : .failure(SyscallError.current)
    }

    /// Runs `body` holding `lock` exclusively, waiting for it at most ``lockTimeout`` (then
    /// ``DiskCacheError/Code/lockTimeout``). The append lock is only taken on a page that passes
    /// ``checkUsable()``; the others (opening a cache, closing it) are byte ranges, which what
    /// is written in the page cannot affect.
    func withLock<T>(_ lock: Lock, _ body: () throws(DiskCacheError) -> T) throws(DiskCacheError) -> T {
        if lock == .append { try checkUsable() }
        if lock == .append && Self.usesMutexes {
            let mutex = page.advanced(by: Self.appendMutexOffset)
            if try lockMutex(mutex, "the append lock") { self[.holderDied] = 1 }
            defer { unlockMutex(mutex) }
            return try body()
        }
        try waitFor(start: lock.rawValue, length: 1, "the \(lock) lock")
        defer { _ = self.lock(lock, .unlock) }
        return try body()
    }

    /// Holds key stripe `index` (or all `count` of them from it) exclusively while `body` runs,
    /// on a page that passes ``checkUsable()``, each waited for at most ``lockTimeout``.
    func withStripes<T: ~Copyable>(from index: Int, count: Int = 1, _ body: () throws(DiskCacheError) -> T) throws(DiskCacheError) -> T {
        try checkUsable()
        if Self.usesMutexes {
            var held = 0
            defer { for stripe in (index..<index + held).reversed() { unlockMutex(stripeMutex(stripe)) } }
            // A holder that died left its key's files uncommitted: the next writer of the key
            // writes over them, so there is nothing to mend here.
            for stripe in index..<index + count {
                try lockMutex(stripeMutex(stripe), "a key's lock")
                held += 1
            }
            return try body()
        }
        let start = Self.stripeBase + Int64(index)
        try waitFor(start: start, length: Int64(count), "a key's lock")
        defer { _ = Self.range(fd, start: start, length: Int64(count), .unlock, wait: false) }
        return try body()
    }

    /// The mutex of key stripe `stripe` in the page.
    private func stripeMutex(_ stripe: Int) -> UnsafeMutableRawPointer { page.advanced(by: Self.stripeMutexBase + 64 * stripe) }

    /// The key stripe every writer of `hash` holds, in every instance (see `DiskCache.withStripe`).
    static func stripe(of hash: KeyHash) -> Int { Int(hash.low % UInt64(stripeCount)) }

    /// Runs `body` holding the key stripes `indexes` (ascending, as every taker of several
    /// takes them), taken without waiting: nil, with none held, when another holds one of them
    /// (or a stripe's mutex is not one this library wrote).
    func withStripesIfFree<T>(_ indexes: [Int], _ body: () -> T) -> T? {
        var held: [Int] = []
        defer {
            for stripe in held.reversed() {
                if Self.usesMutexes {
                    unlockMutex(stripeMutex(stripe))
                } else {
                    _ = Self.range(fd, start: Self.stripeBase + Int64(stripe), length: 1, .unlock, wait: false)
                }
            }
        }
        for stripe in indexes {
            let taken: Bool
            if Self.usesMutexes {
                // 1: taken from a holder that died, whose key's files the next writer writes over.
                let mutex = stripeMutex(stripe)
                let result = cdiskcache_shared_mutex_is_valid(mutex) != 0 ? cdiskcache_shared_mutex_trylock(mutex) : EINVAL
                taken = result == 0 || result == 1
            } else {
                taken = (try? Self.range(fd, start: Self.stripeBase + Int64(stripe), length: 1, .exclusive, wait: false).get()) != nil
            }
            guard taken else { return nil }
            held.append(stripe)
        }
        return body()
    }

    /// Whether the page is (still) one this library wrote: a page being written afresh by a
    /// first instance is not, until it is done; nor is one zeroed or overwritten from outside,
    /// nor one whose counters are beyond what this library writes (``maximumCounter``).
    var isValid: Bool {
        UnsafeRawPointer(page).loadUnaligned(as: UInt64.self) == Self.magicWord
            && cdiskcache_atomic_load(page.advanced(by: 8).assumingMemoryBound(to: UInt64.self)) == Self.version
            && Self.countersInRange.allSatisfy { self[$0] < Self.maximumCounter }
    }

    /// The most a counter of the page (``countersInRange``) may hold: journal offsets and
    /// record counts are far below it, and the instances following the journal turn them into
    /// `Int`s and add to them. A page holding more was overwritten from outside.
    static let maximumCounter: UInt64 = 1 << 62
    /// The fields the instances following the journal compute with.
    static let countersInRange: [Field] = [.generation, .base, .baseRecords, .end]

    /// `field` as an `Int`, for an instance that computes with it: ``DiskCacheError/Code/sharedPageDamaged``
    /// (and the page marked as such) when it is beyond ``maximumCounter``, which only a page
    /// overwritten from outside holds.
    func counter(_ field: Field) throws(DiskCacheError) -> Int {
        let value = self[field]
        guard value < Self.maximumCounter else { throw markBroken(.damaged) }
        return Int(value)  // below 2^62
    }

    // MARK: - Trust

    /// Throws unless the page can be trusted with this instance's writes: the name `SHARED`
    /// must still lead to the file this instance mapped (looked up at most once every
    /// ``identityCheckInterval``, so a change is noticed by the first write after it but for
    /// that millisecond), and the page must pass ``isValid``. Once either fails, every later
    /// call fails the same way (``DiskCacheError/Code/sharedPageReplaced`` or
    /// ``DiskCacheError/Code/sharedPageDamaged``) until this instance is closed: instances
    /// opened since cannot coordinate with it (an opener never starts a second group while one
    /// is open: see `Opener.joinShared`), and once every instance of the group has closed, the
    /// next open rebuilds `SHARED` from the journal.
    ///
    /// Costs two atomic loads, a clock read through the vDSO and a comparison when nothing is
    /// wrong; a `fstatat(2)` of `SHARED` once a millisecond at most.
    func checkUsable() throws(DiskCacheError) {
        if let broken = self.broken { throw brokenError(broken) }
        guard isValid else { throw markBroken(.damaged) }
        let now = cdiskcache_monotonic_nanoseconds()
        guard now &- cdiskcache_atomic_load(words) >= Self.identityCheckInterval else { return }
        cdiskcache_atomic_store(words, now)
        switch directory.lstat(path) {
        case .success(let info) where UInt64(info.st_ino) == inode && UInt64(info.st_dev) == device:
            return
        case .success, .failure(.noSuchFileOrDirectory):
            throw markBroken(.replaced)
        case .failure:
            return  // cannot tell (out of memory, say): the next check tries again
        }
    }

    /// What ``checkUsable()`` found wrong, if anything.
    var broken: Broken? { Broken(rawValue: cdiskcache_atomic_load(words + 1)) }

    private func markBroken(_ broken: Broken) -> DiskCacheError {
        if broken == .damaged && self.broken != .damaged {
            // glibc links each robust mutex a thread holds into that thread's list through
            // pointers stored in the mutex itself, and later locks and unlocks write through
            // them. A mutex of a damaged page left locked (its unlock is skipped) stays on the
            // list: from here the range is this process's own zeroed memory, never unmapped, so
            // those writes land there, not in the file other processes share or in nothing.
            mmap(page, Self.size, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        }
        cdiskcache_atomic_store(words + 1, broken.rawValue)
        return brokenError(broken)
    }

    private func brokenError(_ broken: Broken) -> DiskCacheError {
        let advice = "nothing was written. Close this instance: once every instance that had the cache open has closed, the next open rebuilds SHARED from the journal (nothing committed is lost)"
        switch broken {
        case .replaced:
            return DiskCacheError(code: .sharedPageReplaced,
                                  message: "The cache's SHARED file was removed or replaced while this instance had the cache open; \(advice)",
                                  path: path)
        case .damaged:
            return DiskCacheError(code: .sharedPageDamaged,
                                  message: "The cache's SHARED file was overwritten or cut short while this instance had the cache open; \(advice)",
                                  path: path)
        }
    }

    /// The error for a lock not had within ``lockTimeout``.
    func timeoutError(_ what: String) -> DiskCacheError {
        DiskCacheError(code: .lockTimeout,
                       message: "Waited \(lockTimeout) for \(what), which another instance of the cache holds (a stopped or hung process?); nothing was done. Try again, or end the process that holds it",
                       path: path, errno: ETIMEDOUT)
    }

    /// Locks a mutex of the mapping, waiting at most ``lockTimeout``; true when its last holder
    /// died holding it. A mutex whose words are not one this library made is never waited on.
    @discardableResult
    private func lockMutex(_ mutex: UnsafeMutableRawPointer, _ what: String) throws(DiskCacheError) -> Bool {
        guard cdiskcache_shared_mutex_is_valid(mutex) != 0 else { throw markBroken(.damaged) }
        let result = cdiskcache_shared_mutex_timedlock(mutex, timeoutNanoseconds)
        // Overwritten while this thread waited (garbage with the owner-died bit reads as a lock
        // taken from a dead holder): held, but not a lock any other instance honours.
        if result == 0 || result == 1, !isValid || cdiskcache_shared_mutex_is_valid(mutex) == 0 { throw markBroken(.damaged) }
        switch result {
        case 0: return false
        case 1: return true
        case ETIMEDOUT: throw timeoutError(what)
        default: throw markBroken(.damaged)  // EINVAL, ENOTRECOVERABLE, EDEADLK: not the mutex it was
        }
    }

    /// Unlocks a mutex of the mapping, unless what is there is no longer a mutex this library made.
    private func unlockMutex(_ mutex: UnsafeMutableRawPointer) {
        guard cdiskcache_shared_mutex_is_valid(mutex) != 0 else {
            _ = markBroken(.damaged)
            return
        }
        cdiskcache_shared_mutex_unlock(mutex)
    }

    /// Whether another open file description holds a lock on the byte ``directoryPresence`` of the
    /// cache directory open at `directory`: whether an instance has the cache open in shared
    /// mode, whatever became of `SHARED`. False when the filesystem cannot say.
    static func isHeld(directory: Int32) -> Bool {
        cdiskcache_range_test(directory, directoryPresence, 1, Kind.exclusive.rawValue) == 1
    }

    /// Whether `SHARED` in `layout` is a page this library wrote (its magic and version, a page
    /// long) that an instance holds the presence lock of: the page instances share, read
    /// without mapping it or taking a lock.
    static func isShared(_ layout: Layout) -> Bool {
        guard case .success(let file) = layout.directory.open(layout.root + "/" + fileName, O_RDONLY | O_NOFOLLOW | O_NONBLOCK) else { return false }
        guard case .success(let info) = Syscall.fstat(file.fd), Int(info.st_size) >= size else { return false }
        var header = [UInt8](repeating: 0, count: 16)
        guard case .success(16) = header.withUnsafeMutableBytes({ Syscall.preadAll(file.fd, $0, at: 0) }) else { return false }
        let version = header[8..<16].enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
        return Array(header[0..<8]) == magic && version == Self.version && isHeld(.presence, fd: file.fd) == true
    }

    /// Whether some instance holds `lock` (shared or exclusively) on the page open at `fd`,
    /// asked without taking it (so without standing in anyone's way, and with a descriptor open
    /// only for reading); nil when the filesystem cannot say.
    static func isHeld(_ lock: Lock, fd: Int32) -> Bool? {
        switch cdiskcache_range_test(fd, lock.rawValue, 1, Kind.exclusive.rawValue) {
        case 0: return false
        case 1: return true
        default: return nil
        }
    }

    static func range(_ fd: Int32, start: Int64, length: Int64, _ kind: Kind, wait: Bool) -> Result<Void, SyscallError> {
        cdiskcache_range_lock(fd, start, length, kind.rawValue, wait ? 1 : 0) == 0 ? .success(()) : .failure(SyscallError.current)
    }

    /// Waits for an exclusive lock on a byte range, at most ``lockTimeout`` (polling: see
    /// `cdiskcache_range_lock_timed`). A lack of kernel memory (ENOLCK) is waited out too,
    /// since going on without the lock would give up the guarantee it stands for.
    private func waitFor(start: Int64, length: Int64, _ what: String) throws(DiskCacheError) {
        guard cdiskcache_range_lock_timed(fd, start, length, Kind.exclusive.rawValue, timeoutNanoseconds) != 0 else { return }
        let error = SyscallError.current
        if error.rawValue == ETIMEDOUT { throw timeoutError(what) }
        throw DiskCacheError.io(error, "lock the shared page", path: path)
    }
}

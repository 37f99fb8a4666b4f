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
/// exclusively) recovers the cache and writes the page afresh; the others only read and update
/// it. See docs/on-disk-format.md, "Sharing a cache".
final class SharedRegion: @unchecked Sendable {  // unchecked: the mapping is only touched through atomics
    static let fileName = "SHARED"
    static let size = 6 * 4096
    static let magic = Array("DCSHARED".utf8)
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
    /// Key stripe `i` is the byte `stripeBase + i`: a writer holds its key's stripe across
    /// processes as its own threads hold `StripeLock`.
    static let stripeBase: Int64 = 1_048_576 + 4096

    enum Field: Int {
        case generation = 16, base = 24, baseRecords = 32, end = 40, openCount = 48, flags = 56, holderDied = 64
        case journalInode = 72, journalDevice = 80, writtenAhead = 88
    }
    static let flagOrphanScanDue: UInt64 = 1

    let fd: Int32
    let path: String
    private let page: UnsafeMutableRawPointer

    private init(fd: Int32, path: String, page: UnsafeMutableRawPointer) {
        self.fd = fd
        self.path = path
        self.page = page
    }

    deinit {
        munmap(page, Self.size)
        Syscall.close(fd)
    }

    /// Opens (creating when missing) `SHARED` in the cache directory. The mapping is made only
    /// by ``map(fd:layout:initialise:)``, once the caller knows whether it is alone.
    static func openFile(_ layout: Layout) -> Result<Int32, Errno> {
        layout.directory.open(layout.root + "/" + fileName, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0o600)
    }

    /// Maps `fd`, which the region then owns: it is closed with the region, or here when the
    /// mapping fails. With `initialise` (the first instance, alone) the file is sized and every
    /// field and lock written afresh; otherwise it must already be one this library wrote.
    static func map(fd: Int32, layout: Layout, initialise: Bool) throws(DiskCacheError) -> SharedRegion {
        let path = layout.root + "/" + fileName
        if initialise {
            // Sized, never cut to zero first: an instance that closed but is still referenced
            // keeps its mapping, and must not find its pages gone (SIGBUS). Every field and lock
            // is written afresh below.
            if case .failure(let error) = Syscall.ftruncate(fd, Int64(size)) {
                Syscall.close(fd)
                throw DiskCacheError.io(error, "size the shared page", path: path)
            }
        } else {
            let status = Syscall.fstat(fd)
            guard case .success(let info) = status, info.st_mode & S_IFMT == S_IFREG, Int(info.st_size) >= size else {
                Syscall.close(fd)
                if case .failure(let error) = status { throw DiskCacheError.io(error, "read the shared page's size", path: path) }
                throw DiskCacheError(code: .ioFailure,
                                     message: "The shared page is not a page long while other instances have the cache open",
                                     path: path)
            }
        }
        guard let page = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), page != MAP_FAILED else {
            let error = Errno.current
            Syscall.close(fd)
            throw DiskCacheError.io(error, "map the shared page", path: path)
        }
        let region = SharedRegion(fd: fd, path: path, page: page)
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
                        throw DiskCacheError.io(Errno(rawValue: result), "set up the shared page's locks", path: path)
                    }
                }
            }
            cdiskcache_atomic_store(page.advanced(by: 8).assumingMemoryBound(to: UInt64.self), version)
        } else {
            let found = Array(UnsafeRawBufferPointer(start: page, count: 8))
            let version = cdiskcache_atomic_load(page.advanced(by: 8).assumingMemoryBound(to: UInt64.self))
            guard found == magic, version == Self.version else {
                throw DiskCacheError(code: .ioFailure,
                                     message: "The shared page is not one this library wrote (version \(version)) while other instances have the cache open",
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
    /// `.wouldBlock` when another instance holds a conflicting lock.
    @discardableResult
    func lock(_ lock: Lock, _ kind: Kind, wait: Bool = true) -> Result<Void, Errno> {
        Self.range(fd, start: lock.rawValue, length: 1, kind, wait: wait)
    }

    /// Runs `body` holding `lock` exclusively (waiting for it).
    func withLock<T, E: Error>(_ lock: Lock, _ body: () throws(E) -> T) throws(E) -> T {
        if lock == .append && Self.usesMutexes {
            let mutex = page.advanced(by: Self.appendMutexOffset)
            if Self.lockMutex(mutex) { self[.holderDied] = 1 }
            defer { cdiskcache_shared_mutex_unlock(mutex) }
            return try body()
        }
        Self.waitFor(fd, start: lock.rawValue, length: 1)
        defer { _ = self.lock(lock, .unlock) }
        return try body()
    }

    /// Holds key stripe `index` (or all `count` of them from it) exclusively while `body` runs.
    func withStripes<T, E: Error>(from index: Int, count: Int = 1, _ body: () throws(E) -> T) throws(E) -> T {
        if Self.usesMutexes {
            let stripes = index..<index + count
            // A holder that died left its key's files uncommitted: the next writer of the key
            // writes over them, so there is nothing to mend here.
            for stripe in stripes { Self.lockMutex(stripeMutex(stripe)) }
            defer { for stripe in stripes.reversed() { cdiskcache_shared_mutex_unlock(stripeMutex(stripe)) } }
            return try body()
        }
        let start = Self.stripeBase + Int64(index)
        Self.waitFor(fd, start: start, length: Int64(count))
        defer { _ = Self.range(fd, start: start, length: Int64(count), .unlock, wait: false) }
        return try body()
    }

    /// The mutex of key stripe `stripe` in the page.
    private func stripeMutex(_ stripe: Int) -> UnsafeMutableRawPointer { page.advanced(by: Self.stripeMutexBase + 64 * stripe) }

    /// The key stripe every writer of `hash` holds, in every instance (see `DiskCache.withStripe`).
    static func stripe(of hash: KeyHash) -> Int { Int(hash.low % UInt64(stripeCount)) }

    /// Runs `body` holding the key stripes `indexes` (ascending, as every taker of several
    /// takes them), taken without waiting: nil, with none held, when another holds one of them.
    func withStripesIfFree<T>(_ indexes: [Int], _ body: () -> T) -> T? {
        var held: [Int] = []
        defer {
            for stripe in held.reversed() {
                if Self.usesMutexes {
                    cdiskcache_shared_mutex_unlock(stripeMutex(stripe))
                } else {
                    _ = Self.range(fd, start: Self.stripeBase + Int64(stripe), length: 1, .unlock, wait: false)
                }
            }
        }
        for stripe in indexes {
            let taken: Bool
            if Self.usesMutexes {
                // 1: taken from a holder that died, whose key's files the next writer writes over.
                let result = cdiskcache_shared_mutex_trylock(stripeMutex(stripe))
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
    /// first instance is not, until it is done.
    var isValid: Bool {
        Array(UnsafeRawBufferPointer(start: page, count: 8)) == Self.magic
            && cdiskcache_atomic_load(page.advanced(by: 8).assumingMemoryBound(to: UInt64.self)) == Self.version
    }

    /// Locks a mutex of the mapping; true when its last holder died holding it.
    @discardableResult
    private static func lockMutex(_ mutex: UnsafeMutableRawPointer) -> Bool {
        let result = cdiskcache_shared_mutex_lock(mutex)
        precondition(result == 0 || result == 1, "A lock on the cache's shared page failed: \(Errno(rawValue: result))")
        return result == 1
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

    static func range(_ fd: Int32, start: Int64, length: Int64, _ kind: Kind, wait: Bool) -> Result<Void, Errno> {
        cdiskcache_range_lock(fd, start, length, kind.rawValue, wait ? 1 : 0) == 0 ? .success(()) : .failure(Errno.current)
    }

    /// Waits for an exclusive lock. A lock this file accepted once cannot fail later but for a
    /// lack of kernel memory (ENOLCK): then it is retried, since going on without it would give
    /// up the guarantee it stands for.
    private static func waitFor(_ fd: Int32, start: Int64, length: Int64) {
        while case .failure(let error) = range(fd, start: start, length: length, .exclusive, wait: true) {
            precondition(error.rawValue == ENOLCK || error.rawValue == EDEADLK,
                         "A lock on the cache's shared page failed: \(error)")
            usleep(1000)
        }
    }
}

import CDiskCacheSupport
import DiskCacheLocking
import MemoryCache
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Body files kept mapped (read-only, shared) so that checking a whole body against its
/// checksum (``DiskCache/checkedBody(for:)``, what a server does before it hands the file to
/// `sendfile`) hashes the page cache's pages where they are. Reading the file instead copies
/// every byte into a buffer before the hash reads it again: 104–108 µs a MiB through a 64 KiB
/// buffer against 32–37 from a mapping kept, and 81–84 mapping the file for each check
/// (`Benchmarks/c/mapped-check.c`, 100 page-cached files of 1 MiB). The hash still reads
/// every byte on every check, so a page that left the page cache and came back from the disk
/// different is caught as before; a file cut short under its mapping is caught too
/// (`cdiskcache_hash_mapped` turns the SIGBUS into an error).
///
/// Off (capacity 0) unless the cache is given one (``DiskCache/mappedBodyCapacity``).
/// At most that many bytes of bodies are mapped, and at most ``countLimit`` files; the least
/// recently checked is unmapped first. A mapping keeps its file's blocks allocated after the
/// file is removed, so every removal of a body file by the store unmaps it first
/// (``CacheDirectory/unlink(_:)`` tells it: ``BodyRemovalObserver``), and each sweep unmaps the files another process removed
/// (``prune(in:)``): the space such files hold is bounded by the capacity and freed by the next
/// sweep.
final class MappedBodies: Sendable {
    /// Bodies smaller than this are read: their copy costs less than making a mapping.
    static let minimumSize = 64 << 10
    /// The most files mapped at once (each mapping is one of the process's memory areas,
    /// `vm.max_map_count`, 65,530 by default).
    static let countLimit = 4096

    /// A file, by the device and inode its mapping holds (an inode number cannot be reused
    /// while a mapping holds the file).
    struct FileID: Hashable, Sendable {
        let device: UInt64
        let inode: UInt64

        init(_ info: stat) {
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
        }
    }

    /// One mapped file; unmapped when the last holder lets go (a check in progress keeps it
    /// mapped after it left the table).
    final class Mapping: @unchecked Sendable {
        let bytes: UnsafeRawPointer
        let size: Int
        let id: FileID
        /// The file's path in the cache, to find out whether it is still there (``prune(in:)``).
        let path: String

        fileprivate init(bytes: UnsafeRawPointer, size: Int, id: FileID, path: String) {
            self.bytes = bytes
            self.size = size
            self.id = id
            self.path = path
        }

        deinit { munmap(UnsafeMutableRawPointer(mutating: bytes), size) }
    }

    /// The mappings, least recently checked first out, each costing its size; a mapping
    /// that leaves is released (so unmapped) outside the table's lock.
    private let table = MemoryCache<FileID, Mapping>(name: "mapped bodies", countLimit: countLimit, policy: .leastRecentlyUsed)
    /// The table's cost limit, 0 meaning none: kept here, where 0 means "map nothing".
    private let limit = PthreadMutex<Int64>(0)

    /// How many bytes of bodies may be mapped; lowering it unmaps what no longer fits.
    var capacity: Int64 {
        get { limit.withLock { $0 } }
        set {
            let capacity = max(0, newValue)
            limit.withLock { $0 = capacity }
            if capacity == 0 {
                table.removeAll()
            } else {
                table.totalCostLimit = Int(capacity)
            }
        }
    }

    /// How many files, and bytes, are mapped now.
    var usage: (count: Int, bytes: Int64) { (table.count, Int64(table.totalCost)) }

    /// The mapping of the file open as `fd` (`info` its status, `size` bytes long), made now if
    /// there is none; nil when the file is too small or too large to map, or mapping fails.
    /// `path` names the file in the cache.
    func mapping(of fd: Int32, _ info: stat, size: Int64, path: () -> String) -> Mapping? {
        guard size >= Self.minimumSize else { return nil }
        let capacity = self.capacity
        guard capacity >= size else { return nil }
        let id = FileID(info)
        if let held = table.value(for: id) {
            if held.size == size { return held }
            // The same file at another size than when it was mapped: the check that follows,
            // by reading, finds what is wrong with it.
            table.removeValue(for: id)
            return nil
        }
        guard let bytes = mmap(nil, Int(size), PROT_READ, MAP_SHARED, fd, 0), bytes != MAP_FAILED else { return nil }
        let made = Mapping(bytes: UnsafeRawPointer(bytes), size: Int(size), id: id, path: path())
        // When it does not fit, the least recently checked go until an eighth of the capacity
        // (and of the count) is free besides it: mappings leave in batches, not one per new one.
        if Int64(table.totalCost) + size > capacity { table.trim(toCost: Int(max(0, capacity - capacity / 8 - size))) }
        if table.count + 1 > Self.countLimit { table.trim(toCount: Self.countLimit - Self.countLimit / 8 - 1) }
        // Another thread may have mapped the same file meanwhile: this one replaces it.
        table.store(made, for: id, cost: Int(size))
        return made
    }

    /// Unmaps the file `id` names, if it is mapped (its bytes failed their check, or it is
    /// being removed); a check still holding the mapping keeps it until it is done.
    func drop(_ id: FileID) {
        table.removeValue(for: id)
    }

    /// Whether the file `info` describes is mapped.
    func holds(_ info: stat) -> Bool { table.valueWithoutUse(for: FileID(info)) != nil }

    /// Whether any file is mapped (a removal looks the file up only then).
    var isEmpty: Bool { table.count == 0 }

    /// Unmaps every file no longer at its path in `directory` (removed or replaced by another
    /// process).
    func prune(in directory: CacheDirectory) {
        for mapping in table.valuesWithoutUse() {
            let stillThere: Bool
            switch directory.lstat(mapping.path) {
            case .success(let info): stillThere = FileID(info) == mapping.id
            case .failure: stillThere = false
            }
            if !stillThere { drop(mapping.id) }
        }
    }

    /// Unmaps everything (the cache is closing).
    func dropAll() {
        table.removeAll()
    }
}

extension MappedBodies: BodyRemovalObserver {
    var isWatching: Bool { !isEmpty }
    func willRemove(_ info: stat) { drop(FileID(info)) }
}

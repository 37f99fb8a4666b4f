import CDiskCacheSupport
import DiskCacheLocking
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
/// (``CacheDirectory/unlink(_:)``), and each sweep unmaps the files another process removed
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
    struct FileID: Hashable {
        let device: UInt64
        let inode: UInt64
    }

    /// One mapped file; unmapped when the last holder lets go (a check in progress keeps it
    /// mapped after it is dropped from the table).
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

    private struct State {
        var capacity: Int64 = 0
        var mappings: [FileID: (mapping: Mapping, lastUse: UInt64)] = [:]
        var bytes: Int64 = 0
        var uses: UInt64 = 0

        mutating func remove(_ id: FileID) -> Mapping? {
            guard let removed = mappings.removeValue(forKey: id) else { return nil }
            bytes -= Int64(removed.mapping.size)
            return removed.mapping
        }
    }

    private let state = PthreadMutex(State())

    /// How many bytes of bodies may be mapped; lowering it unmaps what no longer fits.
    var capacity: Int64 {
        get { state.withLock { $0.capacity } }
        set {
            let dropped = state.withLock { state -> [Mapping] in
                state.capacity = max(0, newValue)
                return Self.trim(&state, toFit: 0)
            }
            _ = dropped
        }
    }

    /// How many files, and bytes, are mapped now.
    var usage: (count: Int, bytes: Int64) { state.withLock { ($0.mappings.count, $0.bytes) } }

    /// The mapping of the file open as `fd` (`info` its status, `size` bytes long), made now if
    /// there is none; nil when the file is too small or too large to map, or mapping fails.
    /// `path` names the file in the cache.
    func mapping(of fd: Int32, _ info: stat, size: Int64, path: () -> String) -> Mapping? {
        guard size >= Self.minimumSize else { return nil }
        let id = FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        enum Found { case held(Mapping), unheld, notToMap }
        let found = state.withLock { state -> Found in
            guard state.capacity >= size else { return .notToMap }
            guard let held = state.mappings[id] else { return .unheld }
            state.uses += 1
            state.mappings[id]?.lastUse = state.uses
            return .held(held.mapping)
        }
        switch found {
        case .held(let mapping) where mapping.size == size: return mapping
        case .held:
            // The same file at another size than when it was mapped: the check that follows,
            // by reading, finds what is wrong with it.
            drop(id)
            return nil
        case .notToMap: return nil
        case .unheld: break
        }
        guard let bytes = mmap(nil, Int(size), PROT_READ, MAP_SHARED, fd, 0), bytes != MAP_FAILED else { return nil }
        let made = Mapping(bytes: UnsafeRawPointer(bytes), size: Int(size), id: id, path: path())
        let dropped = state.withLock { state -> [Mapping] in
            // Another thread may have mapped the same file meanwhile: this one replaces it.
            var dropped = Self.trim(&state, toFit: size)
            if let earlier = state.remove(id) { dropped.append(earlier) }
            state.uses += 1
            state.mappings[id] = (made, state.uses)
            state.bytes += size
            return dropped
        }
        _ = dropped  // Unmapped here, outside the lock, unless a check still holds one.
        return made
    }

    /// Unmaps the file `id` names, if it is mapped (its bytes failed their check, or it is
    /// being removed); a check still holding the mapping keeps it until it is done.
    func drop(_ id: FileID) {
        let dropped = state.withLock { $0.remove(id) }
        _ = dropped
    }

    /// Unmaps the file `info` describes, if it is mapped: called before the store removes it.
    func drop(_ info: stat) {
        drop(FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)))
    }

    /// Whether the file `info` describes is mapped.
    func holds(_ info: stat) -> Bool {
        let id = FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        return state.withLock { $0.mappings[id] != nil }
    }

    /// Whether any file is mapped (a removal looks the file up only then).
    var isEmpty: Bool { state.withLock { $0.mappings.isEmpty } }

    /// Unmaps every file no longer at its path in `directory` (removed or replaced by another
    /// process).
    func prune(in directory: CacheDirectory) {
        let held = state.withLock { $0.mappings.values.map(\.mapping) }
        for mapping in held {
            let stillThere: Bool
            switch directory.lstat(mapping.path) {
            case .success(let info): stillThere = UInt64(info.st_dev) == mapping.id.device && UInt64(info.st_ino) == mapping.id.inode
            case .failure: stillThere = false
            }
            if !stillThere { drop(mapping.id) }
        }
    }

    /// Unmaps everything (the cache is closing).
    func dropAll() {
        let dropped = state.withLock { state -> [Mapping] in
            let all = state.mappings.values.map(\.mapping)
            state.mappings.removeAll()
            state.bytes = 0
            return all
        }
        _ = dropped
    }

    /// When `incoming` more bytes, or one more file, would not fit: removes the least recently
    /// used mappings until an eighth of the capacity (and of ``countLimit``) is free besides,
    /// so that a working set larger than the capacity sorts the table once per eighth, not once
    /// per file. Returns them, to be released outside the lock.
    private static func trim(_ state: inout State, toFit incoming: Int64) -> [Mapping] {
        let files = incoming > 0 ? 1 : 0
        guard state.bytes + incoming > state.capacity || state.mappings.count + files > countLimit else { return [] }
        let bytesTarget = state.capacity - state.capacity / 8 - incoming
        let countTarget = countLimit - countLimit / 8 - files
        var dropped: [Mapping] = []
        for id in state.mappings.sorted(by: { $0.value.lastUse < $1.value.lastUse }).map(\.key) {
            guard state.bytes > bytesTarget || state.mappings.count > countTarget else { break }
            if let mapping = state.remove(id) { dropped.append(mapping) }
        }
        return dropped
    }
}

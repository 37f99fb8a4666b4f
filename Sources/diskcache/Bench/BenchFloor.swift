import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The raw-file floor: the least a file-per-entry cache can do for the same workload. The same
/// body bytes in the same number of files per entry as the store uses (one file when the body
/// is inline in the store's `.meta` file, two otherwise), in the same two-level shard layout,
/// written with open/write/close into `tmp/` and renamed into place, read back with
/// open/read/close into a fresh buffer. No journal, no index, no checksum, no metadata encoding.
final class BenchFloor: Sendable {
    /// Stands in for the store's metadata record (a key, sizes, dates and a checksum in a binary
    /// property list take about this much).
    static let metaBytes = 192

    let root: String
    let filesPerEntry: Int
    let bodySize: Int
    private let serial = Atomic<UInt64>(0)
    private let shards = Mutex<Set<UInt16>>([])
    private let meta: [UInt8]

    init(root: String, bodySize: Int, filesPerEntry: Int) throws {
        self.root = root
        self.bodySize = bodySize
        self.filesPerEntry = filesPerEntry
        self.meta = [UInt8](repeating: 0x6D, count: Self.metaBytes)
        for path in [root, root + "/tmp"] where mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw BenchError("cannot create \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// 32 hex digits derived from the entry index, like the store's hash-named files.
    private func name(_ index: Int) -> (shard: UInt16, path: String) {
        var random = BenchRandom(seed: UInt64(index))
        let high = random.next(), low = random.next()
        let hex = String(high, radix: 16).benchZeroPadded(16) + String(low, radix: 16).benchZeroPadded(16)
        let a = hex.prefix(2), b = hex.dropFirst(2).prefix(2)
        return (UInt16(high >> 48), "\(root)/\(a)/\(b)/\(hex)")
    }

    private func ensureShard(_ shard: UInt16, path: String) {
        guard !shards.withLock({ $0.contains(shard) }) else { return }
        let dir = String(path[..<path.lastIndex(of: "/")!])
        let parent = String(dir[..<dir.lastIndex(of: "/")!])
        _ = mkdir(parent, 0o700)
        _ = mkdir(dir, 0o700)
        shards.withLock { _ = $0.insert(shard) }
    }

    /// Writes entry `index`; returns the body bytes written. When `replacing`, the old files
    /// are unlinked before the new ones are renamed into place: renaming over an existing file
    /// would make ext4 (auto_da_alloc) start writeback of the new file at once, which the
    /// store, which renames into an unused slot and then unlinks the old one, never pays.
    func put(_ index: Int, body: Data, replacing: Bool = false) -> Int {
        let (shard, path) = name(index)
        ensureShard(shard, path: path)
        let n = serial.add(1, ordering: .relaxed).newValue
        if replacing { remove(index) }
        if filesPerEntry == 2 {
            body.withUnsafeBytes { writeAndRename($0, nil, to: path + ".body", temp: "\(root)/tmp/\(n).body") }
            meta.withUnsafeBytes { writeAndRename($0, nil, to: path + ".meta", temp: "\(root)/tmp/\(n).meta") }
        } else {
            meta.withUnsafeBytes { header in
                body.withUnsafeBytes { writeAndRename(header, $0, to: path + ".meta", temp: "\(root)/tmp/\(n).meta") }
            }
        }
        return body.count
    }

    private func writeAndRename(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer?, to path: String, temp: String) {
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        Self.writeAll(fd, first)
        if let second { Self.writeAll(fd, second) }
        close(fd)
        rename(temp, path)
    }

    private static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < buffer.count {
            let n = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            if n < 0 { if errno == EINTR { continue } else { return } }
            offset += n
        }
    }

    /// Reads entry `index` into a fresh buffer; returns the body bytes read.
    func get(_ index: Int) -> Int {
        let (_, path) = name(index)
        if filesPerEntry == 2 {
            _ = Self.readFile(path + ".meta", count: Self.metaBytes)
            return Self.readFile(path + ".body", count: bodySize) ? bodySize : 0
        }
        return Self.readFile(path + ".meta", count: Self.metaBytes + bodySize) ? bodySize : 0
    }

    private static func readFile(_ path: String, count: Int) -> Bool {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: max(1, count), alignment: 16)
        defer { buffer.deallocate() }
        var offset = 0
        while offset < count {
            let n = pread(fd, buffer + offset, count - offset, off_t(offset))
            if n < 0 { if errno == EINTR { continue } else { return false } }
            if n == 0 { return false }
            offset += n
        }
        return true
    }

    /// Unlinks entry `index`'s files (what evicting it costs at least).
    func remove(_ index: Int) {
        let (_, path) = name(index)
        unlink(path + ".meta")
        if filesPerEntry == 2 { unlink(path + ".body") }
    }

    /// What a cache without a journal does at start: list every shard directory and stat each
    /// file (for its size and times). Returns the number of files seen.
    func scan() -> Int {
        var files = 0
        forEachName(root) { first in
            guard first.count == 2 else { return }
            forEachName(root + "/" + first) { second in
                let dir = root + "/" + first + "/" + second
                let fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                guard fd >= 0 else { return }
                defer { close(fd) }
                forEachName(dir) { name in
                    var info = stat()
                    if fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 { files += 1 }
                }
            }
        }
        return files
    }

    private func forEachName(_ path: String, _ body: (String) -> Void) {
        guard let dir = opendir(path) else { return }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { body(name) }
        }
    }
}

fileprivate extension String {
    func benchZeroPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

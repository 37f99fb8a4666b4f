import Foundation
import ToolSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The floor: the cheapest way this machine can do the store's work, so that the store's rows
/// can be read as a ratio to what the hardware and filesystem allow. Storing an entry means
/// its body ends up in one file whose name (32 hex digits derived from the entry index, like
/// the store's hashed names) can be read back; nothing else: no journal, no index, no
/// checksum, no metadata.
///
/// How to write that file is not fixed: ``probe(in:trash:body:threads:durable:maxPuts:seconds:rounds:onProgress:)``
/// tries every ``Layout`` × ``Strategy`` on this machine and the fastest writer is the floor.
/// It is never a copy of the store's own design.
final class BenchFloor: Sendable {
    /// Where the entry files live.
    enum Layout: String, CaseIterable, Codable, Sendable {
        /// 256 directories `00`…`ff` (the first two hex digits of the name), all made up front.
        case shards
        /// Every file in one directory.
        case flat

        var label: String { self == .shards ? "256 shards" : "flat directory" }
    }

    /// How a put makes the file appear under its name.
    enum Strategy: String, CaseIterable, Codable, Sendable {
        /// A uniquely named temporary file in the entry's directory, renamed onto the name.
        case renameInDirectory
        /// A temporary file in `tmp/`, renamed onto the name.
        case renameFromTmp
        /// An unnamed `O_TMPFILE` in the entry's directory, given its name with `linkat`.
        case tmpfileLink
        /// The final name created directly with `O_CREAT|O_EXCL` (an overwrite unlinks first).
        case exclusiveCreate

        var label: String {
            switch self {
            case .renameInDirectory: "temporary in the directory + rename"
            case .renameFromTmp: "temporary in tmp/ + rename"
            case .tmpfileLink: "O_TMPFILE + linkat"
            case .exclusiveCreate: "direct O_EXCL create"
            }
        }
    }

    /// How a get reads the body (its size is known, as the store's index knows it).
    enum ReadMethod: String, CaseIterable, Codable, Sendable {
        /// `pread` from offset 0 until the size is read.
        case pread
        /// One `read` of the whole size.
        case read

        var label: String { self == .pread ? "pread" : "one read()" }
    }

    let root: String
    /// `root`'s bytes, for paths built without allocating.
    private let rootBytes: [UInt8]
    let bodySize: Int
    let layout: Layout
    let strategy: Strategy
    let readMethod: ReadMethod
    /// With `--durability immediate`: each file is fsync'd before it gets its name, and its
    /// directory after, the least that makes a put survive power loss.
    let isDurable: Bool
    private let serial = Atomic<UInt64>(0)

    init(root: String, bodySize: Int, layout: Layout, strategy: Strategy, readMethod: ReadMethod = .pread,
         durable: Bool = false) throws {
        self.root = root
        rootBytes = Array(root.utf8)
        self.bodySize = bodySize
        self.layout = layout
        self.strategy = strategy
        self.readMethod = readMethod
        self.isDurable = durable
        var directories = [root, root + "/tmp"]
        if layout == .shards { directories += (0..<256).map { "\(root)/\(Self.hex(UInt64($0), digits: 2))" } }
        for path in directories where mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw BenchError("cannot create \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Whether the filesystem under `directory` supports `O_TMPFILE`.
    static func supportsTmpfile(in directory: String) -> Bool {
        #if os(Linux)
        let fd = open(directory, oTmpfile | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        close(fd)
        return true
        #else
        return false
        #endif
    }

    // MARK: - Names

    /// The entry's directory and its 32-hex-digit file name.
    private func location(_ index: Int) -> (directory: String, name: String) {
        let (high, low) = Self.nameBits(index)
        let name = String(unsafeUninitializedCapacity: 32) { buffer in
            Self.writeHex(high, digits: 16, into: buffer.baseAddress!)
            Self.writeHex(low, digits: 16, into: buffer.baseAddress! + 16)
            return 32
        }
        switch layout {
        case .shards: return (root + "/" + Self.hex(high >> 56, digits: 2), name)
        case .flat: return (root, name)
        }
    }

    /// The 128 bits an entry's name is written from.
    private static func nameBits(_ index: Int) -> (high: UInt64, low: UInt64) {
        var random = SplitMix64(seed: UInt64(index))
        return (random.next(), random.next())
    }

    private static let hexDigits: StaticString = "0123456789abcdef"

    /// `value`'s lowest `digits` hex digits, most significant first, at `buffer`.
    private static func writeHex(_ value: UInt64, digits: Int, into buffer: UnsafeMutablePointer<UInt8>) {
        let table = hexDigits.utf8Start
        for i in 0..<digits { buffer[i] = table[Int(truncatingIfNeeded: value >> UInt64(4 * (digits - 1 - i))) & 0xF] }
    }

    private static func hex(_ value: UInt64, digits: Int) -> String {
        String(unsafeUninitializedCapacity: digits) { buffer in
            writeHex(value, digits: digits, into: buffer.baseAddress!)
            return digits
        }
    }

    /// Runs `body` with entry `index`'s path as a C string built on the stack, as a C program
    /// would (no allocation): what a get opens.
    private func withPath<T>(_ index: Int, _ body: (UnsafePointer<CChar>) -> T) -> T {
        let (high, low) = Self.nameBits(index)
        return rootBytes.withUnsafeBufferPointer { root in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: root.count + 3 + 1 + 32 + 1) { buffer in
                let start = buffer.baseAddress!
                start.update(from: root.baseAddress!, count: root.count)
                var i = root.count
                if layout == .shards {
                    start[i] = UInt8(ascii: "/")
                    Self.writeHex(high >> 56, digits: 2, into: start + i + 1)
                    i += 3
                }
                start[i] = UInt8(ascii: "/")
                Self.writeHex(high, digits: 16, into: start + i + 1)
                Self.writeHex(low, digits: 16, into: start + i + 17)
                start[i + 33] = 0
                return start.withMemoryRebound(to: CChar.self, capacity: i + 34) { body($0) }
            }
        }
    }

    // MARK: - Operations

    /// Writes entry `index`; returns the body bytes written. When `replacing`, the old file is
    /// unlinked first: `O_EXCL` and `linkat` need the name free, and renaming over an existing
    /// file would make ext4 (auto_da_alloc) start writeback of the new one at once.
    func put(_ index: Int, body: Data, replacing: Bool = false) -> Int {
        let (directory, name) = location(index)
        let path = directory + "/" + name
        if replacing { unlink(path) }
        let written = body.withUnsafeBytes { bytes -> Bool in
            switch strategy {
            case .renameInDirectory:
                return writeAndRename(bytes, temp: "\(directory)/.tmp-\(nextSerial())", to: path, directory: directory)
            case .renameFromTmp:
                return writeAndRename(bytes, temp: "\(root)/tmp/\(nextSerial())", to: path, directory: directory)
            case .tmpfileLink:
                #if os(Linux)
                let fd = open(directory, Self.oTmpfile | O_WRONLY | O_CLOEXEC, 0o600)
                guard fd >= 0 else { return writeAndRename(bytes, temp: "\(directory)/.tmp-\(nextSerial())", to: path, directory: directory) }
                defer { close(fd) }
                return fill(fd, bytes) && linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0 && syncDirectory(directory)
                #else
                return writeAndRename(bytes, temp: "\(directory)/.tmp-\(nextSerial())", to: path, directory: directory)
                #endif
            case .exclusiveCreate:
                let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
                guard fd >= 0 else { return false }
                defer { close(fd) }
                return fill(fd, bytes) && syncDirectory(directory)
            }
        }
        return written ? body.count : 0
    }

    /// Reads entry `index` into a fresh buffer; returns the body bytes read.
    func get(_ index: Int) -> Int { get(index, using: readMethod) }

    func get(_ index: Int, using method: ReadMethod) -> Int {
        let fd = withPath(index) { open($0, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: max(1, bodySize), alignment: 16)
        defer { buffer.deallocate() }
        switch method {
        case .read:
            return read(fd, buffer, bodySize) == bodySize ? bodySize : 0
        case .pread:
            var offset = 0
            while offset < bodySize {
                let n = pread(fd, buffer + offset, bodySize - offset, off_t(offset))
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return 0 }
                offset += n
            }
            return bodySize
        }
    }

    /// Unlinks entry `index`'s file (what evicting it costs at least).
    func remove(_ index: Int) {
        let (directory, name) = location(index)
        unlink(directory + "/" + name)
    }

    /// What a cache without a journal does at start: list the directories and stat each file
    /// (for its size and times). Returns the number of entry files seen.
    func scan() -> Int {
        var files = 0
        func scanDirectory(_ path: String) {
            let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard fd >= 0 else { return }
            defer { close(fd) }
            Self.forEachName(path) { name in
                guard name.utf8.count == 32 else { return }
                var info = stat()
                if fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 { files += 1 }
            }
        }
        switch layout {
        case .flat: scanDirectory(root)
        case .shards: Self.forEachName(root) { if $0.utf8.count == 2 { scanDirectory(root + "/" + $0) } }
        }
        return files
    }

    // MARK: - Helpers

    private func nextSerial() -> UInt64 { serial.add(1, ordering: .relaxed).newValue }

    private func writeAndRename(_ bytes: UnsafeRawBufferPointer, temp: String, to path: String, directory: String) -> Bool {
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        let filled = fill(fd, bytes)
        close(fd)
        return filled && rename(temp, path) == 0 && syncDirectory(directory)
    }

    /// Writes all of `bytes` (and fsyncs them when durable).
    private func fill(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            offset += n
        }
        return !isDurable || fsync(fd) == 0
    }

    private func syncDirectory(_ path: String) -> Bool {
        guard isDurable else { return true }
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return fsync(fd) == 0
    }

    #if os(Linux)
    /// `O_TMPFILE` is `__O_TMPFILE | O_DIRECTORY`, a macro Swift does not import; `__O_TMPFILE`
    /// is 0o20000000 on x86_64 and arm64.
    static let oTmpfile: Int32 = 0o20000000 | O_DIRECTORY
    #endif

    static func forEachName(_ path: String, _ body: (String) -> Void) {
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

// The file system's test hooks (FileSystemObservers) exist in debug builds only.
#if DEBUG
@testable import DiskCache
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// A test-only model of a power cut under the strict POSIX persistence model (the model of
// LazyFS and of the ALICE study, OSDI '14):
//
// - a file's data (and mode) survives only if the file was fsynced, or a syncfs ran, after
//   the change;
// - a directory entry (create, rename, link, unlink, mkdir, rmdir) survives only if its parent
//   directory was fsynced, or a syncfs ran, after the change. A rename between two directories
//   is two changes, one in each: a cut can leave the name in both places or in neither.
//
// `FileSystemRecorder` collects, from `FileSystemObservers`, the calls that touch one test's
// base directory; `FileSystemModel` replays them over inodes and directories that each keep a
// current and a durable state, and answers, after any prefix of the events, what a power cut
// there would leave (`CrashImage`), which `CrashImage.materialise(at:)` writes to a fresh real
// directory. Nothing here knows the cache's layout: it works from the events and their paths.

// MARK: - Recording

/// Records the file-system calls that touch `base` (a directory that exists when recording
/// starts), from any thread, until `stop()`. Observers are global and tests run in parallel:
/// calls on other paths, and on descriptors opened elsewhere, are ignored.
final class FileSystemRecorder: Sendable {
    let base: String
    /// `base` as it was when recording started: everything in it counts as durable.
    let initial: FileSystemModel
    private let recording: Locked<Recording>
    private let token = Locked<Int?>(nil)

    private struct Recording {
        var events: [FileSystemEvent] = []
        /// Descriptors opened inside `base` and not yet closed.
        var descriptors: Set<Int32> = []
        var isStopped = false
    }

    init(base: String) throws {
        let base = FileSystemModel.normalise(base)
        self.base = base
        self.initial = try FileSystemModel(snapshotOf: base)
        let recording = Locked(Recording())
        self.recording = recording
        let prefix = base == "/" ? "/" : base + "/"
        @Sendable func inside(_ path: String) -> Bool {
            let path = FileSystemModel.normalise(path)
            return path == base || path.hasPrefix(prefix)
        }
        token.value = FileSystemObservers.add { event in
            recording.withLock { state in
                guard !state.isStopped else { return }
                let keep: Bool
                switch event {
                case .open(let fd, let path, _, _):
                    if inside(path) {
                        state.descriptors.insert(fd)
                        keep = true
                    } else {
                        state.descriptors.remove(fd)
                        keep = false
                    }
                case .write(let fd, _, _), .truncate(let fd, _), .fsync(let fd), .syncFileSystem(let fd):
                    keep = state.descriptors.contains(fd)
                case .close(let fd):
                    keep = state.descriptors.remove(fd) != nil
                case .rename(let from, let to):
                    keep = inside(from) || inside(to)
                case .link(let existing, let new):
                    keep = inside(existing) || inside(new)
                case .unlink(let path), .mkdir(let path), .rmdir(let path), .chmod(let path, _):
                    keep = inside(path)
                }
                if keep { state.events.append(event) }
            }
        }
    }

    deinit { stop() }

    /// How many events were recorded so far: the index the next one will have.
    var count: Int { recording.withLock { $0.events.count } }

    var events: [FileSystemEvent] { recording.withLock { $0.events } }

    /// Stops recording (idempotent) and returns what was recorded.
    @discardableResult
    func stop() -> [FileSystemEvent] {
        if let token = token.withLock({ token -> Int? in defer { token = nil }; return token }) {
            FileSystemObservers.remove(token)
        }
        return recording.withLock { state in
            state.isStopped = true
            return state.events
        }
    }
}

// MARK: - The model

/// An in-memory file system fed by `FileSystemEvent`s: inodes with current and durable
/// content, directories with current and durable entries, hard links as several names for one
/// inode. The root is the recorder's base directory, durable as it was found.
struct FileSystemModel {
    enum Node: Hashable {
        case file(Int)
        case directory(Int)
    }

    /// A change to a file's data not yet made durable.
    enum DataChange {
        case write(offset: Int, bytes: [UInt8])
        case truncate(length: Int)
        case mode(UInt32)
    }

    struct File {
        var current: [UInt8] = []
        var durable: [UInt8] = []
        var mode: UInt32 = 0o600
        var durableMode: UInt32 = 0o600
        /// The changes since the last sync, oldest first: a crash may keep any prefix of them.
        var pending: [DataChange] = []
    }

    struct Directory {
        var current: [String: Node] = [:]
        var durable: [String: Node] = [:]
        var mode: UInt32 = 0o700
        var durableMode: UInt32 = 0o700
        /// The entry changes since the last sync, oldest first (nil: the name went away).
        var pending: [(name: String, node: Node?)] = []
    }

    /// The base directory's absolute path.
    let base: String
    private(set) var files: [File] = []
    private(set) var directories: [Directory] = [Directory()]
    private var descriptors: [Int32: Node] = [:]
    /// Events the model could not make sense of (a name it does not know, a descriptor it never
    /// saw opened): a test should fail on any, since the model no longer follows the real files.
    private(set) var anomalies: [String] = []
    /// Events applied so far.
    private(set) var applied = 0

    static let root = 0

    /// The model of `base` as it is on disk now, all of it durable.
    init(snapshotOf base: String) throws {
        self.base = Self.normalise(base)
        try scan(self.base, into: Self.root)
    }

    private mutating func scan(_ path: String, into directory: Int) throws {
        for name in try FileManager.default.contentsOfDirectory(atPath: path) {
            let child = path + "/" + name
            var info = stat()
            guard lstat(child, &info) == 0 else { continue }
            let node: Node
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                directories.append(Directory(mode: UInt32(info.st_mode & 0o7777), durableMode: UInt32(info.st_mode & 0o7777)))
                node = .directory(directories.count - 1)
                try scan(child, into: directories.count - 1)
            case S_IFREG:
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: child)))
                files.append(File(current: bytes, durable: bytes, mode: UInt32(info.st_mode & 0o7777),
                                  durableMode: UInt32(info.st_mode & 0o7777)))
                node = .file(files.count - 1)
            default:
                continue
            }
            directories[directory].current[name] = node
            directories[directory].durable[name] = node
        }
    }

    /// `path` without repeated or trailing slashes and without "." components.
    static func normalise(_ path: String) -> String {
        let parts = path.split(separator: "/").filter { $0 != "." }
        return (path.hasPrefix("/") ? "/" : "") + parts.joined(separator: "/")
    }

    // MARK: Applying events

    mutating func apply(_ events: some Sequence<FileSystemEvent>) {
        for event in events { apply(event) }
    }

    mutating func apply(_ event: FileSystemEvent) {
        applied += 1
        switch event {
        case .open(let fd, let path, let created, let truncated):
            if Self.normalise(path) == base {
                descriptors[fd] = .directory(Self.root)
                return
            }
            guard let (parent, name) = parentAndName(path, event) else { return }
            var node = directories[parent].current[name]
            if created {
                if node != nil { note("open says it created \(path), which the model already has") }
                files.append(File())
                node = .file(files.count - 1)
                setEntry(parent, name, node)
            } else if node == nil {
                note("open of \(path), which the model does not have")
                files.append(File())
                node = .file(files.count - 1)
                setEntry(parent, name, node)
            }
            descriptors[fd] = node
            if truncated, case .file(let id)? = node { change(id, .truncate(length: 0)) }
        case .write(let fd, let offset, let bytes):
            guard case .file(let id)? = descriptor(fd, event) else { return }
            change(id, .write(offset: Int(offset), bytes: bytes))
        case .truncate(let fd, let length):
            guard case .file(let id)? = descriptor(fd, event) else { return }
            change(id, .truncate(length: Int(length)))
        case .fsync(let fd):
            switch descriptor(fd, event) {
            case .file(let id)?: syncFile(id)
            case .directory(let id)?: syncDirectory(id)
            case nil: break
            }
        case .close(let fd):
            if descriptors.removeValue(forKey: fd) == nil { note("close of descriptor \(fd), never opened") }
        case .rename(let from, let to):
            guard let (source, sourceName) = parentAndName(from, event),
                  let (target, targetName) = parentAndName(to, event) else { return }
            guard let node = directories[source].current[sourceName] else {
                return note("rename of \(from), which the model does not have")
            }
            if source == target && sourceName == targetName { return }
            setEntry(source, sourceName, nil)
            setEntry(target, targetName, node)
        case .link(let existing, let new):
            guard let (source, sourceName) = parentAndName(existing, event),
                  let (target, targetName) = parentAndName(new, event) else { return }
            guard let node = directories[source].current[sourceName] else {
                return note("link of \(existing), which the model does not have")
            }
            if directories[target].current[targetName] != nil { note("link over \(new), which exists") }
            setEntry(target, targetName, node)
        case .unlink(let path):
            guard let (parent, name) = parentAndName(path, event) else { return }
            guard case .file? = directories[parent].current[name] else {
                return note("unlink of \(path), which the model does not have as a file")
            }
            setEntry(parent, name, nil)
        case .mkdir(let path):
            guard let (parent, name) = parentAndName(path, event) else { return }
            if directories[parent].current[name] != nil { note("mkdir of \(path), which exists") }
            directories.append(Directory())
            setEntry(parent, name, .directory(directories.count - 1))
        case .rmdir(let path):
            guard let (parent, name) = parentAndName(path, event) else { return }
            guard case .directory(let id)? = directories[parent].current[name] else {
                return note("rmdir of \(path), which the model does not have as a directory")
            }
            if !directories[id].current.isEmpty { note("rmdir of \(path), which is not empty in the model") }
            setEntry(parent, name, nil)
        case .chmod(let path, let mode):
            guard let (parent, name) = parentAndName(path, event) else { return }
            switch directories[parent].current[name] {
            case .file(let id)?: change(id, .mode(mode & 0o7777))
            case .directory(let id)?: directories[id].mode = mode & 0o7777
            case nil: note("chmod of \(path), which the model does not have")
            }
        case .syncFileSystem:
            for id in files.indices { syncFile(id) }
            for id in directories.indices { syncDirectory(id) }
        }
    }

    private mutating func note(_ message: String) {
        anomalies.append("event \(applied - 1): \(message)")
    }

    private mutating func descriptor(_ fd: Int32, _ event: FileSystemEvent) -> Node? {
        guard let node = descriptors[fd] else {
            note("\(event) on a descriptor the model never saw opened")
            return nil
        }
        return node
    }

    /// The directory holding `path` (in the current tree) and the last component.
    private mutating func parentAndName(_ path: String, _ event: FileSystemEvent) -> (Int, String)? {
        let path = Self.normalise(path)
        guard path.hasPrefix(base + "/") else {
            note("\(event) outside the base directory")
            return nil
        }
        var components = path.dropFirst(base.count + 1).split(separator: "/").map(String.init)
        guard let name = components.popLast() else { return nil }
        var directory = Self.root
        for component in components {
            guard case .directory(let child)? = directories[directory].current[component] else {
                note("\(event): no directory \(component) in the model")
                return nil
            }
            directory = child
        }
        return (directory, name)
    }

    private mutating func setEntry(_ directory: Int, _ name: String, _ node: Node?) {
        directories[directory].current[name] = node
        directories[directory].pending.append((name, node))
    }

    private mutating func change(_ id: Int, _ change: DataChange) {
        var file = files[id]
        files[id] = File()  // so that the copy below is the only reference and is changed in place
        Self.apply(change, to: &file.current, mode: &file.mode)
        file.pending.append(change)
        files[id] = file
    }

    private static func apply(_ change: DataChange, to bytes: inout [UInt8], mode: inout UInt32) {
        switch change {
        case .write(let offset, let data):
            let end = offset + data.count
            if bytes.count < end { appendZeros(end - bytes.count, to: &bytes) }
            // Copied as memory: the journal's zeros written ahead come a megabyte at a time, and
            // element-wise copies of those in a debug build made this model the test's whole cost.
            bytes.withUnsafeMutableBytes { target in
                data.withUnsafeBytes { source in
                    guard let from = source.baseAddress else { return }
                    (target.baseAddress! + offset).copyMemory(from: from, byteCount: source.count)
                }
            }
        case .truncate(let length):
            if length < bytes.count { bytes.removeLast(bytes.count - length) }
            else { appendZeros(length - bytes.count, to: &bytes) }
        case .mode(let value):
            mode = value
        }
    }

    private static func appendZeros(_ count: Int, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            if let base = buffer.baseAddress { memset(base, 0, count) }
            initialized = count
        })
    }

    private mutating func syncFile(_ id: Int) {
        guard !files[id].pending.isEmpty else { return }
        files[id].durable = files[id].current
        files[id].durableMode = files[id].mode
        files[id].pending = []
    }

    private mutating func syncDirectory(_ id: Int) {
        directories[id].durableMode = directories[id].mode
        guard !directories[id].pending.isEmpty else { return }
        directories[id].durable = directories[id].current
        directories[id].pending = []
    }

    // MARK: What a power cut leaves

    /// Which of the changes not yet made durable a power cut keeps.
    enum CrashVariant: Hashable, CustomStringConvertible {
        /// None: the strict model, everything not synced is lost.
        case strict
        /// Every unsynced directory change (names reach the disk ahead of data), no unsynced data.
        case namesFirst
        /// Every unsynced data change (data reaches the disk ahead of names), no unsynced name.
        case dataFirst
        /// For each file and each directory independently, a pseudo-random prefix of its
        /// unsynced changes (the last write kept in part, never garbage), chosen from `seed`.
        case prefix(seed: UInt64)

        var description: String {
            switch self {
            case .strict: return "strict"
            case .namesFirst: return "names first"
            case .dataFirst: return "data first"
            case .prefix(let seed): return "prefix(\(seed))"
            }
        }

        /// How many of `count` unsynced changes of node `id` survive, and whether part of the
        /// next one does too (a number of its first bytes, for a write).
        func kept(_ count: Int, ofFile: Bool, id: Int) -> (whole: Int, partial: ((Int) -> Int)?) {
            switch self {
            case .strict: return (0, nil)
            case .namesFirst: return (ofFile ? 0 : count, nil)
            case .dataFirst: return (ofFile ? count : 0, nil)
            case .prefix(let seed):
                var random = SplitMix64(seed: seed ^ (UInt64(id) &* 0x9E37_79B9_7F4A_7C15) ^ (ofFile ? 0x5EED_F11E : 0xD1DE_C7ED))
                let whole = Int(random.next() % UInt64(count + 1))
                guard ofFile, random.next() % 2 == 0 else { return (whole, nil) }
                let cut = random.next()
                return (whole, { length in Int(cut % UInt64(max(1, length))) })
            }
        }
    }

    /// What a power cut after the events applied so far would leave under `base`.
    func crashImage(_ variant: CrashVariant = .strict) -> CrashImage {
        var image = CrashImage()
        var fileContents: [Int: (bytes: [UInt8], mode: UInt32)] = [:]
        func content(_ id: Int) -> (bytes: [UInt8], mode: UInt32) {
            if let known = fileContents[id] { return known }
            let file = files[id]
            var bytes = file.durable
            var mode = file.durableMode
            if !file.pending.isEmpty {
                let (whole, partial) = variant.kept(file.pending.count, ofFile: true, id: id)
                for change in file.pending.prefix(whole) { Self.apply(change, to: &bytes, mode: &mode) }
                // Part of the next write: its first bytes only.
                if whole < file.pending.count, let partial, case .write(let offset, let data) = file.pending[whole] {
                    Self.apply(.write(offset: offset, bytes: Array(data.prefix(partial(data.count)))), to: &bytes, mode: &mode)
                }
            }
            fileContents[id] = (bytes, mode)
            return (bytes, mode)
        }
        func entries(_ id: Int) -> [String: Node] {
            let directory = directories[id]
            var entries = directory.durable
            if !directory.pending.isEmpty {
                let kept = variant.kept(directory.pending.count, ofFile: false, id: id).whole
                for (name, node) in directory.pending.prefix(kept) { entries[name] = node }
            }
            return entries
        }
        // From the durable root down; a directory reachable by two names (a rename between two
        // directories, both synced or neither) is written under both, and the walk never loops.
        func walk(_ id: Int, _ path: String, _ ancestors: Set<Int>) {
            for (name, node) in entries(id).sorted(by: { $0.key < $1.key }) {
                let child = path.isEmpty ? name : path + "/" + name
                switch node {
                case .directory(let sub):
                    guard !ancestors.contains(sub) else { continue }
                    image.directories.append((child, directories[sub].durableMode))
                    walk(sub, child, ancestors.union([sub]))
                case .file(let file):
                    let (bytes, mode) = content(file)
                    image.files.append((child, bytes, mode, file))
                }
            }
        }
        walk(Self.root, "", [Self.root])
        return image
    }
}

/// What a power cut leaves under the base directory: paths relative to it.
struct CrashImage {
    /// Parents before children.
    var directories: [(path: String, mode: UInt32)] = []
    /// `inode` tells hard links apart from copies.
    var files: [(path: String, bytes: [UInt8], mode: UInt32, inode: Int)] = []

    /// Equal for equal images (within one process).
    var fingerprint: Int {
        var hasher = Hasher()
        for directory in directories { hasher.combine(directory.path); hasher.combine(directory.mode) }
        hasher.combine(-1)
        for file in files {
            hasher.combine(file.path)
            // The shared page is written through a mapping, which the model does not see; what
            // a power cut leaves of it does not matter (the first instance to open writes it afresh).
            if !file.path.hasSuffix("/SHARED") { hasher.combine(file.bytes) }
            hasher.combine(file.mode)
            hasher.combine(file.inode)
        }
        return hasher.finalize()
    }

    func contains(_ path: String) -> Bool {
        directories.contains { $0.path == path } || files.contains { $0.path == path }
    }

    /// Writes the image into `root` (created; its parent must exist). Names of one inode become
    /// hard links of one real file.
    func materialise(at root: String) throws {
        func check(_ result: Int32, _ what: String) throws {
            if result != 0 { throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "\(what): \(SyscallError.current)"]) }
        }
        try check(mkdir(root, 0o700), "mkdir \(root)")
        for directory in directories {
            try check(mkdir(root + "/" + directory.path, 0o700), "mkdir \(directory.path)")
        }
        var written: [Int: String] = [:]
        for file in files {
            let path = root + "/" + file.path
            if let first = written[file.inode] {
                try check(link(first, path), "link \(file.path)")
                continue
            }
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            guard fd >= 0 else { try check(-1, "create \(file.path)"); return }
            var offset = 0
            while offset < file.bytes.count {
                let count = file.bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, file.bytes.count - offset) }
                if count <= 0 { close(fd); try check(-1, "write \(file.path)") }
                offset += count
            }
            close(fd)
            if file.mode != 0o600 { try check(chmod(path, mode_t(file.mode)), "chmod \(file.path)") }
            written[file.inode] = path
        }
        // Directory modes last, so that a read-only one does not stop the files going in.
        for directory in directories.reversed() where directory.mode != 0o700 {
            try check(chmod(root + "/" + directory.path, mode_t(directory.mode)), "chmod \(directory.path)")
        }
    }

    /// A short listing for failure messages.
    var summary: String {
        let lines = directories.map { "\($0.path)/" } + files.map { "\($0.path) (\($0.bytes.count) bytes)" }
        return lines.sorted().joined(separator: ", ")
    }
}

/// A value behind a lock, shareable between threads.
final class Locked<Value>: @unchecked Sendable {  // unchecked: every access holds `lock`
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&stored)
    }
    var value: Value {
        get { withLock { $0 } }
        set { withLock { $0 = newValue } }
    }
}

/// A small deterministic generator (SplitMix64): the same seed, the same sequence.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
#endif

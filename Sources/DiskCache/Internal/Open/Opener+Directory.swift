import CDiskCacheSupport
import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// The cache directory: made or checked, its shards made, what stands in their way moved
// aside, what the last session left in tmp/ emptied, and whether it is on a network filesystem.

extension Opener {
    /// Makes the directory when it is missing; otherwise checks that it is a directory this
    /// process may use and that it is empty or carries the cache's mark. Returns whether a new
    /// cache is to be made in it.
    static func prepareDirectory(_ path: String) throws(DiskCacheError) -> Bool {
        var info = stat()
        if stat(path, &info) != 0 {
            let error = SyscallError.current
            guard error == .noSuchFileOrDirectory else {
                throw DiskCacheError.io(error, "look at the cache directory", path: path)
            }
            try createDirectories(path)
            return true
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw DiskCacheError(code: .notADirectory, message: "The cache path exists and is not a directory", path: path)
        }
        guard Syscall.access(path, R_OK | W_OK | X_OK) else {
            throw DiskCacheError(code: .permissionDenied,
                                 message: "The cache directory must be readable, writable and searchable by this process",
                                 path: path, errno: SyscallError.current.rawValue)
        }
        let names = try Syscall.listDirectory(path).get(orThrow: "list the cache directory", path: path)
        // Empty, or what a new cache's first step leaves when it is cut short.
        if names.allSatisfy({ $0.name.hasPrefix(FormatMarker.temporaryPrefix) }) { return true }
        switch try FormatMarker.readRefusingNewer(root: path) {
        case .marked, .legacy:
            return false
        case .missing:
            let sample = names.map(\.name).sorted().prefix(3).joined(separator: ", ")
            let hint = FormatMarker.isRecognisablyACache(names)
                ? "; it looks like a cache whose VERSION file was lost: `diskcache verify --repair` marks it again"
                : "; use an empty or new directory"
            throw DiskCacheError(code: .notACache,
                                 message: "The directory holds other files (\(sample)\(names.count > 3 ? ", …" : "")) and no VERSION file, so it is not a cache\(hint)",
                                 path: path)
        case .damaged(let what):
            // Another user's cache in a directory this process may write to: its files (0600)
            // cannot be read, which says nothing about whether it is a cache.
            let versionFile = Layout(root: path).versionFile
            if !Syscall.access(versionFile, R_OK), SyscallError.current == .permissionDenied {
                throw DiskCacheError(code: .permissionDenied,
                                     message: "The cache's VERSION file cannot be read by this process (the cache's files belong to another user?)",
                                     path: versionFile, errno: SyscallError.permissionDenied.rawValue)
            }
            let hint = FormatMarker.isRecognisablyACache(names)
                ? "; the rest of the directory is a cache's: `diskcache verify --repair` marks it again" : ""
            throw DiskCacheError(code: .notACache,
                                 message: "The directory's VERSION file is not a cache's mark (\(what)), so it is not opened as a cache\(hint)",
                                 path: Layout(root: path).versionFile)
        }
    }

    /// Makes the cache directory and its missing parents, each made durable in its parent
    /// before the next step (`fsync(2)` of the parent after each `mkdir`), so that a power cut
    /// cannot take away a directory that acknowledged writes live in.
    private static func createDirectories(_ path: String) throws(DiskCacheError) {
        let absolute = path.hasPrefix("/")
        var prefix = absolute ? "" : "."
        var parent = absolute ? "/" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            switch Syscall.mkdir(prefix, 0o700) {
            case .success:
                try Syscall.fsyncDirectory(parent).get(orThrow: "sync a directory the cache was created in", path: parent)
            case .failure(.fileExists):
                break
            case .failure(let error):
                throw DiskCacheError.io(error, "create the cache directory", path: prefix)
            }
            parent = prefix
        }
    }

    /// Makes the 256 shard directories that are missing (all of them for a new cache) and, if
    /// it made any, fsyncs the cache directory: a store is only ever acknowledged into a shard
    /// whose name is durable. A shard that is not a real directory is refused.
    ///
    /// One listing of the cache directory says which shards exist already (and, through the
    /// entry type, that they are directories), so an open of an existing cache makes no
    /// `mkdir` or `lstat` per shard.
    /// Returns how many files or links it moved out of the way of a shard.
    @discardableResult
    static func makeShards(_ layout: Layout) throws(DiskCacheError) -> Int {
        let directory = layout.directory
        var movedAside = 0
        let listed = try directory.listDirectory(layout.root).get(orThrow: "list the cache directory", path: layout.root)
        let directories = Set(listed.lazy.filter { $0.type == DT_DIR }.map(\.name))
        var made = false
        for name in Layout.shardNames where !directories.contains(name) {
            let path = layout.root + "/" + name
            switch directory.mkdir(path, 0o700) {
            case .success:
                made = true
            case .failure(.fileExists):
                // The listing's type may be unknown on some filesystems: look.
                if case .success(let info) = directory.lstat(path), info.st_mode & S_IFMT == S_IFDIR { continue }
                // A file or a link where a shard belongs: never followed, moved out of the way.
                try moveAside(path, layout).get(orThrow: "move aside what is in place of a shard directory", path: path)
                movedAside += 1
                try directory.mkdir(path, 0o700).get(orThrow: "create a shard directory", path: path)
                made = true
            case .failure(let error):
                throw DiskCacheError.io(error, "create a shard directory", path: path)
            }
        }
        if made {
            try directory.fsyncDirectory(layout.root).get(orThrow: "sync the cache directory", path: layout.root)
        }
        return movedAside
    }

    /// Gets something out of the way of one of the cache's own names: a symbolic link is
    /// removed (never its target); a file or directory of the wrong kind is moved into `tmp/`,
    /// which the next open empties. Nothing outside the cache is touched.
    static func moveAside(_ path: String, _ layout: Layout) -> Result<Void, SyscallError> {
        let directory = layout.directory
        switch directory.lstat(path) {
        case .failure(.noSuchFileOrDirectory): return .success(())
        case .failure(let error): return .failure(error)
        case .success(let info) where info.st_mode & S_IFMT == S_IFLNK: return directory.unlink(path)
        case .success: break
        }
        let name = path.split(separator: "/").last.map(String.init) ?? "item"
        if case .failure(.noSuchFileOrDirectory) = directory.lstat(layout.temp) { _ = directory.mkdir(layout.temp, 0o700) }
        var attempt = 0
        while true {
            let target = layout.tempFile("aside-\(name)-\(getpid())-\(attempt)")
            switch directory.rename(path, target) {
            case .failure(let error) where (error == .fileExists || error.rawValue == ENOTEMPTY || error == .isDirectory
                                            || error == .notDirectory) && attempt < 100:
                attempt += 1
            case let result:
                return result
            }
        }
    }

    /// The kind of network filesystem `path` is on, or nil for a local one (`statfs(2)`'s
    /// `f_type`). Advisory locks and a page mapped by several processes are not coherent
    /// between machines on these, so a cache there is never shared.
    static func networkFilesystem(_ path: String, probe: (@Sendable (String) -> Int?)?) -> String? {
        let type: Int
        if let probe {
            guard let probed = probe(path) else { return nil }
            type = probed
        } else {
            let found = cdiskcache_filesystem_type(path)
            guard found >= 0 else { return nil }
            type = Int(found)
        }
        let kinds: [Int: String] = [
            0x6969: "NFS", 0x517B: "SMB", 0xFF53_4D42: "CIFS", 0xFE53_4D42: "SMB2", 0x0102_1997: "9P",
            0x00C3_6400: "Ceph", 0x5346_414F: "AFS", 0x6573_5546: "FUSE", 0x7375_7245: "Coda", 0x564C: "NCP",
        ]
        return kinds[type & 0xFFFF_FFFF]
    }

    /// Empties `tmp/` (interrupted writes, trash of `removeAll`); returns how many top-level items it removed.
    func cleanTemporaryFiles() throws(DiskCacheError) -> Int {
        let temp = layout.temp
        switch layout.directory.lstat(temp) {
        case .success(let info) where info.st_mode & S_IFMT == S_IFDIR:
            break
        case .success:
            // A file or link where tmp/ belongs: not ours to follow; replace it.
            _ = layout.directory.unlink(temp)
            try layout.directory.mkdir(temp, 0o700).get(orThrow: "create tmp/", path: temp)
            return 1
        case .failure:
            try layout.directory.mkdir(temp, 0o700).get(orThrow: "create tmp/", path: temp)
            return 0
        }
        let names = try layout.directory.listDirectory(temp).get(orThrow: "list tmp/", path: temp)
        for (name, _) in names { layout.directory.removeTree(temp + "/" + name) }
        return names.count
    }
}

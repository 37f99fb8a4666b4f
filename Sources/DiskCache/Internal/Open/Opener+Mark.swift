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

// The cache's mark (VERSION: format, application version and kind), the directory tags, and the
// migration from format 1.

extension Opener {
    /// The cache's format version, read again now that the cache is locked; writes the mark
    /// (durably) for a new cache, adds the magic line to a cache marked before it had one, and
    /// refuses a cache of another kind (``checkKind(found:application:_:path:)``). A mark
    /// without a kind line takes this open's kind (and, when the open asks for none, keeps its
    /// application line), so that from now on another kind is refused.
    func checkVersion() throws(DiskCacheError) -> (format: Int, application: Int?, kind: String?) {
        switch try FormatMarker.readRefusingNewer(root: layout.root) {
        case .marked(let version, let application, let kind):
            try Self.checkKind(found: kind, application: application, configuration, path: layout.root)
            guard kind == nil, let adopted = configuration.kind else { return (version, application, kind) }
            try Self.writeVersion(layout, version: version, application: application, kind: adopted)
            return (version, application, adopted)
        case .legacy(let version):
            try Self.checkKind(found: nil, application: nil, configuration, path: layout.root)
            try Self.writeVersion(layout, version: version, kind: configuration.kind)
            return (version, nil, configuration.kind)
        case .missing where isNew:
            try Self.writeVersion(layout, application: configuration.applicationVersion, kind: configuration.kind)
            return (Layout.formatVersion, configuration.applicationVersion, configuration.kind)
        case .missing, .damaged:
            throw DiskCacheError(code: .notACache, message: "The cache's VERSION file changed while it was being opened", path: layout.versionFile)
        }
    }

    /// Refuses (``DiskCacheError/Code/otherKind``, nothing changed) a cache whose mark names
    /// another kind than `configuration` asks for; or, for a mark without a kind (written
    /// before caches recorded one, or by a tool), whose application version is not the one
    /// asked for: nothing says such entries are this kind's, so they are not emptied. An open
    /// that names no kind (a tool) takes any cache.
    static func checkKind(found: String?, application: Int?, _ configuration: DiskCache.Configuration,
                          path: String) throws(DiskCacheError) {
        guard let wanted = configuration.kind else { return }
        if let found {
            guard found != wanted else { return }
            throw DiskCacheError(code: .otherKind,
                                 message: "The directory holds a cache of kind \"\(found)\", and this open asks for kind \"\(wanted)\"; nothing in it was changed. Give each its own directory",
                                 path: path)
        }
        guard let asked = configuration.applicationVersion, asked != application else { return }
        let had = application.map { "application version \($0)" } ?? "no application version"
        throw DiskCacheError(code: .otherKind,
                             message: "The directory holds a cache marked before caches recorded their kind, with \(had), and this open asks for kind \"\(wanted)\" with application version \(asked); it may hold another application's data, so nothing in it was changed. Give this cache its own directory, or remove that one",
                             path: path)
    }

    /// Writes `VERSION` (the mark, see ``FormatMarker``): a temporary file, fsynced, renamed
    /// into place, and the directory fsynced.
    static func writeVersion(_ layout: Layout, version: Int = Layout.formatVersion, application: Int? = nil,
                             kind: String? = nil) throws(DiskCacheError) {
        let path = layout.versionFile
        // Named for this process: two processes making the same new cache do not collide.
        let temp = layout.root + "/" + FormatMarker.temporaryPrefix + "\(getpid())"
        layout.directory.removeTree(temp)
        try FormatMarker.contents(version: version, application: application, kind: kind).withUnsafeBytes { FileIO.writeNewFile(temp, $0, sync: true, in: layout.directory) }
            .get(orThrow: "write the VERSION file", path: temp)
        try layout.directory.rename(temp, path).get(orThrow: "write the VERSION file", path: path)
        try layout.directory.fsyncDirectory(layout.root).get(orThrow: "sync the cache directory", path: layout.root)
    }

    /// Writes `CACHEDIR.TAG` (the Cache Directory Tagging Specification), after the mark, so
    /// that backup and archiving tools that honour it (tar --exclude-caches, restic, borg,
    /// rsync filters) skip the cache. Not synced: a power cut that takes it takes nothing else.
    static func writeCacheDirectoryTag(_ layout: Layout) throws(DiskCacheError) {
        switch Layout.cacheDirectoryTag.withUnsafeBytes({ FileIO.writeNewFile(layout.cacheDirectoryTag, $0, sync: false, in: layout.directory) }) {
        case .success, .failure(.fileExists): return
        case .failure(let error): throw DiskCacheError.io(error, "write CACHEDIR.TAG", path: layout.cacheDirectoryTag)
        }
    }

    #if canImport(Darwin)
    /// Apple platforms: marks the cache's directory excluded from backups (iCloud and Time
    /// Machine honour `isExcludedFromBackup`, not `CACHEDIR.TAG`), at every open so that a cache
    /// made before is marked too; a failure is logged, not thrown (the cache works without it).
    /// Then gives the directory and the directories in it (shards, `tmp/`) the chosen data
    /// protection class (``DiskCache/Configuration/fileProtection``), which the files made in
    /// them afterwards inherit; that failure is thrown, since the caller asked for it.
    static func applyApplePlatformAttributes(_ layout: Layout, configuration: DiskCache.Configuration) throws(DiskCacheError) {
        var url = URL(fileURLWithPath: layout.root, isDirectory: true)
        do {
            var values = URLResourceValues()
            values.isExcludedFromBackup = true
            try url.setResourceValues(values)
        } catch {
            configuration.logger.warning("Cannot exclude the cache from backups",
                                         metadata: ["path": "\(layout.root)", "error": "\(error)"])
        }
        guard let protection = configuration.fileProtection else { return }
        do {
            let manager = FileManager.default
            try manager.setAttributes([.protectionKey: protection], ofItemAtPath: layout.root)
            for name in try manager.contentsOfDirectory(atPath: layout.root) {
                let path = layout.root + "/" + name
                var isDirectory: ObjCBool = false
                guard manager.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else { continue }
                try manager.setAttributes([.protectionKey: protection], ofItemAtPath: path)
            }
        } catch {
            throw DiskCacheError(code: .ioFailure, message: "cannot set the cache's file protection: "
                                 + "\(error.localizedDescription)", path: layout.root)
        }
    }
    #endif

    /// Moves a format-1 cache's entry files from `ab/cd/` into `ab/`, removes the inner
    /// directories (and the files no record vouched for), makes it all durable, and only then
    /// writes `VERSION` 2. Interrupted, it runs again at the next open: a file already moved is
    /// simply not found at its old name.
    func migrateFromFormat1(_ index: Index, application: Int?, kind: String?) throws(DiskCacheError) {
        let old = layout.withVersion(1)
        var moved = 0
        for (hash, entry) in index.entries {
            let files = [(old.metaFile(hash, slot: entry.slot), layout.metaFile(hash, slot: entry.slot))]
                + (entry.isInline ? [] : [(old.bodyFile(hash, slot: entry.slot), layout.bodyFile(hash, slot: entry.slot))])
            for (from, to) in files {
                switch layout.directory.rename(from, to) {
                case .success: moved += 1
                case .failure(.noSuchFileOrDirectory): break
                case .failure(let error): throw DiskCacheError.io(error, "move an entry file to the format-2 layout", path: from)
                }
            }
        }
        removeFormat1Shards(keepingOuter: true)
        let journal = try layout.directory.open(layout.journal, FileIO.readFlags).get(orThrow: "open the journal", path: layout.journal)
        try Syscall.syncFileSystem(journal.fd).get(orThrow: "sync the cache's filesystem", path: layout.root)
        try Self.writeVersion(layout, application: application, kind: kind)
        logger.notice("Migrated the cache to format \(Layout.formatVersion)", metadata: ["files": "\(moved)", "entries": "\(index.count)"])
    }

    /// Removes format 1's inner shard directories `ab/cd/` with whatever they still hold, and
    /// the outer ones too unless `keepingOuter`.
    func removeFormat1Shards(keepingOuter: Bool = false) {
        guard case .success(let outers) = layout.directory.listDirectory(layout.root) else { return }
        for (outer, _) in outers where Layout.isShardName(outer) {
            let outerPath = layout.root + "/" + outer
            guard !keepingOuter else {
                guard case .success(let inners) = layout.directory.listDirectory(outerPath) else { continue }
                for (inner, type) in inners where type == DT_DIR && Layout.isShardName(inner) {
                    layout.directory.removeTree(outerPath + "/" + inner)
                }
                continue
            }
            layout.directory.removeTree(outerPath)
        }
    }
}

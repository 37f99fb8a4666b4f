import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Walks the shard directories, never following a symbolic link.
struct ShardScanner {
    enum FileKind { case meta, body }
    let layout: Layout

    /// Calls `visit` with (hash, slot, kind, path) for each entry file; `visit` returns false to stop.
    func forEachEntryFile(_ visit: (KeyHash, UInt8, FileKind, String) -> Bool) {
        guard case .success(let outers) = layout.directory.listDirectory(layout.root) else { return }
        for (outer, _) in outers.sorted(by: { $0.name < $1.name }) where Layout.isShardName(outer) {
            let outerPath = layout.root + "/" + outer
            guard isRealDirectory(outerPath) else { continue }
            if layout.version >= Layout.flatShardsVersion {
                if !visitFiles(in: outerPath, prefix: outer, visit) { return }
                continue
            }
            guard case .success(let inners) = layout.directory.listDirectory(outerPath) else { continue }
            for (inner, _) in inners where Layout.isShardName(inner) {
                let innerPath = outerPath + "/" + inner
                guard isRealDirectory(innerPath) else { continue }
                if !visitFiles(in: innerPath, prefix: outer + inner, visit) { return }
            }
        }
    }

    private static let meta = "\(Layout.metaSuffix)", body = "\(Layout.bodySuffix)", slot1 = Layout.slot1Mark

    /// The entry files of one shard directory whose names start with `prefix`; false if `visit` said stop.
    private func visitFiles(in directory: String, prefix: String, _ visit: (KeyHash, UInt8, FileKind, String) -> Bool) -> Bool {
        guard case .success(let files) = layout.directory.listDirectory(directory) else { return true }
        // Links are visited too (as what they are named): never followed, and never vouched for.
        for (name, _) in files {
            let kind: FileKind
            var stem: Substring
            if name.hasSuffix(Self.meta) {
                kind = .meta
                stem = name.dropLast(Self.meta.count)
            } else if name.hasSuffix(Self.body) {
                kind = .body
                stem = name.dropLast(Self.body.count)
            } else {
                continue
            }
            var slot: UInt8 = 0
            if stem.hasSuffix(Self.slot1) {
                slot = 1
                stem = stem.dropLast(Self.slot1.count)
            }
            guard let hash = KeyHash(hexName: stem), stem.hasPrefix(prefix) else { continue }
            if !visit(hash, slot, kind, directory + "/" + name) { return false }
        }
        return true
    }

    private func isRealDirectory(_ path: String) -> Bool {
        guard case .success(let info) = layout.directory.lstat(path) else { return false }
        return info.st_mode & S_IFMT == S_IFDIR
    }
}

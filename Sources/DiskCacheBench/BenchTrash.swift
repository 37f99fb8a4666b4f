import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What the bench is done with (the probe's scratch directories, a size's caches) is renamed
/// into `<root>/trash` and deleted only when the run ends, with the rest of its directory.
/// Deleting at once would make every subject measured afterwards pay for it: on ext4 without
/// a journal the inode allocator skips inodes freed in the last 60 s (360 s while their
/// inode-table block is dirty), one buffer lookup each, before it takes a free one, so a fill
/// right after 48,000 deletions runs several times slower than one after none.
enum BenchTrash {
    static func setAside(_ path: String, root: String) {
        let trash = root + "/trash"
        if mkdir(trash, 0o700) != 0 && errno != EEXIST {
            try? FileManager.default.removeItem(atPath: path)
            return
        }
        if rename(path, trash + "/" + UUID().uuidString) != 0 && errno != ENOENT {
            try? FileManager.default.removeItem(atPath: path)
        }
    }
}

import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// When a run last deleted its files, per file system, so that the next run can say that its
/// fills may pay for it (see ``BenchTrash``): `<seconds since 1970> <st_dev>` in one file of the
/// temporary directory, written after the run's directory is deleted.
package enum BenchDeletions {
    /// How long after deletions file creation may still be slowed: 60 s, plus 300 s while the
    /// freed inodes' inode-table block is dirty (which the next creations in it make it).
    static let window: Int = 360

    static var stampPath: String {
        (NSTemporaryDirectory() as NSString).appendingPathComponent("diskcache-bench-deleted")
    }

    package static func device(of path: String) -> UInt64? {
        var info = stat()
        return stat(path, &info) == 0 ? UInt64(info.st_dev) : nil
    }

    /// Notes that a run's files on the file system `device` (an `st_dev`) were just deleted.
    package static func record(device: UInt64) {
        let text = "\(Int(Date().timeIntervalSince1970)) \(device)\n"
        try? text.write(toFile: stampPath, atomically: true, encoding: .utf8)
    }

    /// Seconds since an earlier run deleted its files on `path`'s file system, when that is
    /// within ``window``.
    package static func recent(onFileSystemOf path: String) -> Int? {
        guard let text = try? String(contentsOfFile: stampPath, encoding: .utf8),
              let device = device(of: path) else { return nil }
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count == 2, let when = Int(fields[0]), let stampDevice = UInt64(fields[1]),
              stampDevice == device else { return nil }
        let age = Int(Date().timeIntervalSince1970) - when
        return age >= 0 && age < window ? age : nil
    }

    package static func note(secondsAgo age: Int) -> String {
        "an earlier bench run deleted its files on this file system \(age) s ago: on ext4 without a journal, "
            + "new files skip inodes freed in the last minutes (up to \(window / 60)), which can make the puts of the "
            + "store and of the floor (not SQLite's) several times slower; compare runs started at least "
            + "\(window / 60) minutes after the previous one ended, or use --keep"
    }
}

public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The page cache, for the tests of reads that must not wait for the disk.
public enum PageCache {
    /// Writes `url`'s dirty pages back and asks the kernel to drop all its pages from the page
    /// cache; true when none of them is left there. Asks again every 10 ms, for up to 10 s,
    /// while some stay: pages a `sendfile` handed to a socket stay pinned until the socket
    /// buffer that holds them is freed, which on a loaded machine can come late (half a
    /// second was not always enough beside the suite's soak and power-loss tests).
    @discardableResult
    public static func drop(_ url: URL) -> Bool {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0, fdatasync(fd) == 0 else {
            print("PageCache.drop: cannot open or sync \(url.path): errno \(errno)")
            if fd >= 0 { close(fd) }
            return false
        }
        defer { close(fd) }
        let deadline = ContinuousClock.now + .seconds(10)
        var resident = 0
        repeat {
            guard posix_fadvise(fd, 0, 0, Int32(POSIX_FADV_DONTNEED)) == 0 else {
                print("PageCache.drop: posix_fadvise failed on \(url.path): errno \(errno)")
                return false
            }
            resident = residentPages(fd)
            if resident == 0 { return true }
            usleep(10_000)
        } while ContinuousClock.now < deadline
        // Said where a failing test can show it: which file, and how much of it stayed.
        print("PageCache.drop: \(resident) pages of \(url.path) stayed in the page cache for 10 s (-1: mincore failed)")
        return false
    }

    /// Drops every entry file (`.meta`, `.body`, or the kinds in `extensions`) under
    /// `directory`; true when there were some and all of them left.
    @discardableResult
    public static func dropEntryFiles(under directory: URL, extensions: Set<String> = ["meta", "body"]) -> Bool {
        drop(entryFiles(under: directory, extensions: extensions))
    }

    /// Drops every file of `files`; true when there were some and all of them left.
    @discardableResult
    public static func drop(_ files: [URL]) -> Bool {
        !files.isEmpty && files.map(drop).allSatisfy { $0 }
    }

    /// The entry files (`.meta`, `.body`, or the kinds in `extensions`) under `directory`.
    public static func entryFiles(under directory: URL, extensions: Set<String> = ["meta", "body"]) -> [URL] {
        FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)?
            .compactMap { $0 as? URL }.filter { extensions.contains($0.pathExtension) } ?? []
    }

    /// How many of the pages of the file open as `fd` the page cache holds (`mincore`).
    static func residentPages(_ fd: Int32) -> Int {
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_size > 0 else { return 0 }
        let size = Int(info.st_size), page = Int(sysconf(Int32(_SC_PAGESIZE)))
        guard let mapping = mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0), mapping != MAP_FAILED else { return -1 }
        defer { munmap(mapping, size) }
        var resident = [UInt8](repeating: 0, count: (size + page - 1) / page)
        guard mincore(mapping, size, &resident) == 0 else { return -1 }
        return resident.filter { $0 & 1 != 0 }.count
    }

    /// Whether the system's temporary directory is on a file system whose pages can be dropped
    /// (not tmpfs, where the page cache is the only copy of a file).
    public static let canDrop: Bool = {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pagecache-probe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        guard (try? Data(repeating: 7, count: 1 << 16).write(to: file)) != nil else { return false }
        return drop(file)
    }()
}

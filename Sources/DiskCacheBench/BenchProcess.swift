import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

enum BenchProcess {
    /// User + system CPU time of the whole process, in seconds.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        #if canImport(Glibc)
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        #else
        getrusage(RUSAGE_SELF, &usage)
        #endif
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// Bytes currently allocated with malloc, from glibc's `malloc_info` report (memory the
    /// arenas got from the system, less their free chunks, plus mmapped chunks). The Glibc
    /// module does not import `<malloc.h>`, so the function is looked up by name.
    static func mallocedBytes() -> Int? {
        #if canImport(Glibc)
        typealias MallocInfo = @convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32
        guard let symbol = dlsym(nil, "malloc_info") else { return nil }
        let mallocInfo = unsafeBitCast(symbol, to: MallocInfo.self)
        var buffer: UnsafeMutablePointer<CChar>?
        var length = 0
        guard let stream = open_memstream(&buffer, &length) else { return nil }
        _ = mallocInfo(0, stream)
        fclose(stream)
        guard let buffer else { return nil }
        defer { free(buffer) }
        let xml = String(cString: buffer)
        // The totals follow the last </heap>.
        guard let tail = xml.range(of: "</heap>", options: .backwards).map({ xml[$0.upperBound...] }) else { return nil }
        func value(_ prefix: String) -> Int {
            guard let range = tail.range(of: prefix) else { return 0 }
            let rest = tail[range.upperBound...]
            guard let size = rest.range(of: "size=\"") else { return 0 }
            return Int(rest[size.upperBound...].prefix { $0.isNumber }) ?? 0
        }
        return value("<system type=\"current\"") - value("<total type=\"fast\"") - value("<total type=\"rest\"")
            + value("<total type=\"mmap\"")
        #else
        return nil
        #endif
    }

    /// Resident set size from /proc/self/statm, in bytes.
    static func residentBytes() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Writes `bytes` (at most 1 GiB) into a scratch file in `directory` and unlinks it before
    /// any of it is written back, so that the memory it took is free again and was used a
    /// moment ago. A virtual machine that hands freed memory back to its host (virtio-balloon
    /// free page reporting, after about two seconds) pays a host fault for every page it has
    /// not touched lately: measured on such a machine, writing 4 MiB files into those pages
    /// took 5 ms each, into just-freed ones 1.1 ms. A fill that happened to run right after
    /// another subject freed memory would be faster for that alone, so each fill starts after
    /// this, and all start alike.
    static func recyclePages(bytes: Int, in directory: String) {
        let path = directory + "/recycle-\(getpid())"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        defer { close(fd); unlink(path) }
        let chunk = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 4096)
        defer { buffer.deallocate() }
        memset(buffer, 0x5A, chunk)
        var left = min(bytes, 1 << 30)
        while left > 0 {
            let n = write(fd, buffer, min(chunk, left))
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            left -= n
        }
    }

    /// Read requests and bytes the block device holding `path` has completed since boot
    /// (`/sys/dev/block/<major>:<minor>/stat`, Linux): what a cold read costs the device. Nil
    /// where there is no such file (tmpfs, another system). Counts every process's reads.
    static func deviceReads(of path: String) -> (requests: Int64, bytes: Int64)? {
        guard let device = BenchDeletions.device(of: path) else { return nil }
        // glibc's major() and minor().
        let major = (device >> 8) & 0xfff | (device >> 32) & 0xffff_f000, minor = device & 0xff | (device >> 12) & 0xffff_ff00
        guard let text = try? String(contentsOfFile: "/sys/dev/block/\(major):\(minor)/stat", encoding: .utf8) else { return nil }
        // Reads completed, reads merged, sectors (512 bytes) read, ...
        let fields = text.split(separator: " ").compactMap { Int64($0) }
        guard fields.count >= 3 else { return nil }
        return (fields[0], fields[2] * 512)
    }

    /// Tries to empty the page cache. Returns how it was done, or nil when this process may not.
    static func dropPageCache(fallbackTrees: [String]) -> String {
        sync()
        if getuid() == 0, let fd = Optional(open("/proc/sys/vm/drop_caches", O_WRONLY)), fd >= 0 {
            let ok = write(fd, "3\n", 2) == 2
            close(fd)
            if ok { return "page cache dropped (echo 3 > /proc/sys/vm/drop_caches)" }
        }
        for tree in fallbackTrees { adviseDontNeed(tree) }
        let who = getuid() == 0 ? "root, but /proc/sys/vm/drop_caches is not writable here" : "not root"
        return "\(who): evicted the benchmark's own files with posix_fadvise(DONTNEED) instead"
    }

    private static func adviseDontNeed(_ path: String) {
        guard let dir = opendir(path) else {
            let fd = open(path, O_RDONLY)
            if fd >= 0 {
                _ = posix_fadvise(fd, 0, 0, Int32(POSIX_FADV_DONTNEED))
                close(fd)
            }
            return
        }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name == "." || name == ".." { continue }
            adviseDontNeed(path + "/" + name)
        }
    }
}

import Foundation
import ToolSupport
import DiskCacheLocking
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Setting files aside

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

/// When a run last deleted its files, per file system, so that the next run can say that its
/// fills may pay for it (see ``BenchTrash``): `<seconds since 1970> <st_dev>` in one file of the
/// temporary directory, written after the run's directory is deleted.
enum BenchDeletions {
    /// How long after deletions file creation may still be slowed: 60 s, plus 300 s while the
    /// freed inodes' inode-table block is dirty (which the next creations in it make it).
    static let window: Int = 360

    static var stampPath: String {
        (NSTemporaryDirectory() as NSString).appendingPathComponent("diskcache-bench-deleted")
    }

    static func device(of path: String) -> UInt64? {
        var info = stat()
        return stat(path, &info) == 0 ? UInt64(info.st_dev) : nil
    }

    /// Notes that a run's files on the file system `device` (an `st_dev`) were just deleted.
    static func record(device: UInt64) {
        let text = "\(Int(Date().timeIntervalSince1970)) \(device)\n"
        try? text.write(toFile: stampPath, atomically: true, encoding: .utf8)
    }

    /// Seconds since an earlier run deleted its files on `path`'s file system, when that is
    /// within ``window``.
    static func recent(onFileSystemOf path: String) -> Int? {
        guard let text = try? String(contentsOfFile: stampPath, encoding: .utf8),
              let device = device(of: path) else { return nil }
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count == 2, let when = Int(fields[0]), let stampDevice = UInt64(fields[1]),
              stampDevice == device else { return nil }
        let age = Int(Date().timeIntervalSince1970) - when
        return age >= 0 && age < window ? age : nil
    }

    static func note(secondsAgo age: Int) -> String {
        "an earlier bench run deleted its files on this file system \(age) s ago: on ext4 without a journal, "
            + "new files skip inodes freed in the last minutes (up to \(window / 60)), which can make the puts of the "
            + "store and of the floor (not SQLite's) several times slower; compare runs started at least "
            + "\(window / 60) minutes after the previous one ended, or use --keep"
    }
}

// MARK: - Clock and random draws

/// Monotonic nanoseconds; cheap enough (vDSO) to call around every operation.
@inline(__always)
func benchNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

/// Zipf-distributed entry indices: rank r is drawn with probability ∝ 1/r^s, and ranks are
/// shuffled onto indices with the seed, so the popular entries are spread over the key space.
struct BenchZipf: Sendable {
    let cdf: [Double]
    let indexOfRank: [Int]

    init(count: Int, exponent: Double, seed: UInt64) {
        var cdf = [Double](repeating: 0, count: max(1, count))
        var sum = 0.0
        for rank in 0..<cdf.count {
            sum += 1 / Foundation.pow(Double(rank + 1), exponent)
            cdf[rank] = sum
        }
        self.cdf = cdf.map { $0 / sum }
        var random = SplitMix64(seed: seed ^ 0x5A5A)
        self.indexOfRank = Array(0..<cdf.count).shuffled(using: &random)
    }

    func next(_ random: inout SplitMix64) -> Int {
        let u = random.unit()
        var low = 0
        var high = cdf.count - 1
        while low < high {
            let mid = (low + high) / 2
            if cdf[mid] < u { low = mid + 1 } else { high = mid }
        }
        return indexOfRank[low]
    }
}

// MARK: - Sizes

enum BenchSize {
    /// `512`, `1K`, `16K`, `4M`, `1G` (binary units, optional `B`/`iB`).
    static func parse(_ text: String) -> Int? {
        var rest = text.trimmingCharacters(in: .whitespaces).uppercased()[...]
        if rest.hasSuffix("IB") { rest = rest.dropLast(2) } else if rest.hasSuffix("B") { rest = rest.dropLast() }
        var shift = 0
        if let last = rest.last, let position = "KMG".firstIndex(of: last) {
            shift = ("KMG".distance(from: "KMG".startIndex, to: position) + 1) * 10
            rest = rest.dropLast()
        }
        guard let value = Int(rest), value >= 0 else { return nil }
        return value << shift
    }

    /// 1024 → "1K", 4194304 → "4M", 1500 → "1500".
    static func label(_ bytes: Int) -> String {
        if bytes >= 1 << 20, bytes % (1 << 20) == 0 { return "\(bytes >> 20)M" }
        if bytes >= 1 << 10, bytes % (1 << 10) == 0 { return "\(bytes >> 10)K" }
        return "\(bytes)"
    }
}

// MARK: - Measurements

/// What one timed phase produced: per-operation latencies (or per-pass times) and the wall time.
struct BenchMeasurement {
    var latencies: [UInt64] = []   // nanoseconds, one per operation
    var operations = 0
    var bytes: Int64 = 0
    var seconds = 0.0

    var opsPerSecond: Double { seconds > 0 ? Double(operations) / seconds : 0 }
    var megabytesPerSecond: Double { seconds > 0 ? Double(bytes) / seconds / 1_000_000 : 0 }

    /// p50, p99 and max in microseconds.
    func percentiles() -> (p50: Double, p99: Double, max: Double)? {
        guard !latencies.isEmpty else { return nil }
        let sorted = latencies.sorted()
        func at(_ q: Double) -> Double {
            let index = min(sorted.count - 1, Int((Double(sorted.count) * q).rounded(.up)) - 1)
            return Double(sorted[max(0, index)]) / 1000
        }
        return (at(0.50), at(0.99), Double(sorted[sorted.count - 1]) / 1000)
    }

    mutating func merge(_ other: BenchMeasurement) {
        latencies += other.latencies
        operations += other.operations
        bytes += other.bytes
    }
}

/// Runs `body` on `threads` threads (dispatch worker threads, never Swift's cooperative pool,
/// since every operation blocks on I/O), until `count` operations are done in total or
/// `deadline` seconds have passed, or `stop()` says so, whichever comes first.
/// `body(thread, n, &random)` performs operation `n` of its thread and returns the bytes it moved.
func benchRun(threads: Int, count: Int?, seconds: Double?, seed: UInt64, progress: BenchProgress,
              stop: (@Sendable () -> Bool)? = nil,
              _ body: @escaping @Sendable (_ thread: Int, _ n: Int, _ random: inout SplitMix64) -> Int) -> BenchMeasurement {
    let threads = max(1, threads)
    let results = PthreadMutex<[BenchMeasurement]>([])
    let start = benchNanoseconds()
    let deadline = seconds.map { start + UInt64($0 * 1e9) }
    DispatchQueue.concurrentPerform(iterations: threads) { thread in
        var random = SplitMix64(seed: seed &+ UInt64(thread) &* 7919)
        var local = BenchMeasurement()
        let share = count.map { ($0 - thread + threads - 1) / threads }
        if let share { local.latencies.reserveCapacity(share) } else { local.latencies.reserveCapacity(1 << 16) }
        var n = 0
        while true {
            if let share, n >= share { break }
            let before = benchNanoseconds()
            if let deadline, before >= deadline { break }
            if let stop, stop() { break }
            let moved = body(thread, n, &random)
            let after = benchNanoseconds()
            local.latencies.append(after - before)
            local.bytes += Int64(moved)
            n += 1
            if thread == 0, n & 31 == 0 {
                if let deadline {
                    progress.phaseFraction(Double(after - start) / Double(deadline - start))
                } else if let share {
                    progress.phaseFraction(Double(n) / Double(share))
                }
            }
        }
        local.operations = n
        let finished = local
        results.withLock { $0.append(finished) }
    }
    var total = BenchMeasurement()
    total.seconds = Double(benchNanoseconds() - start) / 1e9
    for part in results.withLock({ $0 }) { total.merge(part) }
    return total
}

// MARK: - Process figures

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

// MARK: - Machine

struct BenchMachine: Codable {
    var processors: Int
    var cpuModel: String
    var kernel: String
    var fileSystem: String
    var memoryBytes: Int64

    static func describe(directory: String) -> BenchMachine {
        var cpu = "unknown"
        if let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
           let line = text.split(separator: "\n").first(where: { $0.hasPrefix("model name") }),
           let colon = line.firstIndex(of: ":") {
            cpu = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var name = utsname()
        uname(&name)
        func field<T>(_ value: T) -> String {
            withUnsafeBytes(of: value) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
        }
        let kernel = "\(field(name.sysname)) \(field(name.release)) \(field(name.machine))"
        return BenchMachine(processors: Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), cpuModel: cpu, kernel: kernel,
                            fileSystem: fileSystemType(directory),
                            memoryBytes: Int64(sysconf(Int32(_SC_PHYS_PAGES))) * Int64(sysconf(Int32(_SC_PAGESIZE))))
    }

    /// The type of the filesystem holding `path`, from the longest matching mount point.
    static func fileSystemType(_ path: String) -> String {
        guard let text = try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8) else { return "unknown" }
        let real = (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? path
        var best: (mount: String, type: String, device: String) = ("", "unknown", "")
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 3 else { continue }
            let mount = String(fields[1])
            let isPrefix = real == mount || real.hasPrefix(mount == "/" ? "/" : mount + "/")
            if isPrefix, mount.count >= best.mount.count { best = (mount, String(fields[2]), String(fields[0])) }
        }
        return "\(best.type) (\(best.device) on \(best.mount))"
    }
}

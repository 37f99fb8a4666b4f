import Foundation
import Testing
import TestSupport
@testable import DiskCache

/// `SHARED` removed, renamed over, zeroed, overwritten, cut short or replaced by something that
/// is not a file while real processes store and read through it, and a lock holder that is
/// stopped: nothing acknowledged is lost, no process crashes, no call waits past its bound.
@Suite(.serialized)
struct HostileSharedPageTests {
    /// What is done to `SHARED` while two processes use the cache.
    enum Damage: String, CaseIterable, Sendable {
        case delete, renameACopyOver, zero, garbageAfterTheHeader, truncateToZero, truncateTo4KiB
        case directory, symlink, fifo

        /// The code the processes that had the cache open are expected to report.
        var code: DiskCacheError.Code {
            switch self {
            case .zero, .garbageAfterTheHeader, .truncateToZero, .truncateTo4KiB: .sharedPageDamaged
            case .delete, .renameACopyOver, .directory, .symlink, .fifo: .sharedPageReplaced
            }
        }
    }

    static let lockTimeoutMilliseconds = 1_500

    func apply(_ damage: Damage, to path: String, aside: String) throws {
        switch damage {
        case .delete:
            #expect(unlink(path) == 0)
        case .renameACopyOver:
            // What a backup tool restoring a copy does: the same bytes, another file.
            let copy = path + ".restored"
            try Data(contentsOf: URL(fileURLWithPath: path)).write(to: URL(fileURLWithPath: copy))
            #expect(rename(copy, path) == 0)
        case .zero, .garbageAfterTheHeader:
            let fd = open(path, O_WRONLY | O_CLOEXEC)
            try #require(fd >= 0)
            defer { close(fd) }
            let (start, byte): (Int, UInt8) = damage == .zero ? (0, 0) : (4096, 0xFF)
            let bytes = [UInt8](repeating: byte, count: SharedRegion.size - start)
            #expect(pwrite(fd, bytes, bytes.count, off_t(start)) == bytes.count)
        case .truncateToZero:
            #expect(truncate(path, 0) == 0)
        case .truncateTo4KiB:
            #expect(truncate(path, 4096) == 0)
        case .directory, .symlink, .fifo:
            #expect(rename(path, aside) == 0)
            switch damage {
            case .directory: #expect(mkdir(path, 0o700) == 0)
            case .symlink: #expect(symlink(aside, path) == 0)  // to the very file it was
            default: #expect(mkfifo(path, 0o600) == 0)
            }
        }
    }

    @Test(arguments: Damage.allCases)
    func whatIsDoneToSharedLosesNoAcknowledgedWriteAndCrashesNothing(_ damage: Damage) async throws {
        // Blocking waits, on a thread of their own (see `onOwnThread`).
        try await onOwnThread {
            let dir = TemporaryDirectory()
            let path = dir.cache.path
            try DiskCache(directory: dir.cache, configuration: .testing()).close()
            let workers = try (1...2).map { try Worker(["hostile", path, "\($0)", "2", "\(Self.lockTimeoutMilliseconds)"]) }
            for worker in workers { try #require(worker.waitFor(timeout: 60) { $0.hasPrefix("ACK") } != nil) }
            usleep(100_000)
            try apply(damage, to: path + "/" + SharedRegion.fileName, aside: dir.url.appendingPathComponent("aside").path)
            var acknowledged: [Int] = []
            var codes: Set<String> = []
            for worker in workers {
                #expect(worker.waitFor(timeout: 60) { $0 == "DONE" } != nil, "a worker did not finish: \(worker.lines.suffix(3))")
                worker.process.waitUntilExit()
                #expect(worker.process.terminationReason == .exit && worker.process.terminationStatus == 0,
                        "a worker ended with \(worker.process.terminationReason == .exit ? "status" : "signal") \(worker.process.terminationStatus)")
                let lines = worker.lines
                acknowledged += lines.compactMap { $0.hasPrefix("ACK ") ? Int($0.dropFirst(4)) : nil }
                // What stores were refused with (an open racing the other worker's may fail otherwise,
                // and is tried again).
                codes.formUnion(lines.filter { $0.hasPrefix("ERR put ") }.map { String($0.split(separator: " ")[2]) })
                #expect(!lines.contains { $0.hasPrefix("BAD") || $0.hasPrefix("LOST") }, "\(lines.filter { $0.hasPrefix("BAD") || $0.hasPrefix("LOST") }.prefix(3))")
                // No call waited without bound: past the lock timeout (opens wait up to it once) only
                // by what a busy machine adds, allowed a minute here, since this is no speed test.
                let longest = lines.last { $0.hasPrefix("LONGEST ") }.flatMap { Int($0.dropFirst(8)) }
                #expect((longest ?? .max) < 3 * Self.lockTimeoutMilliseconds + 60_000, "longest call \(longest ?? -1) ms")
            }
            #expect(codes.contains(damage.code.description), "the processes reported \(codes)")
            #expect(Set(codes).isSubset(of: ["sharedPageReplaced", "sharedPageDamaged", "lockTimeout"]), "\(codes)")
            // A fresh instance (the workers have closed) reads every acknowledged value whole.
            let cache = try DiskCache(directory: dir.cache, configuration: .testing())
            defer { try? cache.close() }
            var missing: [Int] = []
            for k in acknowledged where cache.data(for: "key-\(k)").map({ checkPayload($0, k: k) == 1 }) != true { missing.append(k) }
            #expect(missing.isEmpty, "\(missing.count) of \(acknowledged.count) acknowledged values did not read back: \(missing.prefix(5))")
            #expect(acknowledged.count > 0)
            var info = stat()
            #expect(lstat(path + "/" + SharedRegion.fileName, &info) == 0 && info.st_mode & S_IFMT == S_IFREG)
        }
    }

    /// A process stopped (SIGSTOP) while it holds a key's lock and the append lock: a writer of
    /// another instance gets `lockTimeout` after the configured wait, and carries on once the
    /// stopped process is killed.
    @Test func aStoppedLockHolderGivesOthersTheTimeoutErrorAndTheyCarryOnOnceItIsKilled() throws {
        let dir = TemporaryDirectory()
        var configuration = DiskCache.Configuration.testing()
        configuration.sweepInterval = nil
        configuration.lockTimeout = .milliseconds(300)
        let cache = try DiskCache(directory: dir.cache, configuration: configuration)
        defer { try? cache.close() }
        try cache.store(Data("before".utf8), for: "k")
        let region = try #require(cache.sharedRegion)
        let stripe = SharedRegion.stripe(of: cache.configuration.keyHasher.hash("k"))
        let child = fork()
        if child == 0 {
            // The child of a multithreaded process: nothing that may allocate or take a lock.
            try? region.withStripes(from: stripe) { () throws(DiskCacheError) in
                try region.withLock(.append) { _ = kill(getpid(), SIGSTOP) }
            }
            _exit(1)
        }
        var status: Int32 = 0
        #expect(waitpid(child, &status, WUNTRACED) == child)
        #expect(status & 0xff == 0x7f)  // stopped
        for key in ["k", "another key"] {
            #expect { try cache.store(Data("during".utf8), for: key) } throws: { ($0 as? DiskCacheError)?.code == .lockTimeout }
        }
        #expect(cache.data(for: "k") == Data("before".utf8))
        kill(child, SIGKILL)
        #expect(waitpid(child, &status, 0) == child)
        try cache.store(Data("after".utf8), for: "k")
        #expect(cache.data(for: "k") == Data("after".utf8))
        let other = try DiskCache(directory: dir.cache, configuration: configuration)
        #expect(other.data(for: "k") == Data("after".utf8))
        try other.close()
    }

    /// A thread id written over the append lock's lock word (a stray write, a tool), naming a
    /// thread that holds nothing: the mutex's owner word does not agree, so the next writer
    /// reports the page damaged within a tenth of a second instead of waiting out its lock
    /// timeout (two minutes here, which would end in `lockTimeout`); what was stored before
    /// reads back from the next open.
    @Test func aLockWordNamingAThreadThatHoldsNothingIsDamageNotAWait() throws {
        guard SharedRegion.usesMutexes else { return }
        let dir = TemporaryDirectory()
        var configuration = DiskCache.Configuration.testing()
        configuration.sweepInterval = nil
        configuration.lockTimeout = .seconds(120)
        let cache = try DiskCache(directory: dir.cache, configuration: configuration)
        try cache.store(Data("before".utf8), for: "k")
        let fd = open(dir.cache.path + "/" + SharedRegion.fileName, O_WRONLY | O_CLOEXEC)
        try #require(fd >= 0)
        var tid: Int32 = 0x3fff_fff0  // above any pid_max: no thread has it
        #expect(pwrite(fd, &tid, 4, off_t(SharedRegion.appendMutexOffset)) == 4)
        close(fd)
        #expect { try cache.store(Data("during".utf8), for: "k") } throws: { ($0 as? DiskCacheError)?.code == .sharedPageDamaged }
        try? cache.close()
        let reopened = try DiskCache(directory: dir.cache, configuration: configuration)
        #expect(reopened.data(for: "k") == Data("before".utf8))
        try reopened.close()
    }

    /// An inspector's verify of a cache whose open instances lost their `SHARED` reports it,
    /// and says the cache is open (the directory's presence byte), though `SHARED` says nothing.
    @Test func verifyReportsASharedPageRemovedUnderOpenInstances() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        defer { try? cache.close() }
        try cache.store(Data("v".utf8), for: "k")
        let path = dir.cache.appendingPathComponent(SharedRegion.fileName).path
        #expect(unlink(path) == 0)
        let inspector = try DiskCacheInspector(directory: dir.cache, whileOpen: true)
        #expect(inspector.summary.openBy == "shared")
        let report = inspector.verify()
        #expect(report.problems.contains { $0.kind == .damagedSharedPage && $0.path == path }, "\(report.problems)")
        #expect { try cache.store(Data("w".utf8), for: "k") } throws: { ($0 as? DiskCacheError)?.code == .sharedPageReplaced }
        #expect(cache.data(for: "k") == Data("v".utf8))
    }

    /// A shared open that finds a directory, link or FIFO at `SHARED` and no instance open moves
    /// it aside (a link is removed, never its target) and says so in its recovery report.
    @Test(arguments: ["directory", "symlink", "fifo"])
    func aSharedOpenAloneMovesAsideWhatIsNotAFileAtShared(_ kind: String) throws {
        let dir = TemporaryDirectory()
        try DiskCache(directory: dir.cache, configuration: .testing()).close()
        let path = dir.cache.appendingPathComponent(SharedRegion.fileName).path
        let target = dir.url.appendingPathComponent("target").path
        try Data("left alone".utf8).write(to: URL(fileURLWithPath: target))
        unlink(path)
        switch kind {
        case "directory": #expect(mkdir(path, 0o700) == 0)
        case "symlink": #expect(symlink(target, path) == 0)
        default: #expect(mkfifo(path, 0o600) == 0)
        }
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        defer { try? cache.close() }
        #expect(cache.statistics.recovery.sharedPageMovedAside)
        try cache.store(Data("v".utf8), for: "k")
        #expect(cache.data(for: "k") == Data("v".utf8))
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == Data("left alone".utf8))
        var info = stat()
        #expect(lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG)
    }
}

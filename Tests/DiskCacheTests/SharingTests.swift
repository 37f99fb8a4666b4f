import Foundation
import Testing
import TestSupport
import DiskCacheLocking
@testable import DiskCache

/// Several `DiskCache` instances, in this process and in child processes, on one directory.
@Suite(.serialized)
struct SharingTests {
    func shared(durability: DiskCache.Durability = .none) -> DiskCache.Configuration {
        var configuration = DiskCache.Configuration.testing(durability: durability)
        configuration.sweepInterval = nil
        return configuration
    }

    @Test func instancesInOneProcessSeeEachOthersWritesOnTheirNextCall() throws {
        let dir = TemporaryDirectory()
        let a = try DiskCache(directory: dir.cache, configuration: shared())
        let b = try DiskCache(directory: dir.cache, configuration: shared())
        try a.store(bytes("one"), for: "k")
        #expect(b.data(for: "k") == bytes("one"))
        try b.store(randomData(count: 20_000, seed: 1), for: "k")  // a body file, replacing an inline body
        #expect(a.data(for: "k") == randomData(count: 20_000, seed: 1))
        try a.removeValue(for: "k")
        #expect(b.data(for: "k") == nil)
        for i in 0..<50 { try b.store(bytes("v\(i)"), for: "key-\(i)") }
        #expect(a.count == 50)
        try a.removeAll()
        #expect(b.count == 0)
        #expect(b.data(for: "key-1") == nil)
        try b.store(bytes("after"), for: "key-1")
        #expect(a.data(for: "key-1") == bytes("after"))
        try a.close()
        try b.close()
        let reopened = try DiskCache(directory: dir.cache, configuration: shared())
        #expect(reopened.count == 1)
        #expect(reopened.statistics.recovery.wasUncleanShutdown == false)
    }

    @Test func aCompactionIsFollowedWithoutReopening() throws {
        let dir = TemporaryDirectory()
        let a = try DiskCache(directory: dir.cache, configuration: shared())
        let b = try DiskCache(directory: dir.cache, configuration: shared())
        for round in 0..<3 {
            for i in 0..<100 { try a.store(bytes("\(round)-\(i)"), for: "key-\(i)") }
        }
        // b has not looked since the first write; a compacts once (b then reads the old file to
        // its end and goes on in the new one).
        try a.compact()
        try a.store(bytes("after one"), for: "late")
        #expect(b.data(for: "late") == bytes("after one"))
        for i in 0..<100 { #expect(b.data(for: "key-\(i)") == bytes("2-\(i)")) }
        // Two compactions while a does not look: a reads the new journal whole.
        for i in 0..<100 { try b.store(bytes("b-\(i)"), for: "key-\(i)") }
        try b.compact()
        try b.removeValue(for: "key-0")
        try b.compact()
        #expect(a.data(for: "key-0") == nil)
        for i in 1..<100 { #expect(a.data(for: "key-\(i)") == bytes("b-\(i)")) }
        try a.store(bytes("from a"), for: "key-0")
        #expect(b.data(for: "key-0") == bytes("from a"))
        #expect(a.count == 101 && b.count == 101)
        try a.close()
        try b.close()
        let reopened = try DiskCache(directory: dir.cache, configuration: shared())
        #expect(reopened.count == 101)
        #expect(reopened.data(for: "key-0") == bytes("from a"))
        #expect(try reopened.verify().isHealthy)
    }

    #if DEBUG  // the configuration's test hooks exist in debug builds only
    /// A compacting process killed between renaming the new journal into place and telling the
    /// shared page: the next instance to append notices its file was replaced, and nothing it
    /// acknowledges goes to the old file.
    @Test func aCompactionWhoseProcessDiesAfterTheRenameLosesNoLaterWrite() throws {
        let dir = TemporaryDirectory()
        var dying = shared()
        dying.stopsCompactionAfterRename = true
        let a = try DiskCache(directory: dir.cache, configuration: dying)
        let b = try DiskCache(directory: dir.cache, configuration: shared())
        let c = try DiskCache(directory: dir.cache, configuration: shared())
        for round in 0..<3 {
            for i in 0..<50 { try a.store(bytes("\(round)-\(i)"), for: "key-\(i)") }
        }
        #expect(throws: DiskCacheError.self) { try a.compact() }
        // An instance that joins now reads the new file, and is first to append: it must not
        // take the page's word that nothing changed (b still has the old file).
        let joiner = try DiskCache(directory: dir.cache, configuration: shared())
        try joiner.store(bytes("joined"), for: "joiner")
        try b.store(bytes("after"), for: "late")
        try b.removeValue(for: "key-0")
        #expect(c.data(for: "late") == bytes("after"))
        #expect(c.data(for: "key-0") == nil)
        #expect(c.data(for: "key-1") == bytes("2-1"))
        #expect(c.data(for: "joiner") == bytes("joined"))
        #expect(joiner.data(for: "late") == bytes("after"))
        try b.close()
        try c.close()
        try joiner.close()
        let reopened = try DiskCache(directory: dir.cache, configuration: shared())
        #expect(reopened.data(for: "late") == bytes("after"))
        #expect(reopened.data(for: "joiner") == bytes("joined"))
        #expect(reopened.data(for: "key-0") == nil)
        #expect(reopened.count == 51)
        withExtendedLifetime(a) {}
    }

    /// An instance that cannot open the journal another instance's compaction wrote (out of file
    /// descriptors, say) is behind: until it catches up it refuses writes, removals and verify,
    /// so it never writes into the slot of an entry it does not know or deletes its files.
    @Test func anInstanceThatCannotFollowACompactionChangesNothingUntilItCatchesUp() throws {
        let dir = TemporaryDirectory()
        let failing = PthreadMutex(true)
        var behind = shared()
        behind.failsJournalSwitch = { failing.withLock { $0 } }
        let a = try DiskCache(directory: dir.cache, configuration: shared())
        let b = try DiskCache(directory: dir.cache, configuration: behind)
        for i in 0..<20 { try a.store(bytes("old-\(i)"), for: "key-\(i)") }
        #expect(b.data(for: "key-1") == bytes("old-1"))
        try a.compact()
        // Into key-1's other slot, the one b (which still sees old-1) would pick.
        try a.store(randomData(count: 20_000, seed: 2), for: "key-1")
        try a.store(bytes("fresh"), for: "fresh")
        #expect(throws: DiskCacheError.self) { try b.store(bytes("from b"), for: "key-1") }
        #expect(throws: DiskCacheError.self) { try b.removeValue(for: "key-2") }
        #expect(throws: DiskCacheError.self) { try b.verify(repair: true) }
        #expect(a.data(for: "key-1") == randomData(count: 20_000, seed: 2))
        #expect(a.data(for: "fresh") == bytes("fresh"))
        #expect(a.data(for: "key-2") == bytes("old-2"))
        failing.withLock { $0 = false }
        #expect(b.data(for: "key-1") == randomData(count: 20_000, seed: 2))
        #expect(b.data(for: "fresh") == bytes("fresh"))
        try b.store(bytes("from b"), for: "key-1")
        #expect(a.data(for: "key-1") == bytes("from b"))
        #expect(try b.verify().isHealthy)
        try a.close()
        try b.close()
    }
    #endif

    /// A process killed while it holds the append lock and a key's lock: the others go on, and
    /// the next holder of the append lock is told, so it checks the journal's true length.
    @Test func locksHeldByAKilledProcessPassToTheNextHolder() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: shared())
        try cache.store(bytes("before"), for: "k")
        let region = try #require(cache.sharedRegion)
        // Made before the fork: the child of a multithreaded process calls nothing that may
        // take a lock another thread held at the fork (allocation, Foundation).
        let journalPath = dir.cache.appendingPathComponent("journal").path
        let journal = open(journalPath, O_WRONLY | O_CLOEXEC)
        #expect(journal >= 0)
        defer { close(journal) }
        let tornCount = 4096
        let torn = UnsafeMutableRawBufferPointer.allocate(byteCount: tornCount, alignment: 8)
        defer { torn.deallocate() }
        for i in 0..<tornCount { torn[i] = UInt8(truncatingIfNeeded: i &* 37 &+ 11) }
        let child = fork()
        if child == 0 {
            // The child: take both locks, write part of a record where the next one goes
            // (as an append cut short by the kill would: the shared end not yet advanced), and
            // die holding them. The bytes are more than the records written after them, so
            // some stay past the journal's end to the last check.
            try? region.withStripes(from: 7) { () throws(DiskCacheError) in
                try region.withLock(.append) { () throws(DiskCacheError) in
                    _ = pwrite(journal, torn.baseAddress, tornCount, off_t(region[.end]))
                    _ = kill(getpid(), SIGKILL)
                }
            }
            _exit(1)
        }
        var status: Int32 = 0
        #expect(waitpid(child, &status, 0) == child)
        #expect(status & 0x7f == SIGKILL)
        // The torn bytes are there, past the end the instances go by.
        let journalSize = try FileManager.default.attributesOfItem(atPath: journalPath)[.size] as? Int
        #expect(journalSize == Int(region[.end]) + tornCount)
        if SharedRegion.usesMutexes {
            var finished = false
            try region.withStripes(from: 7) { () throws(DiskCacheError) in try region.withLock(.append) { finished = true } }
            #expect(finished)
            #expect(region[.holderDied] == 1)
        }
        try cache.store(bytes("after"), for: "k")
        #expect(region[.holderDied] == 0)
        let other = try DiskCache(directory: dir.cache, configuration: shared())
        #expect(other.data(for: "k") == bytes("after"))
        // Recovery by the next opener alone replays up to the torn bytes and no further.
        try other.close()
        try cache.close()
        let reopened = try DiskCache(directory: dir.cache, configuration: shared())
        #expect(reopened.data(for: "k") == bytes("after"))
        try reopened.store(bytes("later"), for: "k2")
        try reopened.close()
        let last = try DiskCache(directory: dir.cache, configuration: shared())
        #expect(last.data(for: "k") == bytes("after") && last.data(for: "k2") == bytes("later"))
        #expect(try last.verify().isHealthy)
    }

    @Test func oneKeyWrittenByTwoInstancesAtOnceEndsAsOneValueWhole() throws {
        let dir = TemporaryDirectory()
        let a = try DiskCache(directory: dir.cache, configuration: shared())
        let b = try DiskCache(directory: dir.cache, configuration: shared())
        let values = (0..<2).map { randomData(count: 30_000, seed: UInt64($0 + 10)) }
        for _ in 0..<20 {
            DispatchQueue.concurrentPerform(iterations: 2) { i in
                for _ in 0..<10 { try? (i == 0 ? a : b).store(values[i], for: "k") }
            }
            let seenByA = a.data(for: "k"), seenByB = b.data(for: "k")
            #expect(seenByA == seenByB)
            #expect(seenByA == values[0] || seenByA == values[1])
        }
        #expect(a.statistics.corruptEntriesRemoved == 0 && b.statistics.corruptEntriesRemoved == 0)
        try a.close()
        try b.close()
        let reopened = try DiskCache(directory: dir.cache, configuration: shared())
        #expect(try reopened.verify().isHealthy)
    }

    @Test func limitsHoldForTheCacheAsAWhole() throws {
        let dir = TemporaryDirectory()
        let writer = try DiskCache(directory: dir.cache, configuration: shared())
        var limited = shared()
        limited.countLimit = 10
        limited.lowWatermark = 0.9
        let sweeper = try DiskCache(directory: dir.cache, configuration: limited)
        for i in 0..<30 { try writer.store(bytes("v\(i)"), for: "key-\(i)") }
        let report = sweeper.sweep()
        // The sweeper evicts what the other instance wrote, down to 90 % of its limit.
        #expect(report.totalRemovedEntries == 21)
        #expect(writer.count == 9)
    }

    /// A verify with repair while another instance replaces, removes and compacts: what changed
    /// while it read is no finding, and the repair removes nothing the other stored.
    @Test func verifyingWhileAnotherInstanceWritesFindsNothingAndLosesNothing() throws {
        let dir = TemporaryDirectory()
        let a = try DiskCache(directory: dir.cache, configuration: shared())
        let b = try DiskCache(directory: dir.cache, configuration: shared())
        // Inline (under 8 KiB) and body-file values alternate, so each store changes the files.
        @Sendable func value(_ key: Int, _ round: Int) -> Data {
            randomData(count: (key + round) % 2 == 0 ? 500 : 12_000, seed: UInt64(key * 1000 + round))
        }
        for key in 0..<200 { try b.store(value(key, 0), for: "key-\(key)") }
        let done = Locked(false)
        let lastRound = Locked(0)
        let writer = DispatchGroup()
        DispatchQueue.global().async(group: writer) {
            var round = 1
            while !done.value {
                for key in 0..<200 { try? b.store(value(key, round), for: "key-\(key)") }
                try? b.removeValue(for: "key-\(round % 200)")
                if round % 3 == 0 { try? b.compact() }
                lastRound.value = round
                round += 1
            }
        }
        var reports: [DiskCache.VerificationReport] = []
        while reports.count < 4 || lastRound.value < 3 { reports.append(try a.verify(repair: true)) }
        done.value = true
        writer.wait()
        for report in reports { #expect(report.problems.isEmpty, "\(report.problems.prefix(3))") }
        let last = lastRound.value
        for key in 0..<200 where key != last % 200 {
            #expect(a.data(for: "key-\(key)") == value(key, last), "key-\(key)")
        }
    }

    /// Two tiered caches on one disk tier: what one replaces or removes is never served from the
    /// other's memory tier.
    @Test func aTieredCacheNeverServesFromMemoryWhatAnotherInstanceChanged() throws {
        let dir = TemporaryDirectory()
        let a = try TieredCache(memoryCapacity: 1 << 20, diskCapacity: 1 << 30, directory: dir.cache, configuration: shared())
        let b = try TieredCache(memoryCapacity: 1 << 20, diskCapacity: 1 << 30, directory: dir.cache, configuration: shared())
        try a.store(bytes("one"), for: "k", metadata: ["v": "1"])
        #expect(a.data(for: "k") == bytes("one"))
        #expect(a.statistics.memoryHits == 1)  // the value is in a's memory tier

        try b.store(bytes("two"), for: "k")
        #expect(a.data(for: "k") == bytes("two"))
        #expect(try b.updateMetadata(["v": "3"], for: "k"))
        #expect(a.recordWithoutBody(for: "k")?.metadata == ["v": "3"])
        try b.removeValue(for: "k")
        #expect(a.contains("k") == false)
        #expect(a.data(for: "k") == nil)

        for i in 0..<20 { try a.store(bytes("a\(i)"), for: "key-\(i)") }
        for i in 0..<20 { #expect(a.data(for: "key-\(i)") == bytes("a\(i)")) }
        try b.removeAll()
        for i in 0..<20 { #expect(a.data(for: "key-\(i)") == nil) }
        // Keys a has in memory and b never touched stay served from memory.
        try a.store(bytes("kept"), for: "mine")
        try b.store(bytes("other"), for: "theirs")
        let hitsBefore = a.statistics.memoryHits
        #expect(a.data(for: "mine") == bytes("kept"))
        #expect(a.statistics.memoryHits == hitsBefore + 1)
        #expect(a.data(for: "theirs") == bytes("other"))
    }

    /// A child process this one starts holds a copy of every descriptor between fork and exec,
    /// the cache's `LOCK` included: `close()` lets go of the lock itself, so another instance
    /// opens at once (here a `dup` stands for the child's copy).
    @Test func aClosedCachesLockGoesEvenWhileACopyOfItsDescriptorLives() throws {
        let dir = TemporaryDirectory()
        var exclusive = shared()
        exclusive.sharing = .exclusive
        let first = try DiskCache(directory: dir.cache, configuration: exclusive)
        let copies = first.locks.withLock { $0.map { dup($0.fd) } }
        defer { for copy in copies { close(copy) } }
        #expect(!copies.isEmpty && copies.allSatisfy { $0 >= 0 })
        try first.close()
        let second = try DiskCache(directory: dir.cache, configuration: exclusive)
        try second.close()
    }

    @Test func exclusiveAndSharedInstancesKeepEachOtherOut() throws {
        let dir = TemporaryDirectory()
        var exclusive = shared()
        exclusive.sharing = .exclusive
        let owner = try DiskCache(directory: dir.cache, configuration: exclusive)
        #expect {
            try DiskCache(directory: dir.cache, configuration: shared())
        } throws: { error in
            guard let error = error as? DiskCacheError else { return false }
            return error.code == .locked && error.message.contains("exclusively")
        }
        try owner.close()
        let sharer = try DiskCache(directory: dir.cache, configuration: shared())
        #expect {
            try DiskCache(directory: dir.cache, configuration: exclusive)
        } throws: { error in
            guard let error = error as? DiskCacheError else { return false }
            return error.code == .locked && error.message.contains("sharing")
        }
        try sharer.close()
        _ = try DiskCache(directory: dir.cache, configuration: exclusive)
    }

    @Test func aNetworkFilesystemIsOpenedExclusively() throws {
        let dir = TemporaryDirectory()
        var configuration = shared()
        configuration.filesystemTypeProbe = { _ in 0x6969 }  // NFS
        let first = try DiskCache(directory: dir.cache, configuration: configuration)
        #expect(first.sharedRegion == nil)
        #expect {
            try DiskCache(directory: dir.cache, configuration: configuration)
        } throws: { ($0 as? DiskCacheError)?.code == .locked }
        try first.close()
    }

    // MARK: - Processes

    /// A child stores; this process reads each value the moment the child says its store returned,
    /// for 3 s and at least 101 values (up to five minutes on a loaded machine).
    @Test func anotherProcessesAcknowledgedWritesAreVisibleOnTheNextCall() throws {
        let dir = TemporaryDirectory()
        let reader = try DiskCache(directory: dir.cache, configuration: shared())
        let writer = try Worker(["write", dir.cache.path, "none", "20", "7"])
        defer { writer.kill() }
        #expect(writer.waitFor { $0 == "READY" } != nil)
        var checked = 0, next = 0
        let deadline = Date().addingTimeInterval(3), cap = Date().addingTimeInterval(300)
        while Date() < deadline || (checked <= 100 && Date() < cap) {
            let lines = writer.lines
            while next < lines.count {
                let fields = lines[next].split(separator: " ")
                next += 1
                guard fields.count == 4, fields[0] == "ACK" else { continue }
                let key = String(fields[2]), version = Int(fields[3])!
                let k = Int(key.dropFirst(4))!
                // The child may have written or removed the key again since: never an older version.
                let value = reader.data(for: key)
                let seen = value.flatMap { checkPayload($0, k: k) }
                if value != nil {
                    let newest = fields[1] == "PUT" ? version : version + 1
                    #expect(seen != nil && seen! >= newest, "\(lines[next - 1]): read \(String(describing: seen))")
                } else if fields[1] == "PUT" {
                    // A miss only if the child has since begun removing it. (Its line saying so
                    // may still be in the pipe: it is looked for again a little later.)
                    func removedSince() -> Bool {
                        writer.lines.contains { line in
                            let parts = line.split(separator: " ")
                            return parts.count == 4 && parts[0] == "BEGIN" && parts[1] == "DEL" && parts[2] == key && Int(parts[3])! > version
                        }
                    }
                    if !removedSince(), !{ Thread.sleep(forTimeInterval: 0.3); return removedSince() }() {
                        // Which part missed: the index, or reading the files it names.
                        let statistics = reader.statistics
                        let again = reader.data(for: key).flatMap { checkPayload($0, k: k) }.map(String.init) ?? "nil"
                        let journal = (try? DiskCacheInspector(directory: dir.cache, whileOpen: true))?.data(for: key)
                            .flatMap { checkPayload($0, k: k) }.map(String.init) ?? "nil"
                        let text = "\(lines[next - 1]): a miss; in the index now: \(reader.contains(key)), read again: \(again), in the journal: \(journal), "
                            + "hits \(statistics.hits), misses \(statistics.misses), corrupt \(statistics.corruptEntriesRemoved)"
                        Issue.record(Comment(rawValue: text))
                    }
                }
                checked += 1
            }
        }
        writer.kill()
        #expect(checked > 100)
        #expect(reader.statistics.corruptEntriesRemoved == 0)
    }

    /// Eight processes on one cache for a few seconds, some killed and restarted: every value any
    /// of them read was one stored for its key, and the cache ends as the writes acknowledged say.
    /// The kills go on until there have been three and the processes have acknowledged 150
    /// writes between them, however long a loaded machine takes for that (up to five minutes:
    /// a killed process in the middle of an fsync exits only once the fsync returns).
    @Test func eightProcessesWithKillsKeepEveryGuarantee() async throws {
        // Blocking waits, on a thread of their own (see `onOwnThread`).
        try await onOwnThread {
            let dir = TemporaryDirectory()
            let stop = dir.url.appendingPathComponent("stop").path
            var random = SplitMix64(seed: 2026)
            var workers: [Worker] = []
            var all: [Worker] = []
            var nextID = 1
            func start() throws -> Worker {
                let worker = try Worker(["share", dir.cache.path, "\(nextID)", "300", "\(random.next() % 1_000_000)", stop])
                nextID += 1
                all.append(worker)
                return worker
            }
            func acknowledged() -> Int { all.reduce(0) { $0 + $1.lines.count { $0.hasPrefix("A ") } } }
            for _ in 0..<8 { workers.append(try start()) }
            let begin = Date()
            var kills = 0
            while Date().timeIntervalSince(begin) < 4 || ((kills < 3 || acknowledged() < 150) && Date().timeIntervalSince(begin) < 300) {
                Thread.sleep(forTimeInterval: 0.4 + Double(random.next() % 400) / 1000)
                let slot = Int(random.next() % 8)
                workers[slot].kill()
                kills += 1
                workers[slot] = try start()
            }
            try writeFile(stop, [])
            for worker in workers {
                _ = worker.waitFor(timeout: 60) { $0 == "DONE" }
                // Reaped before the test ends (a worker says DONE after its close): Foundation's
                // Process is released only once the exit is seen (Address Sanitizer's leak check).
                worker.kill()
            }

            // Every read in every process was of a value stored for its key, whole.
            var history = OperationHistory()
            for worker in all { history.add(worker.lines) }
            #expect(history.bad.isEmpty, "\(history.bad.prefix(5))")
            #expect(history.unknownReads.isEmpty, "\(history.unknownReads.prefix(5))")
            #expect(history.acknowledgedWrites > 100)
            #expect(kills >= 3)

            // The cache ends as a linearisable history of the acknowledged operations allows.
            let cache = try DiskCache(directory: dir.cache, configuration: shared())
            for k in 0..<40 {
                let final = cache.data(for: "key-\(k)").map { checkPayload($0, k: k) }
                if let final { #expect(final != nil, "key-\(k) holds bytes not stored for it") }
                let problem = history.explain(key: "key-\(k)", final: final ?? nil)
                #expect(problem == nil, "\(problem ?? "")")
            }
            #expect(cache.statistics.corruptEntriesRemoved == 0)
            #expect(try cache.verify().isHealthy)
        }
    }
}

/// The operations the `share` workers reported, and whether a final state is one they explain.
struct OperationHistory {
    struct Operation {
        var kind: String  // PUT, DEL, CLR
        var key: String
        var version: Int
        var begin: Int64
        var ack: Int64?  // nil: the process was killed before the call returned
    }
    var operations: [Operation] = []
    var bad: [String] = []
    var reads: [(key: String, version: Int)] = []
    var unknownReads: [String] = []
    var acknowledgedWrites: Int { operations.filter { $0.ack != nil }.count }

    mutating func add(_ lines: [String]) {
        var open: Operation?
        for line in lines {
            let fields = line.split(separator: " ").map(String.init)
            switch fields.first {
            case "B":
                if let open { operations.append(open) }
                open = Operation(kind: fields[1], key: fields[2], version: Int(fields[3])!, begin: Int64(fields[4])!)
            case "A":
                open?.ack = Int64(fields[4])!
                if let open { operations.append(open) }
                open = nil
            case "GET": reads.append((fields[1], Int(fields[2])!))
            case "BAD": bad.append(line)
            default: break
            }
        }
        if let open { operations.append(open) }  // cut short by SIGKILL
        let stored = Set(operations.filter { $0.kind == "PUT" }.map { "\($0.key) \($0.version)" })
        unknownReads = reads.filter { !stored.contains("\($0.key) \($0.version)") }.map { "\($0.key) \($0.version)" }
    }

    /// Nil when `final` (a version, or nil for absent) is what some operation on `key` that may
    /// come last in a linearisation leaves: the acknowledged one that returned last, or one that
    /// had not returned before that one began.
    func explain(key: String, final: Int?) -> String? {
        let mine = operations.filter { $0.key == key || $0.kind == "CLR" }
        guard let last = mine.filter({ $0.ack != nil }).max(by: { $0.ack! < $1.ack! }) else {
            if let final { return mine.contains { $0.kind == "PUT" && $0.version == final } ? nil : "\(key): \(final) was never stored" }
            return nil
        }
        let candidates = mine.filter { $0.ack == nil || $0.ack! > last.begin }
        let explains = candidates.contains { operation in
            if let final { return operation.kind == "PUT" && operation.version == final }
            return operation.kind != "PUT"
        }
        if explains { return nil }
        return "\(key): ends as \(final.map(String.init) ?? "absent"), but the last acknowledged operation was \(last.kind) \(last.version)"
            + " and nothing concurrent with it explains that"
    }
}

/// `payload(k:version:)` of the test worker, checked: the version `value` is, or nil if it is not exactly that.
func checkPayload(_ value: Data, k: Int) -> Int? {
    let fields = String(decoding: value.prefix(40), as: UTF8.self).split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)
    guard fields.count >= 2, fields[0] == "key-\(k)", let version = Int(fields[1]) else { return nil }
    var bytes = Array("key-\(k)|\(version)|".utf8)
    let length = (version &* 7919 &+ k &* 104_729) % 20_000
    for i in 0..<length { bytes.append(UInt8(truncatingIfNeeded: i &* version &+ k)) }
    return Data(bytes) == value ? version : nil
}

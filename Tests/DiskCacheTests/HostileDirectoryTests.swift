@testable import DiskCache
import Foundation
import DiskCacheLocking
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The cache directory as an attacker or an unlucky operator leaves it: links in place of the
/// cache's own directories, files and directories where the other kind belongs, a deleted
/// `LOCK`, a user's directory that merely looks like a cache, a lost or swapped `VERSION`.
/// Nothing outside the cache is ever read, written, unlinked or chmod'ed; what blocks the cache
/// is cleared by a repair; a directory that is not a cache is left byte for byte.
struct HostileDirectoryTests {
    /// Every key lands in shard "ab".
    static let hasher = KeyHasher { key in KeyHash(high: 0xAB00_0000_0000_0000 | UInt64(key.utf8.count), low: UInt64(key.hashValue & 0xFFFF)) }

    func configuration(_ durability: DiskCache.Durability = .none) -> DiskCache.Configuration {
        var configuration = DiskCache.Configuration.testing(hasher: Self.hasher)
        configuration.sweepInterval = nil
        configuration.durability = durability
        return configuration
    }

    /// Moves `path` to `elsewhere` and puts a symbolic link to it in its place.
    func replaceWithLink(_ path: URL, movingTo elsewhere: URL) throws {
        try FileManager.default.moveItem(at: path, to: elsewhere)
        try FileManager.default.createSymbolicLink(at: path, withDestinationURL: elsewhere)
    }

    func isRealDirectory(_ path: URL) -> Bool {
        var info = stat()
        return lstat(path.path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }

    func names(_ url: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: url.path).sorted()
    }

    // MARK: - Links in place of the cache's directories

    @Test func aShardReplacedByALinkWhileOpenIsNeverFollowed() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration())
        try cache.store(randomData(count: 3000, seed: 1), for: "outside")
        try cache.store(bytes("in"), for: "inside")
        let shard = dir.cache.appendingPathComponent("ab")
        let elsewhere = dir.url.appendingPathComponent("elsewhere")
        try replaceWithLink(shard, movingTo: elsewhere)
        let outsideFiles = try names(elsewhere)
        #expect(outsideFiles.count >= 2)  // the two entries' files

        // Reads see no bytes from outside; removals unlink nothing there.
        #expect(cache.data(for: "outside") == nil)
        try cache.removeValue(for: "inside")
        _ = cache.sweep()
        #expect(try names(elsewhere) == outsideFiles)

        // verify sees the link; repair removes the link, never its target.
        let report = try cache.verify()
        #expect(report.problems.contains { $0.kind == .symbolicLink && $0.path == shard.path })
        let repaired = try cache.verify(repair: true)
        #expect(!repaired.repairs.isEmpty)
        #expect(isRealDirectory(shard))
        #expect(try names(elsewhere) == outsideFiles)
        try cache.store(bytes("again"), for: "outside")
        #expect(cache.data(for: "outside") == bytes("again"))
        #expect(try cache.verify().isHealthy)
        #expect(try names(elsewhere) == outsideFiles)
        try cache.close()
    }

    @Test func aLinkInPlaceOfTmpIsNeverFollowedOrChmodded() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration())
        try cache.store(bytes("v"), for: "k")
        let temp = dir.cache.appendingPathComponent("tmp")
        let elsewhere = dir.url.appendingPathComponent("outside-tmp")
        try replaceWithLink(temp, movingTo: elsewhere)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: elsewhere.path)

        // verify sees the link; repair replaces it and changes no mode outside.
        #expect(try cache.verify().problems.contains { $0.kind == .symbolicLink && $0.path == temp.path })
        _ = try cache.verify(repair: true)
        let mode = try FileManager.default.attributesOfItem(atPath: elsewhere.path)[.posixPermissions] as? Int
        #expect(mode == 0o755)
        #expect(isRealDirectory(temp))
        #expect(try cache.verify().isHealthy)

        // removeAll trashes the shards into tmp/: never through a link there.
        try FileManager.default.removeItem(at: temp)
        try FileManager.default.createSymbolicLink(at: temp, withDestinationURL: elsewhere)
        try cache.removeAll()
        try cache.store(bytes("w"), for: "k2")
        #expect(try names(elsewhere).isEmpty)
        #expect(isRealDirectory(temp))
        #expect(cache.data(for: "k") == nil)
        #expect(cache.data(for: "k2") == bytes("w"))
        #expect(try cache.verify().isHealthy)
        try cache.close()
    }

    // MARK: - Ownership

    @Test func deletingLockWhileOpenDoesNotLetASecondOpenerIn() throws {
        let dir = TemporaryDirectory()
        var exclusive = configuration()
        exclusive.sharing = .exclusive
        let cache = try DiskCache(directory: dir.cache, configuration: exclusive)
        try cache.store(bytes("1"), for: "key-1")
        try FileManager.default.removeItem(at: dir.cache.appendingPathComponent("LOCK"))
        // Another process, and another DiskCache in this one, are refused.
        let lines = try Worker.run(["open", dir.cache.path, "exclusive"])
        #expect(lines.count == 1 && lines[0].hasPrefix("ERROR locked"), "\(lines)")
        #expect {
            try DiskCache(directory: dir.cache, configuration: exclusive)
        } throws: { ($0 as? DiskCacheError)?.code == .locked }
        try cache.store(bytes("2"), for: "key-2")
        try cache.close()
        let reopened = try DiskCache(directory: dir.cache, configuration: configuration())
        #expect(reopened.data(for: "key-1") == bytes("1"))
        #expect(reopened.data(for: "key-2") == bytes("2"))
        try reopened.close()
    }

    // MARK: - The directory going away under an open cache

    @Test(arguments: ["removed", "moved", "replaced", "journal removed"])
    func checkDirectorySaysWhenTheDirectoryWentAway(_ how: String) throws {
        let dir = TemporaryDirectory()
        var exclusive = configuration()
        exclusive.sharing = .exclusive
        let cache = try DiskCache(directory: dir.cache, configuration: exclusive)
        try cache.store(bytes("1"), for: "key-1")
        try cache.checkDirectory()
        let fileManager = FileManager.default
        switch how {
        case "removed": try fileManager.removeItem(at: dir.cache)
        case "moved": try fileManager.moveItem(at: dir.cache, to: dir.url.appendingPathComponent("elsewhere"))
        case "replaced":
            try fileManager.moveItem(at: dir.cache, to: dir.url.appendingPathComponent("elsewhere"))
            try fileManager.createDirectory(at: dir.cache, withIntermediateDirectories: false)
        default: try fileManager.removeItem(at: dir.cache.appendingPathComponent("journal"))
        }
        #expect {
            try cache.checkDirectory()
        } throws: { error in
            let error = error as? DiskCacheError
            return error?.code == .notFound && error?.path == dir.cache.path && error?.message.contains("reopen") == true
        }
        try? cache.close()
        #expect { try cache.checkDirectory() } throws: { ($0 as? DiskCacheError)?.code == .notFound || ($0 as? DiskCacheError)?.code == .closed }
    }

    @Test func checkDirectoryPassesInSharedModeAfterAnotherInstanceCompacts() throws {
        let dir = TemporaryDirectory()
        var shared = configuration()
        shared.sharing = .shared
        let first = try DiskCache(directory: dir.cache, configuration: shared)
        let second = try DiskCache(directory: dir.cache, configuration: shared)
        try first.store(bytes("1"), for: "key-1")
        // The compaction replaces the journal `second` holds open.
        try first.compact()
        try second.checkDirectory()
        try first.close()
        try second.close()
        #expect { try second.checkDirectory() } throws: { ($0 as? DiskCacheError)?.code == .closed }
    }

    // MARK: - A user's directory

    @Test(arguments: [
        ["journal": "my notes\n"],
        ["LOCK": "mine\n"],
        ["VERSION": "release 2.1\n", "README": "hello\n"],
        ["VERSION": "2\n"],
        ["VERSION": "2\n", "journal": "not a journal\n"],
    ])
    func aDirectoryWithoutTheMarkIsLeftByteForByte(files: [String: String]) throws {
        let dir = TemporaryDirectory()
        try FileManager.default.createDirectory(at: dir.cache, withIntermediateDirectories: true)
        for (name, text) in files { try Data(text.utf8).write(to: dir.cache.appendingPathComponent(name)) }
        let before = try snapshot(dir.cache)
        #expect {
            try DiskCache(directory: dir.cache, configuration: configuration())
        } throws: { ($0 as? DiskCacheError)?.code == .notACache }
        #expect(throws: DiskCacheError.self) { try DiskCacheInspector(directory: dir.cache) }
        #expect(try snapshot(dir.cache) == before)
    }

    @Test func aCacheMarkedBeforeTheMagicLineOpensAndIsMarkedAgain() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration())
        try cache.store(bytes("v"), for: "k")
        try cache.close()
        let version = dir.cache.appendingPathComponent("VERSION")
        try Data("2\n".utf8).write(to: version)
        let reopened = try DiskCache(directory: dir.cache, configuration: configuration())
        #expect(reopened.data(for: "k") == bytes("v"))
        try reopened.close()
        #expect(try String(contentsOf: version, encoding: .utf8) == "swift-disk-cache\n2\nkind DiskCache\n")
    }

    // MARK: - Damage that blocks writes

    @Test func aFileInPlaceOfAShardIsClearedByRepair() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration())
        let shard = dir.cache.appendingPathComponent("ab")
        try FileManager.default.removeItem(at: shard)
        try Data("not a directory".utf8).write(to: shard)
        #expect(throws: DiskCacheError.self) { try cache.store(bytes("v"), for: "k") }
        let report = try cache.verify(repair: true)
        #expect(report.problems.contains { $0.kind == .wrongFileType && $0.path == shard.path })
        #expect(isRealDirectory(shard))
        try cache.store(bytes("v"), for: "k")
        #expect(cache.data(for: "k") == bytes("v"))
        #expect(try cache.verify().isHealthy)
        try cache.close()
    }

    @Test func aFileInPlaceOfAShardAtOpenIsMovedAside() throws {
        let dir = TemporaryDirectory()
        try DiskCache(directory: dir.cache, configuration: configuration()).close()
        let shard = dir.cache.appendingPathComponent("ab")
        try FileManager.default.removeItem(at: shard)
        try Data("not a directory".utf8).write(to: shard)
        let cache = try DiskCache(directory: dir.cache, configuration: configuration())
        #expect(isRealDirectory(shard))
        try cache.store(bytes("v"), for: "k")
        #expect(cache.data(for: "k") == bytes("v"))
        try cache.close()
    }

    @Test func aDirectoryAtAnEntryFileNameDoesNotBlockItsKey() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration())
        try cache.store(bytes("first"), for: "k")  // slot 0; the next store goes to slot 1
        let hash = Self.hasher.hash("k")
        let slot1 = Layout(root: dir.cache.path).metaFile(hash, slot: 1)
        try FileManager.default.createDirectory(atPath: slot1 + "/inner", withIntermediateDirectories: true)
        try cache.store(bytes("second"), for: "k")
        #expect(cache.data(for: "k") == bytes("second"))
        // And as an orphan, repair removes it whole.
        try FileManager.default.createDirectory(atPath: Layout(root: dir.cache.path).metaFile(hash, slot: 0) + "/inner",
                                                withIntermediateDirectories: true)
        let report = try cache.verify(repair: true)
        #expect(report.problems.contains { $0.kind == .orphanFile })
        #expect(try cache.verify().isHealthy)
        #expect(cache.data(for: "k") == bytes("second"))
        try cache.close()
    }

    @Test func aDirectoryAtJournalTmpDoesNotBlockCompaction() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration())
        try cache.store(bytes("v"), for: "k")
        let journalTemp = dir.cache.appendingPathComponent("journal.tmp")
        try FileManager.default.createDirectory(at: journalTemp.appendingPathComponent("inner"), withIntermediateDirectories: true)
        #expect(try cache.verify().problems.contains { $0.kind == .temporaryFile && $0.path == journalTemp.path })
        try cache.compact()
        #expect(try cache.verify(repair: true).problems.isEmpty)
        #expect(try cache.verify().isHealthy)
        #expect(cache.data(for: "k") == bytes("v"))
        try cache.close()
    }

    // MARK: - Damage that leaves a cache unopenable

    @Test func aJournalThatIsADirectoryIsMovedAsideAndTheCacheRebuilt() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration())
        try cache.store(bytes("v"), for: "k")
        try cache.close()
        let journal = dir.cache.appendingPathComponent("journal")
        try FileManager.default.removeItem(at: journal)
        try FileManager.default.createDirectory(at: journal.appendingPathComponent("inner"), withIntermediateDirectories: true)
        let reopened = try DiskCache(directory: dir.cache, configuration: configuration())
        #expect(reopened.data(for: "k") == bytes("v"))
        #expect(reopened.statistics.recovery.rebuiltByScan)
        try reopened.close()
    }

    @Test(arguments: ["missing", "damaged", "swapped"])
    func aLostMarkIsRestoredByRepair(damage: String) throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration())
        try cache.store(bytes("v"), for: "k")
        try cache.close()
        let version = dir.cache.appendingPathComponent("VERSION")
        let lock = dir.cache.appendingPathComponent("LOCK")
        switch damage {
        case "missing": try FileManager.default.removeItem(at: version)
        case "damaged": try Data([0xFF, 0x00, 0x13]).write(to: version)
        default:
            let (versionText, lockText) = (try Data(contentsOf: version), try Data(contentsOf: lock))
            try lockText.write(to: version)
            try versionText.write(to: lock)
        }
        #expect {
            try DiskCache(directory: dir.cache, configuration: configuration())
        } throws: { ($0 as? DiskCacheError)?.code == .notACache }
        let repairs = try DiskCache.restoreMark(directory: dir.cache)
        #expect(!repairs.isEmpty)
        let reopened = try DiskCache(directory: dir.cache, configuration: configuration())
        #expect(reopened.data(for: "k") == bytes("v"))
        try reopened.close()
    }

    /// A restored mark keeps the kind and application version the lost one named (here an
    /// `HTTPURLCache`'s: kind and version 2), read from what is left of `VERSION`, from `LOCK`
    /// when the two were swapped, or given when nothing is left: the cache opens again for its
    /// own kind with its entries, and stays refused to another. (A mark restored without them
    /// was refused by the kind that made it, as a kindless mark that lacks the version it asks.)
    @Test(arguments: ["damaged", "appended", "swapped", "missing"])
    func aRestoredMarkKeepsTheKind(damage: String) throws {
        let dir = TemporaryDirectory()
        var configuration = DiskCache.Configuration.testing()
        configuration.kind = "HTTPURLCache"
        configuration.applicationVersion = 2
        let cache = try DiskCache(directory: dir.cache, configuration: configuration)
        try cache.store(bytes("v"), for: "k")
        try cache.close()
        let version = dir.cache.appendingPathComponent("VERSION")
        let lock = dir.cache.appendingPathComponent("LOCK")
        let mark = try Data(contentsOf: version)
        switch damage {
        case "damaged": try Data("swift-disk-cach\u{0}\n2\nkind HTTPURLCache\napplication 2\n".utf8).write(to: version)
        case "appended": try (mark + Data(repeating: 0xA5, count: 300)).write(to: version)
        case "swapped":
            try Data(contentsOf: lock).write(to: version)
            try mark.write(to: lock)
        default: try FileManager.default.removeItem(at: version)
        }
        #expect {
            try DiskCache(directory: dir.cache, configuration: configuration)
        } throws: { ($0 as? DiskCacheError)?.code == .notACache }
        let repairs = damage == "missing"
            ? try DiskCache.restoreMark(directory: dir.cache, kind: "HTTPURLCache", applicationVersion: 2)
            : try DiskCache.restoreMark(directory: dir.cache)
        #expect(repairs.count == 1 && repairs[0].hasSuffix(", naming kind HTTPURLCache and application version 2"), "\(repairs)")
        #expect(try Data(contentsOf: version) == mark)
        #expect {
            try DiskCache(directory: dir.cache, configuration: .testing())
        } throws: { ($0 as? DiskCacheError)?.code == .otherKind }
        let reopened = try DiskCache(directory: dir.cache, configuration: configuration)
        #expect(reopened.data(for: "k") == bytes("v"))
        try reopened.close()
    }

    @Test func restoreMarkRefusesADirectoryThatIsNotACache() throws {
        let dir = TemporaryDirectory()
        try FileManager.default.createDirectory(at: dir.cache.appendingPathComponent("ab"), withIntermediateDirectories: true)
        try Data("notes".utf8).write(to: dir.cache.appendingPathComponent("journal"))
        try Data("mine".utf8).write(to: dir.cache.appendingPathComponent("README"))
        let before = try snapshot(dir.cache)
        #expect {
            try DiskCache.restoreMark(directory: dir.cache)
        } throws: { ($0 as? DiskCacheError)?.code == .notACache }
        #expect(try snapshot(dir.cache) == before)
    }

    // MARK: - Durability of a retried remove (fault injection: debug builds only)

    #if DEBUG

    /// A removal whose journal record cannot be written changes nothing: the entry stays in the
    /// index and its files stay, readable now and after the cache is opened again.
    @Test func aRemovalWhoseRecordCannotBeWrittenLeavesTheEntry() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(.none))
        try cache.store(bytes("value"), for: "k")
        let journal = cache.state.withLock { $0.journal.fd }
        FaultInjection.setWritesFail(journal, true)
        #expect(throws: DiskCacheError.self) { try cache.removeValue(for: "k") }
        FaultInjection.setWritesFail(journal, false)
        #expect(cache.contains("k"))
        #expect(cache.data(for: "k") == bytes("value"))
        #expect(cache.statistics.removals == 0)
        try cache.close()
        let reopened = try DiskCache(directory: dir.cache, configuration: configuration(.none))
        #expect(reopened.data(for: "k") == bytes("value"))
        try reopened.close()
    }

    /// Counts the fsyncs of `fd` until the observer `token` is removed.
    func countingFsyncs(of descriptor: Int32) -> (syncs: LockedCounter, token: Int) {
        let syncs = LockedCounter()
        let token = FileSystemObservers.add { event in
            if case .fsync(let fd) = event, fd == descriptor { syncs.increment() }
        }
        return (syncs, token)
    }

    @Test func aRemoveRetriedAfterAFailedSyncSyncsTheJournal() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(.immediate))
        try cache.store(bytes("v"), for: "k")
        let journal = cache.state.withLock { $0.journal.fd }
        let (syncs, token) = countingFsyncs(of: journal)
        defer { FileSystemObservers.remove(token) }
        FaultInjection.setFsyncFails(journal, true)
        #expect(throws: DiskCacheError.self) { try cache.removeValue(for: "k") }
        FaultInjection.setFsyncFails(journal, false)
        let before = syncs.value
        try cache.removeValue(for: "k")
        #expect(syncs.value == before + 1)
        // Once synced, a remove of a missing key costs no fsync.
        try cache.removeValue(for: "k")
        #expect(syncs.value == before + 1)
        try cache.close()
    }

    /// A compaction whose sync of the directory after its rename fails still compacts, but the
    /// new journal's name may not be durable: the next `.immediate` write syncs the directory
    /// before it returns, fails while that sync fails, and once it works costs no more syncs.
    @Test func aJournalRenameWhoseDirectorySyncFailedIsSyncedBeforeTheNextWriteReturns() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(.immediate))
        try cache.store(bytes("a"), for: "a")
        let root = cache.layout.directory.fd
        let (syncs, token) = countingFsyncs(of: root)
        defer { FileSystemObservers.remove(token) }
        FaultInjection.setFsyncFails(root, true)
        try cache.compact()
        #expect(throws: DiskCacheError.self) { try cache.store(bytes("b"), for: "b") }
        FaultInjection.setFsyncFails(root, false)
        let before = syncs.value
        try cache.store(bytes("c"), for: "c")
        #expect(syncs.value == before + 1)
        try cache.store(bytes("d"), for: "d")
        #expect(syncs.value == before + 1)
        #expect(cache.data(for: "c") == bytes("c"))
        try cache.close()
    }

    /// An instance that follows another's compaction to the new journal cannot know whether
    /// the compactor's sync of the directory worked: it syncs the directory itself, once,
    /// before its next `.immediate` write returns.
    @Test func anInstanceThatFollowsACompactionSyncsTheDirectoryOnce() throws {
        let dir = TemporaryDirectory()
        let compactor = try DiskCache(directory: dir.cache, configuration: configuration(.immediate))
        let follower = try DiskCache(directory: dir.cache, configuration: configuration(.immediate))
        try follower.store(bytes("a"), for: "a")
        let root = follower.layout.directory.fd
        let (syncs, token) = countingFsyncs(of: root)
        defer { FileSystemObservers.remove(token) }
        try follower.store(bytes("b"), for: "b")
        #expect(syncs.value == 0)
        try compactor.compact()
        try follower.store(bytes("c"), for: "c")
        #expect(syncs.value == 1)
        try follower.store(bytes("d"), for: "d")
        #expect(syncs.value == 1)
        try follower.close()
        try compactor.close()
    }
    #endif
}

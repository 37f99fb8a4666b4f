@testable import DiskCache
import Foundation
import MemoryCache
import Testing
import TestSupport

/// Entry files kept open after a read (`Configuration.keptOpenFiles`, ``KeptFiles``): kept
/// from an entry's second read on, read again through the descriptor, at most the limit kept,
/// and let go when their entry changes and when the cache closes, so that no file the cache
/// unlinked stays held open.
struct KeptFilesTests {
    /// The entry files of the cache in `dir` that this process holds open (a removed one's
    /// target ends " (deleted)").
    func openEntryFiles(_ dir: TemporaryDirectory) -> [String] {
        let root = dir.cache.path
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return fds.compactMap { fd in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)"),
                  target.hasPrefix(root + "/") else { return nil }
            let name = target.replacingOccurrences(of: " (deleted)", with: "")
            return name.hasSuffix(".meta") || name.hasSuffix(".body") || name.contains("/retired/") ? target : nil
        }
    }

    func configuration(keeping limit: Int = 256) -> DiskCache.Configuration {
        var configuration = DiskCache.Configuration.testing(inlineThreshold: 100)
        configuration.keptOpenFiles = limit
        // A budget of its own, so that the process's other caches take nothing from it.
        configuration.keptFilesBudget = KeptFiles.Budget(limit: 1 << 20)
        return configuration
    }

    @Test func anEntryReadAgainIsReadThroughTheFilesKept() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration())
        let small = bytes("small"), large = Data(repeating: 3, count: 1_000)
        try cache.store(small, for: "inline")
        try cache.store(large, for: "body")
        #expect(openEntryFiles(dir).isEmpty)
        // Read once, nothing is kept; read again, one `.meta` file for the inline entry, a
        // `.meta` and a `.body` for the other.
        #expect(cache.data(for: "inline") == small && cache.data(for: "body") == large)
        #expect(openEntryFiles(dir).isEmpty)
        #expect(cache.data(for: "inline") == small && cache.data(for: "body") == large)
        #expect(openEntryFiles(dir).count == 3)
        // Moved away (not removed: the link count stays), the files are still read through
        // the descriptors; a read that opened the paths would find nothing.
        let files = [EntryFiles(cache, key: "inline").meta, EntryFiles(cache, key: "body").meta, EntryFiles(cache, key: "body").body]
        for file in files { try FileManager.default.moveItem(atPath: file, toPath: file + ".away") }
        #expect(cache.data(for: "inline") == small && cache.data(for: "body") == large)
        for file in files { try FileManager.default.moveItem(atPath: file + ".away", toPath: file) }
        #expect(openEntryFiles(dir).count == 3)
        #expect(try cache.verify().isHealthy)
    }

    @Test func anEntrysKeptFilesGoWhenItIsReplacedOrRemoved() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration())
        try cache.store(Data(repeating: 1, count: 1_000), for: "a")
        try cache.store(bytes("b"), for: "b")
        for _ in 0..<2 {
            _ = cache.data(for: "a")
            _ = cache.data(for: "b")
        }
        #expect(openEntryFiles(dir).count == 3)
        try cache.store(Data(repeating: 2, count: 1_000), for: "a")
        #expect(openEntryFiles(dir).count == 1)
        #expect(cache.data(for: "a") == Data(repeating: 2, count: 1_000))
        #expect(cache.data(for: "a") == Data(repeating: 2, count: 1_000))
        try cache.removeValue(for: "b")
        #expect(cache.data(for: "b") == nil)
        #expect(openEntryFiles(dir).count == 2)
        // Emptied, then closed: nothing is held.
        try cache.removeAll()
        #expect(openEntryFiles(dir).isEmpty)
        try cache.store(bytes("c"), for: "c")
        _ = cache.data(for: "c")
        _ = cache.data(for: "c")
        #expect(openEntryFiles(dir).count == 1)
        try cache.close()
        #expect(openEntryFiles(dir).isEmpty)
    }

    @Test func noMoreThanTheLimitIsKept() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(keeping: 5))
        for n in 0..<40 { try cache.store(Data(repeating: UInt8(n), count: n % 2 == 0 ? 10 : 1_000), for: "k\(n)") }
        // Each read twice in a row, so that each is kept in its turn.
        for _ in 0..<2 {
            for n in 0..<40 {
                for _ in 0..<2 {
                    #expect(cache.data(for: "k\(n)") == Data(repeating: UInt8(n), count: n % 2 == 0 ? 10 : 1_000))
                }
                #expect(openEntryFiles(dir).count <= 5)
            }
        }
        #expect(cache.keptFiles.count == openEntryFiles(dir).count && cache.keptFiles.count >= 4)
        let none = TemporaryDirectory()
        let keepingNone = try DiskCache(directory: none.cache, configuration: configuration(keeping: 0))
        try keepingNone.store(bytes("v"), for: "k")
        #expect(keepingNone.data(for: "k") == bytes("v") && keepingNone.data(for: "k") == bytes("v"))
        #expect(openEntryFiles(none).isEmpty)
    }

    /// At the limit, keeping one more lets go of an entry not read lately (CLOCK): an entry
    /// read between every other read stays kept while the rest come and go.
    @Test func anEntryReadOftenStaysKeptAtTheLimit() throws {
        let dir = TemporaryDirectory()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration(keeping: 4))
        for n in 0..<30 { try cache.store(bytes("v\(n)"), for: "k\(n)") }
        _ = cache.data(for: "k0")
        _ = cache.data(for: "k0")
        let hot = EntryFiles(cache, key: "k0").meta
        #expect(openEntryFiles(dir) == [hot])
        for n in 1..<30 {
            for _ in 0..<2 {
                #expect(cache.data(for: "k\(n)") == bytes("v\(n)"))
                #expect(cache.data(for: "k0") == bytes("v0"))
            }
            #expect(openEntryFiles(dir).contains(hot) && openEntryFiles(dir).count <= 4)
        }
        #expect(cache.keptFiles.count == 4)
    }

    /// The default is a quarter of the soft limit on descriptors, at most 16,384; caches that
    /// share a budget (by default every cache of the process) keep no more than it together,
    /// whatever each one's setting.
    @Test func cachesThatShareABudgetKeepNoMoreThanItTogether() throws {
        var limits = rlimit()
        #expect(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limits) == 0)
        #expect(DiskCache.Configuration().keptOpenFiles == Int(min(limits.rlim_cur / 4, 16_384)))
        let budget = KeptFiles.Budget(limit: 40)
        let dirs = [TemporaryDirectory(), TemporaryDirectory()]
        let caches = try dirs.map { dir in
            var configuration = configuration(keeping: 100)
            configuration.keptFilesBudget = budget
            return try DiskCache(directory: dir.cache, configuration: configuration)
        }
        for cache in caches {
            for n in 0..<30 { try cache.store(bytes("v\(n)"), for: "k\(n)") }
        }
        for cache in caches {
            for n in 0..<30 {
                for _ in 0..<2 { #expect(cache.data(for: "k\(n)") == bytes("v\(n)")) }
            }
        }
        // The first took 30; the second got the 10 left, then makes room from its own.
        let kept = caches.map(\.keptFiles.count)
        #expect(kept == [30, 10])
        #expect(dirs.map { openEntryFiles($0).count } == kept)
        try caches[0].close()
        for n in 0..<30 { for _ in 0..<2 { _ = caches[1].data(for: "k\(n)") } }
        #expect(caches[1].keptFiles.count == 30 && openEntryFiles(dirs[1]).count == 30)
        try caches[1].close()
        #expect(dirs.allSatisfy { openEntryFiles($0).isEmpty })
    }

    /// A file the sweeper evicts is not held open: its space goes as it would unread.
    @Test func anEvictedEntrysFilesAreLetGo() throws {
        let dir = TemporaryDirectory()
        var configuration = configuration()
        configuration.countLimit = 4
        configuration.sweepInterval = nil
        // In LRU order the entries read (and so kept) are the ones the sweep evicts.
        configuration.evictionPolicy = .leastRecentlyUsed
        let cache = try DiskCache(directory: dir.cache, configuration: configuration)
        for n in 0..<4 { try cache.store(Data(repeating: 1, count: 1_000), for: "k\(n)") }
        for _ in 0..<2 { for n in 0..<4 { _ = cache.data(for: "k\(n)") } }
        #expect(openEntryFiles(dir).count == 8)
        for n in 4..<12 { try cache.store(Data(repeating: 1, count: 1_000), for: "k\(n)") }
        _ = cache.sweep()
        #expect(cache.count <= 4)
        #expect(openEntryFiles(dir).allSatisfy { !$0.hasSuffix("(deleted)") && !$0.contains("/retired/") })
        #expect((0..<4).allSatisfy { cache.data(for: "k\($0)") == nil })
    }

    /// Another instance's replacement or removal, followed in the journal, lets go of what
    /// this one kept; a file removed by another program is opened afresh.
    @Test func changesFromElsewhereLetKeptFilesGo() throws {
        let dir = TemporaryDirectory()
        let reader = try DiskCache(directory: dir.cache, configuration: configuration())
        let writer = try DiskCache(directory: dir.cache, configuration: configuration())
        try writer.store(Data(repeating: 1, count: 1_000), for: "a")
        try writer.store(bytes("b"), for: "b")
        for _ in 0..<2 { #expect(reader.data(for: "a") == Data(repeating: 1, count: 1_000) && reader.data(for: "b") == bytes("b")) }
        #expect(openEntryFiles(dir).count == 3)
        try writer.store(Data(repeating: 2, count: 1_000), for: "a")
        try writer.removeValue(for: "b")
        for _ in 0..<2 { #expect(reader.data(for: "a") == Data(repeating: 2, count: 1_000)) }
        #expect(reader.data(for: "b") == nil)
        #expect(openEntryFiles(dir).count == 2)
        #expect(openEntryFiles(dir).allSatisfy { !$0.hasSuffix("(deleted)") })
        // Removed behind the cache's back: the read notices and finds the entry gone.
        try FileManager.default.removeItem(atPath: EntryFiles(reader, key: "a").body)
        #expect(reader.data(for: "a") == nil)
        #expect(openEntryFiles(dir).allSatisfy { !$0.hasSuffix("(deleted)") })
        try reader.close()
        try writer.close()
    }
}

@testable import DiskCache
import Foundation
import Testing

/// Tests on a real, small filesystem (a tmpfs mounted for the test), and with real processes.
/// They need root to mount; otherwise they say why and pass without running.
struct RealVolumeTests {
    /// Mounts a tmpfs of `size` at a fresh directory, runs `body`, unmounts.
    func withSmallVolume(size: String, _ body: (URL) throws -> Void) throws {
        guard getuid() == 0 else {
            print("skipped: mounting a small tmpfs needs root")
            return
        }
        let dir = TemporaryDirectory()
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let mount = Process()
        mount.executableURL = URL(fileURLWithPath: "/bin/mount")
        mount.arguments = ["-t", "tmpfs", "-o", "size=\(size),mode=0700", "tmpfs", dir.path]
        try mount.run()
        mount.waitUntilExit()
        guard mount.terminationStatus == 0 else {
            print("skipped: could not mount a tmpfs (status \(mount.terminationStatus))")
            return
        }
        defer {
            let umount = Process()
            umount.executableURL = URL(fileURLWithPath: "/bin/umount")
            umount.arguments = [dir.path]
            try? umount.run()
            umount.waitUntilExit()
        }
        try body(dir.url.appendingPathComponent("cache"))
    }

    func configuration() -> DiskCache.Configuration {
        var configuration = DiskCache.Configuration.testing(inlineThreshold: 0)
        configuration.sweepInterval = nil
        configuration.minimumFreeSpace = 0
        configuration.minimumFreeFraction = 0
        return configuration
    }

    @Test func fullDiskFailsTheStoreAndKeepsEveryEarlierEntry() throws {
        try withSmallVolume(size: "2m") { url in
            let cache = try DiskCache(directory: url, configuration: configuration())
            var stored = 0
            var failure: DiskCacheError?
            for i in 0..<100 {
                do {
                    try cache.store(randomData(count: 100_000, seed: UInt64(i)), for: "k\(i)")
                    stored += 1
                } catch let error as DiskCacheError {
                    failure = error
                    break
                }
            }
            #expect(failure?.code == .diskFull, "\(String(describing: failure))")
            #expect(stored > 5)
            // Overwriting an existing key on a full disk fails too, and keeps its earlier value.
            #expect(throws: DiskCacheError.self) { try cache.store(randomData(count: 300_000, seed: 999), for: "k0") }
            for i in 0..<stored { #expect(cache.data(for: "k\(i)") == randomData(count: 100_000, seed: UInt64(i)), "k\(i)") }
            #expect(try FileManager.default.contentsOfDirectory(atPath: url.appendingPathComponent("tmp").path).isEmpty)
            try cache.close()
            let reopened = try DiskCache(directory: url, configuration: configuration())
            #expect(reopened.count == stored)
            #expect(try reopened.verify().isHealthy)
        }
    }

    /// On a full disk, a file moved in is given back (same bytes, same mode) and one copied in
    /// leaves nothing behind; every earlier entry stays.
    @Test func aFullDiskGivesAMovedFileBackAndLeavesNoCopy() throws {
        try withSmallVolume(size: "2m") { url in
            let moved = url.deletingLastPathComponent().appendingPathComponent("moved.bin")
            let body = randomData(count: 150_000, seed: 77)
            try body.write(to: moved)
            try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: moved.path)
            let cache = try DiskCache(directory: url, configuration: configuration())
            var stored = 0
            while stored < 100, (try? cache.store(randomData(count: 100_000, seed: UInt64(stored)), for: "k\(stored)")) != nil {
                stored += 1
            }
            // The last pages too, so that not even a metadata file fits.
            let fillerPath = url.deletingLastPathComponent().path + "/filler"
            #expect(FileManager.default.createFile(atPath: fillerPath, contents: nil))
            let filler = try #require(FileHandle(forWritingAtPath: fillerPath))
            while (try? filler.write(contentsOf: Data(count: 4096))) != nil {}
            try? filler.close()
            do {
                try cache.store(contentsOf: moved, for: "moved", transfer: .move)
                Issue.record("a store succeeded on a full disk")
            } catch let error as DiskCacheError {
                #expect(error.code == .diskFull, "\(error)")
            }
            #expect(try Data(contentsOf: moved) == body)
            #expect(try FileManager.default.attributesOfItem(atPath: moved.path)[.posixPermissions] as? Int == 0o640)

            let elsewhere = TemporaryDirectory()
            try FileManager.default.createDirectory(at: elsewhere.url, withIntermediateDirectories: true)
            let copied = elsewhere.url.appendingPathComponent("copied.bin")
            try body.write(to: copied)
            #expect(throws: DiskCacheError.self) { try cache.store(contentsOf: copied, for: "copied") }
            #expect(try Data(contentsOf: copied) == body)
            #expect(try FileManager.default.contentsOfDirectory(atPath: url.appendingPathComponent("tmp").path).isEmpty)
            for i in 0..<stored { #expect(cache.data(for: "k\(i)") == randomData(count: 100_000, seed: UInt64(i)), "k\(i)") }
            #expect(!cache.contains("moved") && !cache.contains("copied"))
        }
    }

    @Test func freeSpacePurgeFreesRoomOnARealVolumeAndLaterStoresSucceed() throws {
        try withSmallVolume(size: "4m") { url in
            var config = configuration()
            config.minimumFreeSpace = 1 << 20
            let cache = try DiskCache(directory: url, configuration: config)
            // Fill until the disk is full.
            var i = 0
            while i < 200 {
                do { try cache.store(randomData(count: 64_000, seed: UInt64(i)), for: "k\(i)") } catch { break }
                i += 1
            }
            let before = try #require(cache.volumeSpace())
            #expect(before.available < 1 << 20)
            let report = cache.sweep()
            let after = try #require(cache.volumeSpace())
            #expect(report.removedEntries[.freeSpace, default: 0] > 0)
            #expect(after.available >= 1 << 20, "available \(after.available)")
            // The oldest went first, and room is there again for new writes.
            #expect(!cache.contains("k0"))
            #expect(cache.contains("k\(i - 1)"))
            try cache.store(randomData(count: 64_000, seed: 1000), for: "new")
            #expect(cache.data(for: "new") == randomData(count: 64_000, seed: 1000))
        }
    }

    /// A sweep killed with `kill -9` halfway leaves no entry half-removed and, once the next
    /// open's orphan scan has run, no file behind.
    @Test func killDuringASweepLeavesAConsistentCache() throws {
        let dir = TemporaryDirectory()
        let entries = 3000
        do {
            let cache = try DiskCache(directory: dir.cache, configuration: configuration())
            for i in 0..<entries { try cache.store(randomData(count: 100 + i % 50, seed: UInt64(i)), for: "k\(i)") }
            try cache.close()
        }
        let worker = try Worker(["sweep", dir.cache.path])
        #expect(worker.waitFor { $0.hasPrefix("SWEEPING") } != nil)
        Thread.sleep(forTimeInterval: 0.15)
        worker.kill()
        let cache = try DiskCache(directory: dir.cache, configuration: configuration())
        #expect(cache.count < entries, "the sweep had started")
        var present = 0
        for i in 0..<entries where cache.contains("k\(i)") {
            #expect(cache.data(for: "k\(i)") == randomData(count: 100 + i % 50, seed: UInt64(i)), "k\(i)")
            present += 1
        }
        #expect(present == cache.count)
        #expect(cache.statistics.corruptEntriesRemoved == 0)
        try cache.close()
        // Whether or not close cut the orphan scan short, after the next open (whose verify waits
        // for a scan still due) no file is left that no record vouches for.
        let reopened = try DiskCache(directory: dir.cache, configuration: configuration())
        #expect(try reopened.verify().isHealthy)
    }
}

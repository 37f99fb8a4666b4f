import Foundation
import Testing
@testable import DiskCache

/// Format 1 kept the same files in two levels of shards (`ab/cd/<hash>.meta`); format 2 keeps
/// them in one level made up front. These tests lay a cache out as format 1 did, file by file.
struct MigrationTests {
    /// Stores `values` (a small inline body, a body in its own file, an overwritten key that
    /// sits in slot 1), closes, then moves every entry file to its format-1 place and writes
    /// VERSION 1, as a format-1 library would have left the cache. Returns the format-1 paths.
    private func makeFormat1Cache(_ dir: TemporaryDirectory, values: [String: Data]) throws -> [String] {
        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 1024))
        for (key, value) in values { try cache.store(value, for: key) }
        try cache.store(bytes("first"), for: "overwritten")
        try cache.store(bytes("second"), for: "overwritten")
        try cache.close()
        let old = Layout(root: dir.cache.path, version: 1)
        var moved: [String] = []
        let keys = Array(values.keys) + ["overwritten"]
        for key in keys {
            let hash = cache.configuration.keyHasher.hash(key)
            for slot: UInt8 in [0, 1] {
                for (from, to) in [(cache.layout.metaFile(hash, slot: slot), old.metaFile(hash, slot: slot)),
                                   (cache.layout.bodyFile(hash, slot: slot), old.bodyFile(hash, slot: slot))] where fileExists(from) {
                    try FileManager.default.createDirectory(atPath: (to as NSString).deletingLastPathComponent,
                                                            withIntermediateDirectories: true)
                    try FileManager.default.moveItem(atPath: from, toPath: to)
                    moved.append(to)
                }
            }
        }
        try writeFile(dir.cache.appendingPathComponent("VERSION").path, Array("1\n".utf8))
        return moved
    }

    @Test func aFormat1CacheIsMigratedAndKeepsEveryEntry() throws {
        let dir = TemporaryDirectory()
        let values = ["small": bytes("inline"), "large": randomData(count: 5000, seed: 7)]
        let oldFiles = try makeFormat1Cache(dir, values: values)
        #expect(oldFiles.count == 4)  // small.meta, large.meta + large.body, overwritten.1.meta
        // An uncommitted leftover in a format-1 inner shard goes with the migration.
        let orphan = ((oldFiles[0] as NSString).deletingLastPathComponent as NSString).appendingPathComponent(String(repeating: "0", count: 32) + ".meta")
        try writeFile(orphan, [1, 2, 3])

        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 1024))
        for (key, value) in values { #expect(cache.data(for: key) == value) }
        #expect(cache.data(for: "overwritten") == bytes("second"))
        #expect(cache.count == 3)
        #expect(try String(contentsOf: dir.cache.appendingPathComponent("VERSION"), encoding: .utf8) == "swift-disk-cache\n2\nkind DiskCache\n")
        for path in oldFiles + [orphan] { #expect(!fileExists(path)) }
        // No inner shard directory is left, and all 256 shards are there.
        let shards = try FileManager.default.contentsOfDirectory(atPath: dir.cache.path).filter(Layout.isShardName)
        #expect(shards.count == 256)
        for shard in shards {
            let names = try FileManager.default.contentsOfDirectory(atPath: dir.cache.appendingPathComponent(shard).path)
            #expect(!names.contains(where: Layout.isShardName), "\(shard)")
        }
        try cache.store(bytes("new"), for: "after")
        try cache.close()
        let reopened = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(reopened.data(for: "after") == bytes("new"))
        #expect(reopened.data(for: "large") == values["large"])
    }

    @Test func aMigrationCutShortRunsAgainAtTheNextOpen() throws {
        let dir = TemporaryDirectory()
        let values = ["a": bytes("alpha"), "b": randomData(count: 3000, seed: 3)]
        let oldFiles = try makeFormat1Cache(dir, values: values)
        // As if the first migration died after moving one file: VERSION still says 1.
        let first = oldFiles[0]
        let name = (first as NSString).lastPathComponent
        let flat = dir.cache.appendingPathComponent(String(name.prefix(2))).appendingPathComponent(name).path
        try FileManager.default.createDirectory(atPath: (flat as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: first, toPath: flat)

        let cache = try DiskCache(directory: dir.cache, configuration: .testing(inlineThreshold: 1024))
        for (key, value) in values { #expect(cache.data(for: key) == value) }
        #expect(cache.data(for: "overwritten") == bytes("second"))
        #expect(try String(contentsOf: dir.cache.appendingPathComponent("VERSION"), encoding: .utf8) == "swift-disk-cache\n2\nkind DiskCache\n")
    }

    @Test func aFormat1CacheWithoutItsJournalStartsEmptyInFormat2() throws {
        let dir = TemporaryDirectory()
        let oldFiles = try makeFormat1Cache(dir, values: ["k": bytes("v")])
        try FileManager.default.removeItem(at: dir.cache.appendingPathComponent("journal"))
        let cache = try DiskCache(directory: dir.cache, configuration: .testing())
        #expect(cache.count == 0)
        #expect(cache.data(for: "k") == nil)
        for path in oldFiles { #expect(!fileExists(path)) }
        #expect(try String(contentsOf: dir.cache.appendingPathComponent("VERSION"), encoding: .utf8) == "swift-disk-cache\n2\nkind DiskCache\n")
        try cache.store(bytes("again"), for: "k")
        #expect(cache.data(for: "k") == bytes("again"))
    }

    @Test func theInspectorReadsAFormat1CacheWhereItIs() throws {
        let dir = TemporaryDirectory()
        let values = ["small": bytes("inline"), "large": randomData(count: 5000, seed: 7)]
        _ = try makeFormat1Cache(dir, values: values)
        let inspector = try DiskCacheInspector(directory: dir.cache)
        #expect(inspector.summary.formatVersion == 1)
        for (key, value) in values { #expect(inspector.data(for: key) == value) }
        // Inspecting changed nothing: still format 1.
        #expect(try String(contentsOf: dir.cache.appendingPathComponent("VERSION"), encoding: .utf8) == "1\n")
    }
}

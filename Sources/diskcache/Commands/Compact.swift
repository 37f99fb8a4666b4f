import ArgumentParser
import DiskCache
import Foundation

struct Compact: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rewrite the journal now, one record per live entry.",
        discussion: "The cache compacts its journal by itself when most of it is redundant; this does it at once."
    )

    @OptionGroup var cache: CacheOptions
    @OptionGroup var lockWait: LockWaitOptions

    func run() throws {
        let diskCache = try cache.open(waiting: lockWait.wait)
        defer { try? diskCache.close() }
        let journal = cache.url.appendingPathComponent("journal").path
        let before = Self.fileSize(journal)
        try diskCache.compact()
        let entries = diskCache.count
        try diskCache.close()
        let after = Self.fileSize(journal)
        Terminal.writeLine("compacted the journal: \(Stats.size(before)) -> \(Stats.size(after)), \(entries) \(entries == 1 ? "entry" : "entries")")
    }

    static func fileSize(_ path: String) -> Int64 {
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        return (attributes?[.size] as? NSNumber)?.int64Value ?? 0
    }
}

import ArgumentParser
import DiskCache

struct Sweep: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove expired entries, and with --capacity evict down to a size.",
        discussion: """
            Without --capacity, removes the entries whose expiry date has passed. With \
            --capacity SIZE, then evicts entries in the eviction order (S3-FIFO by default) until the cache occupies \
            at most SIZE on disk (bodies, metadata files and journal at block granularity, as \
            `stats` reports under disk usage).
            """
    )

    @OptionGroup var cache: CacheOptions
    @OptionGroup var lockWait: LockWaitOptions

    @Option(help: ArgumentHelp("Evict entries, in the eviction order, down to this size (512K, 64M, 2G).", valueName: "size"),
            transform: ByteSize.argument)
    var capacity: ByteSize?

    func run() throws {
        let diskCache = try cache.open(waiting: lockWait.wait)
        defer { try? diskCache.close() }
        var removed: [(DiskCache.RemovalReason, Int, Int64)] = []
        let expired = diskCache.sweep()
        for reason in DiskCache.RemovalReason.allCases {
            if let count = expired.removedEntries[reason], count > 0 {
                removed.append((reason, count, expired.removedBytes[reason] ?? 0))
            }
        }
        if let capacity {
            let trimmed = diskCache.trim(toSize: capacity.bytes)
            if trimmed.totalRemovedEntries > 0 {
                removed.append((.capacity, trimmed.totalRemovedEntries, trimmed.totalRemovedBytes))
            }
        }
        let remaining = (diskCache.count, diskCache.totalSize)
        try diskCache.close()
        let total = removed.reduce(0) { $0 + $1.1 }
        let bytes = removed.reduce(Int64(0)) { $0 + $1.2 }
        var line = "removed \(total) \(total == 1 ? "entry" : "entries") (\(ByteSize.format(bytes)))"
        if !removed.isEmpty {
            line += ": " + removed.map { "\($0.1) \(Self.words($0.0))" }.joined(separator: ", ")
        }
        Terminal.writeLine(line)
        Terminal.writeLine("\(remaining.0) \(remaining.0 == 1 ? "entry" : "entries") left, \(ByteSize.format(remaining.1)) on disk")
    }

    static func words(_ reason: DiskCache.RemovalReason) -> String {
        switch reason {
        case .capacity: "over capacity"
        case .countLimit: "over the count limit"
        case .freeSpace: "for free space"
        case .expired: "expired"
        case .corrupt: "corrupt"
        case .explicit: "removed"
        }
    }
}

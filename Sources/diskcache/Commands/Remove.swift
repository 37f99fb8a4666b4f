import ArgumentParser
import DiskCache
import Foundation

struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm",
        abstract: "Remove entries by key, or those stored since a date.",
        discussion: """
            rm DIR KEY... removes the given keys; a key with no entry is an error (exit 4) \
            unless --force is given. rm DIR --since DATE removes the entries stored at or after \
            DATE: an ISO 8601 date (2026-11-22T10:00:00Z, or 2026-11-22 for midnight UTC) or a \
            duration meaning that long ago (90s, 10m, 2h, 3d, 1w).
            """
    )

    @OptionGroup var cache: CacheOptions
    @OptionGroup var lockWait: LockWaitOptions

    @Argument(help: "The keys to remove.")
    var keys: [String] = []

    @Option(help: ArgumentHelp("Remove the entries stored at or after this date.", valueName: "date"),
            transform: { try DateText.argument($0, direction: .ago) })
    var since: Date?

    @Flag(name: [.short, .long], help: "Do not complain about keys that have no entry.")
    var force = false

    func validate() throws {
        if keys.isEmpty && since == nil { throw ValidationError("Give one or more keys, or --since DATE") }
        if !keys.isEmpty && since != nil { throw ValidationError("Give keys or --since DATE, not both") }
    }

    func run() throws {
        let diskCache = try cache.open(waiting: lockWait.wait)
        defer { try? diskCache.close() }
        if let since {
            let before = diskCache.count
            try diskCache.removeEntries(modifiedSince: since)
            let removed = before - diskCache.count
            try diskCache.close()
            Terminal.writeLine("removed \(removed) \(removed == 1 ? "entry" : "entries") stored since \(DateText.iso(since))")
            return
        }
        var missing: [String] = []
        var removed = 0
        for key in keys {
            guard diskCache.contains(key) else {
                missing.append(key)
                continue
            }
            try diskCache.removeValue(for: key)
            removed += 1
        }
        try diskCache.close()
        Terminal.writeLine("removed \(removed) \(removed == 1 ? "entry" : "entries")")
        if !missing.isEmpty && !force {
            throw ToolError("No entry for key\(missing.count == 1 ? "" : "s") \(missing.map(Terminal.quoted).joined(separator: ", "))",
                            status: ExitStatus.noSuchEntry)
        }
    }
}

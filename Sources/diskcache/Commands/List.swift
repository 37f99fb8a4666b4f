import ArgumentParser
import DiskCache
import Foundation

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List entries with size, dates and key (read-only).",
        discussion: """
            Sorted by key unless --sort says otherwise: size lists the largest first, accessed \
            and created the most recent first (--reverse flips any order). Dates are UTC.
            """
    )

    enum SortOrder: String, ExpressibleByArgument, CaseIterable {
        case key, size, accessed, created
    }

    @OptionGroup var cache: CacheOptions

    @Option(help: "Sort by key, size, accessed or created.")
    var sort: SortOrder = .key

    @Flag(name: [.short, .long], help: "Reverse the order.")
    var reverse = false

    @Option(name: [.short, .long], help: "List at most this many entries (after sorting).")
    var limit: Int?

    @Flag(help: "Show sizes in bytes instead of KiB, MiB…")
    var bytes = false

    @Flag(help: "Print a JSON array of objects with key, size, created, lastAccessed, expires and metadata.")
    var json = false

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must be zero or more") }
    }

    func run() throws {
        let inspector = try cache.inspectSnapshot()
        var entries = Self.sorted(inspector.entries(), by: sort)
        if reverse { entries.reverse() }
        if let limit { entries = Array(entries.prefix(limit)) }

        if json {
            try JSONOutput.write(entries.map(JSONOutput.object))
            return
        }
        var table = Table([("SIZE", .right), ("CREATED", .left), ("ACCESSED", .left), ("EXPIRES", .left), ("KEY", .left)])
        for entry in entries {
            table.append([
                bytes ? "\(entry.size)" : ByteSize.format(Int64(entry.size)),
                DateText.iso(entry.created),
                DateText.iso(entry.lastAccessed),
                entry.expires.map(DateText.iso) ?? "-",
                Terminal.escaped(entry.key),
            ])
        }
        Terminal.write(table.render())
    }

    /// Ties break by key, so the output never depends on the index's order.
    static func sorted(_ entries: [DiskCache.Entry], by order: SortOrder) -> [DiskCache.Entry] {
        entries.sorted { a, b in
            switch order {
            case .key: return a.key < b.key
            case .size: return a.size != b.size ? a.size > b.size : a.key < b.key
            case .accessed: return a.lastAccessed != b.lastAccessed ? a.lastAccessed > b.lastAccessed : a.key < b.key
            case .created: return a.created != b.created ? a.created > b.created : a.key < b.key
            }
        }
    }
}

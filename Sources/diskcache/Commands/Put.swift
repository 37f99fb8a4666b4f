import ArgumentParser
import DiskCache
import Foundation

struct Put: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Store a file (or standard input) under a key.",
        discussion: """
            Replaces any earlier value of the key. The write is durable (fsync) when the \
            command returns. The directory must already be a cache unless --create is given.
            """
    )

    @OptionGroup var cache: CacheOptions

    @Argument(help: "The key to store under.")
    var key: String

    @Argument(help: ArgumentHelp("The file to store, or - for standard input.", valueName: "file"), completion: .file())
    var file: String

    @Option(help: ArgumentHelp("When the entry expires: an ISO 8601 date, or a duration from now (30m, 2h, 7d).",
                               valueName: "date"),
            transform: { try DateText.argument($0, direction: .fromNow) })
    var expires: Date?

    @Option(name: .customLong("meta"), parsing: .singleValue,
            help: ArgumentHelp("Metadata to keep with the entry (repeatable).", valueName: "name=value"))
    var metadata: [String] = []

    @Flag(help: "Create the cache if the directory does not exist or is empty.")
    var create = false

    func validate() throws {
        for pair in metadata where !pair.contains("=") || pair.hasPrefix("=") {
            throw ValidationError("--meta expects name=value, not \(Terminal.quoted(pair))")
        }
    }

    func run() throws {
        var fields: [String: String] = [:]
        for pair in metadata {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            fields[String(parts[0])] = String(parts[1])
        }
        let data: Data
        if file == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: file))
            } catch {
                throw ToolError("Could not read \(file): \(error.localizedDescription)")
            }
        }
        let diskCache = try cache.open(create: create)
        try diskCache.store(data, for: key, metadata: fields, expires: expires)
        try diskCache.close()
        Terminal.writeLine("stored \(Terminal.quoted(key)) (\(data.count) bytes)")
    }
}

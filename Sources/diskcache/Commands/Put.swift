import ArgumentParser
import DiskCache
import Foundation

struct Put: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Store a file (or standard input) under a key.",
        discussion: """
            Replaces any earlier value of the key. The write is durable (fsync) when the \
            command returns. The directory must already be a cache unless --create is given. \
            A file is copied in (shared blocks where the filesystem offers them); standard \
            input is written as it arrives. Neither is held in memory whole.
            """
    )

    @OptionGroup var cache: CacheOptions
    @OptionGroup var lockWait: LockWaitOptions

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
        if file == "-" {
            // Standard input through a writer, 1 MiB at a time: a body of any size, in bounded memory.
            let diskCache = try cache.open(create: create, waiting: lockWait.wait)
            let writer = try diskCache.makeWriter(for: key, metadata: fields, expires: expires)
            while let piece = try FileHandle.standardInput.read(upToCount: 1 << 20), !piece.isEmpty {
                try writer.append(piece)
            }
            let count = writer.size
            try writer.commit()
            try diskCache.close()
            Terminal.writeLine("stored \(Terminal.quoted(key)) (\(count) bytes)")
            return
        }
        // A file is copied in by the store itself (never read whole into memory); it is checked
        // first, so that a missing file does not leave a new empty cache behind with --create.
        let size: Int64
        do {
            let attributes = try FileManager.default.attributesOfItem(atPath: file)
            guard attributes[.type] as? FileAttributeType == .typeRegular else {
                throw ToolError("Could not read \(file): not a regular file")
            }
            guard FileManager.default.isReadableFile(atPath: file) else {
                throw ToolError("Could not read \(file): permission denied")
            }
            size = (attributes[.size] as? NSNumber)?.int64Value ?? 0
        } catch let error as ToolError {
            throw error
        } catch {
            throw ToolError("Could not read \(file): \(error.localizedDescription)")
        }
        let diskCache = try cache.open(create: create, waiting: lockWait.wait)
        try diskCache.store(contentsOf: URL(fileURLWithPath: file), for: key, metadata: fields, expires: expires)
        let stored = diskCache.entry(for: key).map { Int64($0.size) } ?? size  // what was copied, should the file have changed since
        try diskCache.close()
        Terminal.writeLine("stored \(Terminal.quoted(key)) (\(stored) bytes)")
    }
}

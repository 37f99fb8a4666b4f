import ArgumentParser
import DiskCache
import Foundation
#if canImport(Glibc)
import Glibc
#endif

struct Get: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write an entry's body to standard output or a file (read-only).",
        discussion: """
            The bytes are written exactly as stored, 1 MiB at a time, and their checksum is \
            verified before the last piece is written: a damaged entry fails with exit status 5 \
            (with -o, the file is then left as it was).
            """
    )

    @OptionGroup var cache: CacheOptions

    @Argument(help: "The entry's key.")
    var key: String

    @Option(name: [.short, .long], help: ArgumentHelp("Write to this file instead of standard output.", valueName: "file"),
            completion: .file())
    var output: String?

    func run() throws {
        let inspector = try cache.inspectSnapshot()
        guard let output else {
            // Piece by piece: a body of any size in 1 MiB of memory. A damaged body fails before
            // its last piece is written, and the exit status says so.
            guard try readValue(inspector, into: STDOUT_FILENO, naming: "standard output") else { throw ToolError.noSuchEntry(key) }
            return
        }
        // Something other than a regular file (a device, a FIFO): written to as it is.
        var info = stat()
        if stat(output, &info) == 0, info.st_mode & S_IFMT != S_IFREG {
            let fd = open(output, O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else { throw ToolError("Could not write \(output): \(String(cString: strerror(errno)))") }
            defer { close(fd) }
            guard try readValue(inspector, into: fd, naming: output) else { throw ToolError.noSuchEntry(key) }
            return
        }
        // Into a temporary file beside the output, renamed over it only once the whole body
        // checked out: the output is the value or is left as it was.
        let url = URL(fileURLWithPath: output)
        var temporary = url
        var fd: Int32 = -1
        for _ in 0..<8 where fd < 0 {
            let tag = String(UInt64.random(in: 0...UInt64.max), radix: 36)
            temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).diskcache-\(tag)")
            fd = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            if fd < 0 && errno != EEXIST { break }
        }
        guard fd >= 0 else { throw ToolError("Could not write \(output): \(String(cString: strerror(errno)))") }
        var renamed = false
        defer {
            if !renamed { unlink(temporary.path) }
        }
        do {
            defer { close(fd) }
            guard try readValue(inspector, into: fd, naming: output) else { throw ToolError.noSuchEntry(key) }
        }
        guard rename(temporary.path, output) == 0 else { throw ToolError("Could not write \(output): \(String(cString: strerror(errno)))") }
        renamed = true
    }

    private func readValue(_ inspector: DiskCacheInspector, into fd: Int32, naming name: String) throws -> Bool {
        var inspector = inspector
        for attempt in 0... {
            var wrote = false
            do {
                return try inspector.readValue(for: key) { piece in
                    wrote = true
                    try Terminal.write(piece, to: fd, naming: name)
                }
            } catch let error as DiskCacheError where error.code == .corruptEntry {
                // In a cache that is open, an entry replaced or removed since the snapshot reads
                // as damaged before any of it is written: read a new snapshot and try again.
                if let owner = inspector.summary.openBy, !wrote {
                    if attempt < 3 {
                        inspector = try cache.inspectSnapshot(quietly: true)
                        continue
                    }
                    let process = owner.isEmpty ? "a running process" : "process \(owner)"
                    throw ToolError("The entry for \(Terminal.quoted(key)) kept changing while it was read (the cache is open in \(process)); try again")
                }
                throw ToolError("The entry for \(Terminal.quoted(key)) is damaged (\(error.message)); what was written is not its value")
            }
        }
        return false
    }
}

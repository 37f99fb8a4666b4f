import ArgumentParser
import DiskCache
import Foundation

struct Get: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write an entry's body to standard output or a file (read-only).",
        discussion: "The bytes are written exactly as stored, after their checksum is verified."
    )

    @OptionGroup var cache: CacheOptions

    @Argument(help: "The entry's key.")
    var key: String

    @Option(name: [.short, .long], help: ArgumentHelp("Write to this file instead of standard output.", valueName: "file"),
            completion: .file())
    var output: String?

    func run() throws {
        let inspector = try cache.inspect()
        guard let data = inspector.data(for: key) else { throw ToolError.noSuchEntry(key) }
        if let output {
            do {
                try data.write(to: URL(fileURLWithPath: output), options: .atomic)
            } catch {
                throw ToolError("Could not write \(output): \(error.localizedDescription)")
            }
        } else {
            try Terminal.writeData(data)
        }
    }
}

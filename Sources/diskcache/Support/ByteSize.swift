import ArgumentParser
import DiskCache
import Foundation

/// A size given on the command line: `512`, `512K`, `64M`, `2G`, `1T` (binary units,
/// case-insensitive, optionally followed by `B` or `iB`: `64MB`, `64MiB`).
struct ByteSize: ExpressibleByArgument, Equatable, CustomStringConvertible {
    var bytes: Int64

    init?(argument: String) {
        guard let bytes = Self.parse(argument) else { return nil }
        self.bytes = bytes
    }

    static func parse(_ text: String) -> Int64? { ByteSizeText.parse(text) }

    var description: String { Self.format(bytes) }

    /// For `@Option(transform:)`: a clear message for junk.
    static func argument(_ text: String) throws -> ByteSize {
        guard let size = ByteSize(argument: text) else {
            throw ValidationError("expected a size such as 512, 512K, 64M or 2G (binary units)")
        }
        return size
    }

    /// `1234` → "1.2 KiB"; under 1 KiB, "123 B".
    static func format(_ bytes: Int64) -> String { ByteSizeText.format(bytes) }
}

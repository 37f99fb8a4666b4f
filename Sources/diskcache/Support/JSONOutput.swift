import DiskCache
import Foundation

/// JSON on standard output: pretty, keys sorted, so that output is stable for scripts and diffs.
enum JSONOutput {
    static func encode(_ object: Any) throws -> String {
        let data = try JSONSerialization.data(withJSONObject: object,
                                              options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self)
    }

    static func write(_ object: Any) throws {
        Terminal.writeLine(try encode(object))
    }

    /// An entry as `ls --json` prints it.
    static func object(_ entry: DiskCache.Entry) -> [String: Any] {
        var object: [String: Any] = [
            "key": entry.key,
            "size": entry.size,
            "created": DateText.iso(entry.created),
            "lastAccessed": DateText.iso(entry.lastAccessed),
            "metadata": entry.metadata,
        ]
        object["expires"] = entry.expires.map { DateText.iso($0) } ?? NSNull()
        return object
    }
}

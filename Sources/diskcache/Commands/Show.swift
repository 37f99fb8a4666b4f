import ArgumentParser
import DiskCache
import Foundation

struct Show: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print an entry's metadata property list as JSON or XML (read-only).",
        discussion: """
            Prints the entry's .meta file, a property list holding the key, sizes, dates, the \
            body's XXH3-64 checksum (as a signed 64-bit integer) and the stored metadata. In \
            JSON, dates are ISO 8601 and data is base64. A body stored inline in the file is \
            left out unless --include-body is given.
            """
    )

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case json, xml
    }

    @OptionGroup var cache: CacheOptions

    @Argument(help: "The entry's key.")
    var key: String

    @Option(help: "json or xml (the property list as text).")
    var format: Format = .json

    @Flag(help: "Include a body stored inline in the metadata (base64 in JSON).")
    var includeBody = false

    func run() throws {
        let inspector = try cache.inspectSnapshot()
        guard let bytes = inspector.metadataPropertyList(for: key) else { throw ToolError.noSuchEntry(key) }
        var plist: Any
        do {
            plist = try PropertyListSerialization.propertyList(from: bytes, options: [], format: nil)
        } catch {
            throw ToolError("The entry's metadata is not a readable property list (run verify)")
        }
        if !includeBody, var dictionary = plist as? [String: Any] {
            dictionary["body"] = nil
            plist = dictionary
        }
        switch format {
        case .json:
            try JSONOutput.write(Self.jsonValue(plist))
        case .xml:
            let data = try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0)
            try Terminal.writeData(data)
        }
    }

    /// A property list value made JSON-ready: dates as ISO 8601 strings, data as base64.
    static func jsonValue(_ value: Any) -> Any {
        switch value {
        case let date as Date: return DateText.iso(date)
        case let data as Data: return data.base64EncodedString()
        case let dictionary as [String: Any]: return dictionary.mapValues(jsonValue)
        case let array as [Any]: return array.map(jsonValue)
        default: return value
        }
    }
}

public import Foundation

/// A binary property list through Foundation's `PropertyListEncoder` and `PropertyListDecoder`:
/// compact, and `plutil -p` reads it.
public struct PropertyListCacheCoder: CacheCoder {
    public init() {}

    public func encode<Value: Encodable>(_ value: Value) throws -> Data {
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        return try encoder.encode(value)
    }

    public func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        try PropertyListDecoder().decode(type, from: data)
    }
}

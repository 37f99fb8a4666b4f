public import Foundation

/// JSON through Foundation's `JSONEncoder` and `JSONDecoder`, with sorted keys (so equal values
/// are stored as equal bytes) and dates as ISO 8601 by default.
public struct JSONCacheCoder: CacheCoder {
    public var dateEncodingStrategy: JSONEncoder.DateEncodingStrategy
    public var dateDecodingStrategy: JSONDecoder.DateDecodingStrategy

    public init(dateEncodingStrategy: JSONEncoder.DateEncodingStrategy = .iso8601,
                dateDecodingStrategy: JSONDecoder.DateDecodingStrategy = .iso8601) {
        self.dateEncodingStrategy = dateEncodingStrategy
        self.dateDecodingStrategy = dateDecodingStrategy
    }

    public func encode<Value: Encodable>(_ value: Value) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = dateEncodingStrategy
        return try encoder.encode(value)
    }

    public func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = dateDecodingStrategy
        return try decoder.decode(type, from: data)
    }
}

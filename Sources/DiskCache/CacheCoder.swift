public import Foundation

/// Turns values into the bytes a cache stores and back: what the typed API
/// (``DiskCache/store(value:for:coder:metadata:expires:)-4xwl3``, ``DiskCache/value(_:for:coder:removingIfUndecodable:)-4kx9e``
/// and their ``TieredCache`` forms) uses. ``JSONCacheCoder`` and ``PropertyListCacheCoder``
/// come with the package; conform a type of your own for another format.
public protocol CacheCoder: Sendable {
    func encode<Value: Encodable>(_ value: Value) throws -> Data
    func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value
}

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

/// What the typed API shares between ``DiskCache`` and ``TieredCache``.
enum TypedValues {
    static func encode<Value: Encodable>(_ value: Value, for key: String, with coder: some CacheCoder) throws(DiskCacheError) -> Data {
        do {
            return try coder.encode(value)
        } catch {
            throw DiskCacheError(code: .invalidArgument,
                                 message: "\(String(reflecting: Value.self)) for key \(String(key.prefix(80)).debugDescription) could not be encoded (\(error)); nothing was stored")
        }
    }

    /// The decoded value; on failure removes the entry (with `remove`) when asked, then throws.
    static func decode<Value: Decodable>(_ type: Value.Type, from data: Data, for key: String, with coder: some CacheCoder,
                                         removingIfUndecodable: Bool, remove: () throws -> Void) throws -> Value {
        do {
            return try coder.decode(type, from: data)
        } catch {
            if removingIfUndecodable { try remove() }
            throw DiskCacheError(code: .undecodableValue,
                                 message: "The value stored for key \(String(key.prefix(80)).debugDescription) (\(data.count) bytes) is not a \(String(reflecting: Value.self)) (\(error)); "
                                     + (removingIfUndecodable ? "the entry was removed" : "the entry was kept"))
        }
    }
}

extension DiskCache {
    /// Stores `value`, encoded by `coder` (JSON by default), for `key`, as ``store(_:for:metadata:expires:)-3d9hu``
    /// stores bytes.
    ///
    /// #### Errors
    /// ``DiskCacheError/Code/invalidArgument`` when the coder cannot encode the value (nothing
    /// is stored), and every error of ``store(_:for:metadata:expires:)-3d9hu``.
    public func store<Value: Encodable>(value: Value, for key: String, coder: some CacheCoder = JSONCacheCoder(),
                                        metadata: [String: String] = [:], expires: Date? = nil) throws {
        try store(TypedValues.encode(value, for: key, with: coder), for: key, metadata: metadata, expires: expires)
    }

    /// The value stored for `key`, decoded by `coder` (JSON by default) as a `Value`; nil on a
    /// miss (as ``data(for:)-7qmtl``).
    ///
    /// #### Errors
    /// ``DiskCacheError/Code/undecodableValue`` when the stored bytes are not a `Value` (for
    /// example written by an older version of the type). The entry stays, unless
    /// `removingIfUndecodable` is true: then it is removed first.
    public func value<Value: Decodable>(_ type: Value.Type, for key: String, coder: some CacheCoder = JSONCacheCoder(),
                                        removingIfUndecodable: Bool = false) throws -> Value? {
        guard let data = data(for: key) else { return nil }
        return try TypedValues.decode(type, from: data, for: key, with: coder, removingIfUndecodable: removingIfUndecodable) {
            try removeValue(for: key)
        }
    }
}

extension TieredCache {
    /// Stores `value`, encoded by `coder` (JSON by default), where `policy` allows, as
    /// ``store(_:for:metadata:expires:policy:)-8ih79`` stores bytes.
    public func store<Value: Encodable>(value: Value, for key: String, coder: some CacheCoder = JSONCacheCoder(),
                                        metadata: [String: String] = [:], expires: Date? = nil,
                                        policy: StoragePolicy = .allowed) throws {
        try store(TypedValues.encode(value, for: key, with: coder), for: key, metadata: metadata, expires: expires, policy: policy)
    }

    /// The value stored for `key`, decoded as a `Value`; see ``DiskCache/value(_:for:coder:removingIfUndecodable:)-4kx9e``.
    public func value<Value: Decodable>(_ type: Value.Type, for key: String, coder: some CacheCoder = JSONCacheCoder(),
                                        removingIfUndecodable: Bool = false) throws -> Value? {
        guard let data = data(for: key) else { return nil }
        return try TypedValues.decode(type, from: data, for: key, with: coder, removingIfUndecodable: removingIfUndecodable) {
            try removeValue(for: key)
        }
    }
}

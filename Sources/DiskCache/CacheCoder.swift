public import Foundation

/// Turns values into the bytes a cache stores and back: what the typed API
/// (``DiskCache/store(value:for:coder:metadata:expires:)-5ic6m``, ``DiskCache/value(_:for:coder:removingIfUndecodable:)-4kx9e``
/// and their ``TieredCache`` forms) uses. ``JSONCacheCoder`` and ``PropertyListCacheCoder``
/// come with the package; conform a type of your own for another format.
public protocol CacheCoder: Sendable {
    func encode<Value: Encodable>(_ value: Value) throws -> Data
    func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value
}

extension DiskCache {
    /// Stores `value`, encoded by `coder` (JSON by default), for `key`, as ``store(_:for:metadata:expires:)-9xfei``
    /// stores bytes.
    ///
    /// #### Errors
    /// ``DiskCacheError/Code/invalidArgument`` when the coder cannot encode the value (nothing
    /// is stored), and every error of ``store(_:for:metadata:expires:)-9xfei``.
    /// - Returns: whether it was written (see ``Configuration/admission``).
    @discardableResult
    public func store<Value: Encodable>(value: Value, for key: String, coder: some CacheCoder = JSONCacheCoder(),
                                        metadata: [String: String] = [:], expires: Date? = nil) throws -> Bool {
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

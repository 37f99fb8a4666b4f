package import Foundation

/// What the typed API shares between ``DiskCache``, ``TieredCache`` and the framework drivers:
/// a value's encoding and decoding, and the errors they throw.
package enum TypedValues {
    package static func encode<Value: Encodable>(_ value: Value, for key: String, with coder: some CacheCoder) throws(DiskCacheError) -> Data {
        do {
            return try coder.encode(value)
        } catch {
            throw DiskCacheError(code: .invalidArgument,
                                 message: "\(String(reflecting: Value.self)) for key \(String(key.prefix(80)).debugDescription) could not be encoded (\(error)); nothing was stored")
        }
    }

    /// The decoded value; on failure removes the entry (with `remove`) when asked, then throws.
    package static func decode<Value: Decodable>(_ type: Value.Type, from data: Data, for key: String, with coder: some CacheCoder,
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

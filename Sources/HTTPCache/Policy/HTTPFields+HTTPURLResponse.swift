#if canImport(FoundationNetworking)
public import FoundationNetworking
#else
public import Foundation
#endif
public import HTTPTypes

extension HTTPFields {
    /// The header fields of an `HTTPURLResponse`, sorted by name (Foundation does not keep the
    /// received order, and has already combined repeated fields into one value). A name that is
    /// not a token is dropped.
    public init(_ response: HTTPURLResponse) {
        self.init()
        let pairs = response.allHeaderFields.compactMap { key, value -> (String, String)? in
            guard let name = key as? String else { return nil }
            return (name, "\(value)")
        }
        for (name, value) in pairs.sorted(by: { $0.0 < $1.0 }) {
            append(name: name, value: value)
        }
    }
}

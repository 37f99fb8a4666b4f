#if canImport(FoundationNetworking)
public import FoundationNetworking
#else
public import Foundation
#endif

extension RequestCachePolicy {
    /// The policy matching a `URLRequest.CachePolicy`; unknown future values map to
    /// ``useProtocolCachePolicy``.
    public init(_ policy: URLRequest.CachePolicy) {
        switch policy {
        case .useProtocolCachePolicy: self = .useProtocolCachePolicy
        case .reloadIgnoringLocalCacheData: self = .reloadIgnoringLocalCacheData
        case .reloadIgnoringLocalAndRemoteCacheData: self = .reloadIgnoringLocalAndRemoteCacheData
        case .returnCacheDataElseLoad: self = .returnCacheDataElseLoad
        case .returnCacheDataDontLoad: self = .returnCacheDataDontLoad
        case .reloadRevalidatingCacheData: self = .reloadRevalidatingCacheData
        @unknown default: self = .useProtocolCachePolicy
        }
    }
}

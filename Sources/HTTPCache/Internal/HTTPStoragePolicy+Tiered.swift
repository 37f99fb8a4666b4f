import DiskCache

extension HTTPStoragePolicy {
    /// The storage layer's spelling of the same policy.
    var tiered: TieredCache.StoragePolicy {
        switch self {
        case .allowed: .allowed
        case .allowedInMemoryOnly: .allowedInMemoryOnly
        case .notAllowed: .notAllowed
        }
    }
}

/// Where an entry may live, in the words of `URLCache.StoragePolicy`.
public enum HTTPStoragePolicy: String, Sendable, Hashable, Codable {
    /// In memory and on disk.
    case allowed
    /// In memory only; never written to disk, gone after a restart.
    case allowedInMemoryOnly
    /// Not stored at all.
    case notAllowed
}

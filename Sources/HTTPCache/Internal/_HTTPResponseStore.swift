import DiskCache
import Foundation
import DiskCacheLocking

/// The responses stored under each primary key, on top of a record store.
///
/// Layout: the primary key's own record is the variant list (an empty body; metadata field
/// `variants` holding a JSON array of `{id, policy}`); each variant is a record under
/// `<primary key>\n#variant\n<variant id>` whose body is the response body and whose metadata is
/// ``CachedHTTPResponse/Metadata``. A variant record without a list entry is unreachable and left
/// to the store's eviction; a list entry without its record is skipped when read.
///
/// Thread-safe. Reads take no lock of their own; updates of a variant list are serialised by
/// one lock so that two concurrent stores of different variants both stay listed.
final class _HTTPResponseStore: Sendable {
    struct ListedVariant: Codable, Hashable {
        var id: String
        var policy: HTTPStoragePolicy
    }

    /// At most this many variants are kept per key; the oldest listed goes first.
    static let maximumVariantCount = 16
    static let variantsField = "variants"

    let records: TieredCache
    private let listLock = PthreadMutex(())

    init(records: TieredCache) {
        self.records = records
    }

    static func variantKey(_ primaryKey: String, _ id: String) -> String {
        primaryKey + "\n#variant\n" + id
    }

    private func list(for primaryKey: String) -> [ListedVariant] {
        guard let record = records.record(for: primaryKey),
              let text = record.metadata[Self.variantsField],
              let list = try? JSONDecoder().decode([ListedVariant].self, from: Data(text.utf8))
        else { return [] }
        return list
    }

    /// Every response stored under `primaryKey`, in the order they were first stored.
    func variants(forKey primaryKey: String) -> [CachedHTTPResponse] {
        list(for: primaryKey).compactMap { listed in
            records.record(for: Self.variantKey(primaryKey, listed.id)).flatMap {
                CachedHTTPResponse(body: $0.data, metadata: $0.metadata)
            }
        }
    }

    /// Stores `entry` under `primaryKey`, replacing the variant with the same identity.
    /// Does nothing for a `.notAllowed` entry.
    ///
    /// With `bodyUnchanged` (a 304 refreshing stored headers), an already stored variant gets
    /// its metadata replaced and keeps its body on disk as it is, instead of being rewritten.
    func store(_ entry: CachedHTTPResponse, forKey primaryKey: String, bodyUnchanged: Bool = false) throws {
        guard entry.storagePolicy != .notAllowed else { return }
        let id = entry.variantID
        if bodyUnchanged,
           list(for: primaryKey).contains(ListedVariant(id: id, policy: entry.storagePolicy)),
           try records.updateMetadata(entry.encodedMetadata(), for: Self.variantKey(primaryKey, id), policy: entry.storagePolicy.tiered) {
            return
        }
        try records.store(entry.body, for: Self.variantKey(primaryKey, id), metadata: entry.encodedMetadata(), policy: entry.storagePolicy.tiered)
        try listLock.withLock { _ in
            var list = list(for: primaryKey).filter { $0.id != id }
            list.append(ListedVariant(id: id, policy: entry.storagePolicy))
            while list.count > Self.maximumVariantCount {
                let dropped = list.removeFirst()
                try records.removeValue(for: Self.variantKey(primaryKey, dropped.id))
            }
            try writeList(list, for: primaryKey)
        }
    }

    private func writeList(_ list: [ListedVariant], for primaryKey: String) throws {
        guard !list.isEmpty else {
            try records.removeValue(for: primaryKey)
            return
        }
        let json = String(decoding: try JSONEncoder().encode(list), as: UTF8.self)
        // The list goes to disk when any variant may; otherwise it would outlive a restart
        // pointing at nothing, or be lost while its variants are still on disk.
        let policy: HTTPStoragePolicy = list.contains { $0.policy == .allowed } ? .allowed : .allowedInMemoryOnly
        try records.store(Data(), for: primaryKey, metadata: [Self.variantsField: json], policy: policy.tiered)
    }

    /// Removes every variant stored under `primaryKey`.
    func removeAll(forKey primaryKey: String) throws {
        try listLock.withLock { _ in
            let list = list(for: primaryKey)
            try records.removeValue(for: primaryKey)
            for listed in list {
                try records.removeValue(for: Self.variantKey(primaryKey, listed.id))
            }
        }
    }
}

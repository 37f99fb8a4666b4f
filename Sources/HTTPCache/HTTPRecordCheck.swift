import Foundation
public import DiskCache

extension HTTPURLCache {
    /// An HTTP record in a cache directory that no lookup reaches.
    public struct UnreachableRecord: Hashable, Sendable {
        /// The record's key in the store.
        public var key: String
        /// Why no lookup reaches it.
        public var reason: String
    }

    /// Of `entries` (the records of a cache directory, as `DiskCacheInspector.entries()`
    /// lists them), the HTTP records that no lookup of ``HTTPURLCache`` reaches: what
    /// `diskcache verify` reports, and `diskcache verify --repair` removes.
    ///
    /// A lookup reads the records `<primary key>\n#variant <slot>` with a slot in `0..<16`, and
    /// uses those whose metadata decodes as a response. So a record is unreachable when it holds
    /// a response (metadata that decodes as one, whole) under any other key, is a per-key variant
    /// list (what caches written before record format 2 keep: an empty body and only the field
    /// `variants`, a JSON list of `{id, policy}`; ``HTTPURLCache`` empties such a cache when it
    /// opens it), or sits at a variant's key with metadata that is not a response. Records of any
    /// other shape are not looked at, so a cache that is not an HTTP cache reports nothing.
    public static func unreachableRecords(among entries: some Sequence<DiskCache.Entry>) -> [UnreachableRecord] {
        entries.compactMap { entry -> UnreachableRecord? in
            let isResponse = CachedHTTPResponse(body: Data(), metadata: entry.metadata) != nil
            let isVariantKey = VariantRecords.parseVariantKey(entry.key) != nil
            if isLegacyVariantList(entry) {
                return UnreachableRecord(key: entry.key, reason: "a variant list of the record layout before format 2")
            }
            if isResponse, !isVariantKey {
                return UnreachableRecord(key: entry.key, reason: "a response under a key that is not a variant's (\\n#variant 0 to 15)")
            }
            if isVariantKey, CachedHTTPResponse(body: Data(), metadata: entry.metadata) == nil {
                return UnreachableRecord(key: entry.key, reason: "a variant's key whose metadata is not a stored response")
            }
            return nil
        }
    }

    /// The metadata field of the per-key variant lists that record format 1 kept.
    static let legacyVariantListField = "variants"

    private struct LegacyListedVariant: Decodable {
        var id: String
        var policy: HTTPStoragePolicy
    }

    private static func isLegacyVariantList(_ entry: DiskCache.Entry) -> Bool {
        guard entry.size == 0, entry.metadata.count == 1, let text = entry.metadata[legacyVariantListField],
              VariantRecords.parseVariantKey(entry.key) == nil
        else { return false }
        return (try? JSONDecoder().decode([LegacyListedVariant].self, from: Data(text.utf8))) != nil
    }
}

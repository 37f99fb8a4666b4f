import DiskCache
import Foundation
import DiskCacheLocking

/// The responses stored under each primary key, on top of a record store.
///
/// Layout: each stored response (a *variant*: the request method and the request field values
/// its `Vary` names, ``CachedHTTPResponse/variantID``) is a record of its own, under
/// `<primary key>\n#variant <slot>` with a slot in `0..<16`; its body is the response body and
/// its metadata ``CachedHTTPResponse/Metadata``. There is no per-key list: a lookup asks the
/// store's indexes which of the 16 slots are taken (no file is read for that), so every record
/// is reachable from its key, and each variant has its own creation date, size and place in
/// eviction. Removing by date, evicting for capacity, or losing a record to damage touches that
/// variant alone.
///
/// Thread-safe. Reads take no lock of their own; stores under one key are serialised (by a lock
/// per group of keys), so that two concurrent stores under one key cannot take the same free
/// slot, and a variant is never in two.
final class VariantRecords: Sendable {
    /// At most this many variants are kept per key; storing one more replaces the oldest.
    static let maximumVariantCount = 16
    /// Between the primary key and the slot number in a variant's record key.
    static let slotSeparator = "\n#variant "

    let records: TieredCache
    private let keyLocks = (0..<64).map { _ in PthreadMutex(()) }
    private let slotMemo = PthreadMutex(SlotMemo())

    /// Which slots held a record, per primary key, when ``takenSlots(_:)`` last asked the two
    /// tiers (16 lookups each): it asks again only for a key not here. A store or removal
    /// through this object forgets the key (`forgetSlots(of:)`), and a change by another
    /// instance (seen when the journal is followed) forgets them all, so a slot filled since is
    /// never missed. A slot emptied since without passing here (evicted, expired) is harmless:
    /// its record is simply not found when read.
    private struct SlotMemo {
        var othersEpoch = 0
        /// Bumped by every forget: a lookup that began before one does not record what it found.
        var generation: UInt64 = 0
        var slots: [String: UInt16] = [:]
    }

    /// The memo starts over when it holds this many keys.
    static let slotMemoLimit = 1 << 16

    private func lock(_ primaryKey: String) -> PthreadMutex<Void> {
        var hasher = Hasher()
        hasher.combine(primaryKey)
        return keyLocks[Int(UInt(bitPattern: hasher.finalize()) % UInt(keyLocks.count))]
    }

    init(records: TieredCache) {
        self.records = records
    }

    static func variantKey(_ primaryKey: String, slot: Int) -> String {
        primaryKey + slotSeparator + String(slot)
    }

    /// The primary key and slot of a variant's record key; `nil` for a key that is not one
    /// (an HTTP record this layout never writes, or a record of something else).
    static func parseVariantKey(_ key: String) -> (primaryKey: String, slot: Int)? {
        guard let range = key.range(of: slotSeparator, options: .backwards),
              let slot = Int(key[range.upperBound...]), (0..<maximumVariantCount).contains(slot),
              String(slot) == key[range.upperBound...]
        else { return nil }
        return (String(key[..<range.lowerBound]), slot)
    }

    private func takenSlots(_ primaryKey: String) -> [Int] {
        let epoch = records.othersChangesEpoch()
        let (known, generation) = slotMemo.withLock { memo -> (UInt16?, UInt64) in
            if memo.othersEpoch != epoch {
                memo.slots.removeAll()
                memo.othersEpoch = epoch
                memo.generation &+= 1
            }
            return (memo.slots[primaryKey], memo.generation)
        }
        let bits: UInt16
        if let known {
            bits = known
        } else {
            let taken = records.containing((0..<Self.maximumVariantCount).map { Self.variantKey(primaryKey, slot: $0) })
            bits = taken.indices.reduce(0) { taken[$1] ? $0 | UInt16(1) << $1 : $0 }
            slotMemo.withLock { memo in
                guard memo.generation == generation, memo.othersEpoch == epoch else { return }
                if memo.slots.count >= Self.slotMemoLimit { memo.slots.removeAll() }
                memo.slots[primaryKey] = bits
            }
        }
        return (0..<Self.maximumVariantCount).filter { bits & UInt16(1) << $0 != 0 }
    }

    /// Forgets which slots `primaryKey` (nil: every key) was seen to use. Every change of the
    /// records made through this object calls it (stores and the removals here); records are
    /// changed through nothing else, so the memo stays right.
    private func forgetSlots(of primaryKey: String?) {
        slotMemo.withLock { memo in
            memo.generation &+= 1
            if let primaryKey { memo.slots.removeValue(forKey: primaryKey) } else { memo.slots.removeAll() }
        }
    }

    /// A stored response and the record it is in. `entry.body` is empty until ``load(_:)``.
    struct Variant: Sendable {
        var entry: CachedHTTPResponse
        let recordKey: String
        let isLoaded: Bool
        /// The metadata text `entry` was decoded from.
        let text: String?
    }

    /// Every response stored under `primaryKey`, the least recently stored (by response time)
    /// first. With several, only their metadata files are read (which hold small bodies too),
    /// so that choosing one counts as an access of that one alone on disk: ``load(_:)`` reads
    /// the record of the one chosen.
    ///
    /// With `loadingBodies` false no body is read, even of a single variant (for a caller that
    /// streams the chosen one's body).
    ///
    /// `bodyLimit`: a single variant's body is loaded only when it is at most this long.
    ///
    /// `pageCacheOnly`: the disk tier's files are read only from the page cache; when a read gave
    /// up rather than wait for the disk (it says so), the variants are incomplete.
    func variants(forKey primaryKey: String, loadingBodies: Bool = true, bodyLimit: Int64 = .max,
                  pageCacheOnly: DiskCache.PageCacheOnly? = nil) -> [Variant] {
        let keys = takenSlots(primaryKey).map { Self.variantKey(primaryKey, slot: $0) }
        let loaded = loadingBodies && keys.count == 1
            && (bodyLimit == .max || records.storedSize(for: keys[0]).map { $0 <= bodyLimit } ?? false)
        return keys
            .compactMap { key -> Variant? in
                guard let record = loaded ? records.record(for: key, pageCacheOnly: pageCacheOnly)
                                          : records.recordWithoutBody(for: key, pageCacheOnly: pageCacheOnly),
                      let entry = CachedHTTPResponse(body: record.data, metadata: record.metadata)
                else { return nil }
                return Variant(entry: entry, recordKey: key, isLoaded: loaded, text: record.metadata[CachedHTTPResponse.metadataField])
            }
            .sorted { $0.entry.response.responseTime < $1.entry.response.responseTime }
    }

    /// ``variants(forKey:loadingBodies:bodyLimit:)`` answered from memory alone, with the body:
    /// nil unless a single variant is stored and the memory tier holds it (then no file is read).
    func variantsInMemory(forKey primaryKey: String) -> [Variant]? {
        guard let found = soleRecordInMemory(forKey: primaryKey) else { return nil }
        guard let (key, record) = found else { return [] }
        guard let entry = CachedHTTPResponse(body: record.data, metadata: record.metadata) else { return nil }
        return [Variant(entry: entry, recordKey: key, isLoaded: true, text: record.metadata[CachedHTTPResponse.metadataField])]
    }

    /// The record of the single response stored under `primaryKey`, from memory, undecoded:
    /// `.some(nil)` when nothing is stored, nil when several are or the memory tier does not
    /// hold it.
    func soleRecordInMemory(forKey primaryKey: String) -> (key: String, record: TieredCache.Record)?? {
        let slots = takenSlots(primaryKey)
        if slots.isEmpty { return .some(nil) }
        guard slots.count == 1 else { return nil }
        let key = Self.variantKey(primaryKey, slot: slots[0])
        guard let record = records.recordInMemory(for: key) else { return nil }
        return (key, record)
    }

    /// `variant` with its body; `nil` when its record has gone or now holds another variant.
    func load(_ variant: Variant) -> CachedHTTPResponse? {
        if variant.isLoaded { return variant.entry }
        guard let record = records.record(for: variant.recordKey),
              let entry = CachedHTTPResponse(body: record.data, metadata: record.metadata),
              entry.variantID == variant.entry.variantID
        else { return nil }
        return entry
    }

    /// Stores `entry` under `primaryKey`, replacing the variant with the same identity (else
    /// taking a free slot, else replacing the least recently stored variant, by response time,
    /// which the metadata keeps to the sub-millisecond). Does nothing for a `.notAllowed` entry.
    ///
    /// `refreshing` (a 304 or a HEAD refreshing stored headers) is the response time of the
    /// stored response `entry` updates. When the variant's record no longer holds that response
    /// (a new response was stored for it since it was read), nothing is stored: the new one is
    /// kept whole, never given the old one's header fields. With `bodyUnchanged` as well, the
    /// record keeps its body on disk as it is and only its metadata is replaced (when its storage
    /// policy is the entry's), instead of being rewritten.
    ///
    /// With `bodyFile` the body is the contents of that file, brought in as `transfer` says
    /// (``TieredCache/store(contentsOf:for:metadata:expires:transfer:policy:)-5brdm``), with its
    /// size and checksum when `written` gives them, and `entry.body` is ignored.
    ///
    /// With `onlyMetadata` (a caller that does not hold the body), nothing but the metadata is
    /// ever written: when the record cannot be updated in place, nothing is stored.
    func store(_ entry: CachedHTTPResponse, forKey primaryKey: String, refreshing: Date? = nil,
               bodyUnchanged: Bool = false, onlyMetadata: Bool = false,
               bodyFile: (url: URL, transfer: DiskCache.FileTransfer, written: DiskCache.WrittenBody?)? = nil) throws {
        guard entry.storagePolicy != .notAllowed else { return }
        let id = entry.variantID
        // After the records changed, whatever happened (a failed store may have changed some).
        defer { forgetSlots(of: primaryKey) }
        try lock(primaryKey).withLock { _ in
            var same: (slot: Int, policy: HTTPStoragePolicy, responseTime: Date)?
            let taken = takenSlots(primaryKey)
            var free = (0..<Self.maximumVariantCount).first { !taken.contains($0) }
            var oldest: (slot: Int, stored: Date)?
            // Only the slots in use are read (a slot remembered as taken may have emptied since).
            for slot in taken {
                let key = Self.variantKey(primaryKey, slot: slot)
                guard let record = records.recordWithoutBody(for: key) else {
                    if free.map({ slot < $0 }) ?? true { free = slot }
                    continue
                }
                let stored = CachedHTTPResponse(body: Data(), metadata: record.metadata)
                if let stored, stored.variantID == id {
                    if same == nil {
                        same = (slot, stored.storagePolicy, stored.response.responseTime)
                    } else {
                        try records.removeValue(for: key)  // never two records for one variant
                    }
                } else if let stored, oldest.map({ stored.response.responseTime < $0.stored }) ?? true {
                    oldest = (slot, stored.response.responseTime)
                } else if stored == nil {
                    oldest = (slot, .distantPast)  // not a response: the first to go
                }
            }
            if let refreshing, let same, same.responseTime != refreshing { return }
            let slot = same?.slot ?? free ?? oldest?.slot ?? 0
            let key = Self.variantKey(primaryKey, slot: slot)
            if refreshing != nil, bodyUnchanged, same?.policy == entry.storagePolicy,
               try records.updateMetadata(entry.encodedMetadata(), for: key, policy: entry.storagePolicy.tiered) {
                return
            }
            if onlyMetadata { return }
            if let bodyFile {
                try records.store(contentsOf: bodyFile.url, for: key, metadata: entry.encodedMetadata(),
                                  expires: nil, transfer: bodyFile.transfer, policy: entry.storagePolicy.tiered,
                                  written: bodyFile.written)
            } else {
                try records.store(entry.body, for: key, metadata: entry.encodedMetadata(), policy: entry.storagePolicy.tiered)
            }
        }
    }

    /// Removes the variant with identity `variantID` stored under `primaryKey`, if there is one.
    func remove(variantID: String, forKey primaryKey: String) throws {
        defer { forgetSlots(of: primaryKey) }
        try lock(primaryKey).withLock { _ in
            for slot in takenSlots(primaryKey) {
                let key = Self.variantKey(primaryKey, slot: slot)
                if let record = records.recordWithoutBody(for: key),
                   CachedHTTPResponse(body: Data(), metadata: record.metadata)?.variantID == variantID {
                    try records.removeValue(for: key)
                }
            }
        }
    }

    /// Removes the record `recordKey`, a variant of `primaryKey` (as a purge by URL prefix finds
    /// it among the records on disk).
    func removeRecord(_ recordKey: String, primaryKey: String) throws {
        defer { forgetSlots(of: primaryKey) }
        try lock(primaryKey).withLock { _ in try records.removeValue(for: recordKey) }
    }

    /// Removes every record, of every key.
    func removeEverything() throws {
        defer { forgetSlots(of: nil) }
        try records.removeAll()
    }

    /// Removes the records stored at or after `date`, each by its own date.
    func removeRecords(modifiedSince date: Date) throws {
        defer { forgetSlots(of: nil) }
        try records.removeEntries(modifiedSince: date)
    }

    /// Removes every variant stored under `primaryKey`.
    func removeAll(forKey primaryKey: String) throws {
        defer { forgetSlots(of: primaryKey) }
        try lock(primaryKey).withLock { _ in
            for slot in takenSlots(primaryKey) {
                try records.removeValue(for: Self.variantKey(primaryKey, slot: slot))
            }
        }
    }
}

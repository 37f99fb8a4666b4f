#if canImport(FoundationNetworking)
package import FoundationNetworking
#endif
package import Foundation
package import DiskCache
package import HTTPTypes
#if canImport(Glibc)
import Glibc
#endif

/// The HTTP responses a cache holds, per key and variant, on the two-tier store, and what a
/// caching proxy does with them: stored responses looked up without their bodies, bodies as
/// chunks or as checked open files, a body stored from a file, 304s and HEADs applied to
/// metadata alone, purges. `HTTPURLCache` is `URLCache`'s surface over one of these;
/// `diskcache-server` and the Hummingbird middleware use it directly. Package access: no
/// library user sees it.
///
/// Thread-safe: every stored property is an immutable `let` of a `Sendable` type.
package final class HTTPResponseStore: Sendable {
    /// The RFC 9111 rules the cache and its clients apply.
    package let engine: CachePolicyEngine
    /// Maps requests to keys.
    package let keyProvider: any CacheKeyProvider
    /// The hook run before every store through ``storeThrowing(_:for:refreshing:bodyFile:onlyMetadata:)``;
    /// `nil` stores everything offered (see ``HTTPURLCache/willStore``).
    package let willStore: HTTPURLCache.WillStoreHandler?
    /// The responses, per key and variant.
    let responses: VariantRecords

    /// Opens (or creates) the store, its disk tier opened with `diskConfiguration`, whose kind
    /// and application version are set here (see ``HTTPURLCache/init(memoryCapacity:diskCapacity:directory:engine:keyProvider:willStore:)``).
    package init(
        memoryCapacity: Int = 4 << 20,
        diskCapacity: Int = 20 << 20,
        directory: URL?,
        engine: CachePolicyEngine = CachePolicyEngine(),
        keyProvider: any CacheKeyProvider = DefaultCacheKeyProvider(),
        willStore: HTTPURLCache.WillStoreHandler? = nil,
        diskConfiguration: DiskCache.Configuration = DiskCache.Configuration()
    ) throws {
        self.engine = engine
        self.keyProvider = keyProvider
        self.willStore = willStore
        var configuration = diskConfiguration
        configuration.kind = HTTPURLCache.diskKind(engine.mode)
        configuration.applicationVersion = HTTPURLCache.recordFormatVersion
        // A response's records (its variants and their list) are written together or not at all.
        configuration.admission = .everyStore
        responses = VariantRecords(records: try TieredCache(
            memoryCapacity: memoryCapacity, diskCapacity: Int64(diskCapacity),
            directory: diskCapacity > 0 ? directory : nil, configuration: configuration
        ))
    }

    // MARK: - Storing

    /// Runs ``willStore`` and stores the result; returns what was stored. `refreshing` is the
    /// response time of the stored response `entry` updates with a 304's or a HEAD's header
    /// fields (its body is that response's): then only the metadata is rewritten, unless the
    /// hook changed the body, and nothing is stored if that response was replaced meanwhile.
    ///
    /// `bodyFile`: the body is that file's (`entry.body` is empty), moved into the cache
    /// (linked in when on its filesystem), as by
    /// ``HTTPURLCache/storeCachedResponse(_:bodyContentsOf:for:userInfo:storagePolicy:transfer:)-20uba``
    /// (the hook sees the empty body; a body it returns is stored in place of the file's).
    /// `onlyMetadata`: the caller does not hold the body (a 304 applied to a body held open in a
    /// file): nothing but the metadata is written, or nothing.
    @discardableResult
    package func store(_ entry: CachedHTTPResponse, for request: URLRequest, refreshing: Date? = nil,
                       bodyFile: URL? = nil, onlyMetadata: Bool = false) -> CachedHTTPResponse? {
        try? storeThrowing(entry, for: request, refreshing: refreshing, bodyFile: bodyFile.map { ($0, .move, nil) },
                           onlyMetadata: onlyMetadata)
    }

    /// ``store(_:for:refreshing:bodyFile:onlyMetadata:)``, throwing what the store throws; nil
    /// when `entry` or what ``willStore`` makes of it may not be stored. Every response stored
    /// goes through here. `bodyFile` with `.move`: taken into the cache (linked, no bytes
    /// copied, when on the cache's filesystem), and not read to hash it when its
    /// ``DiskCache/WrittenBody`` is given.
    @discardableResult
    package func storeThrowing(_ entry: CachedHTTPResponse, for request: URLRequest, refreshing: Date? = nil,
                               bodyFile: (url: URL, transfer: DiskCache.FileTransfer, written: DiskCache.WrittenBody?)? = nil,
                               onlyMetadata: Bool = false) throws -> CachedHTTPResponse? {
        guard entry.storagePolicy != .notAllowed, let key = keyProvider.key(for: request) else { return nil }
        guard let final = willStore.map({ $0(entry, request) }) ?? entry, final.storagePolicy != .notAllowed else { return nil }
        try responses.store(final, forKey: key, refreshing: refreshing,
                            bodyUnchanged: refreshing != nil && final.body == entry.body, onlyMetadata: onlyMetadata,
                            bodyFile: bodyFile.flatMap { final.body.isEmpty ? $0 : nil })
        return final
    }

    /// Removes every stored response.
    package func removeAll() throws {
        try responses.removeEverything()
    }
}

// MARK: - What a caching proxy asks

extension HTTPResponseStore {
    /// A stored response (without its body) and the record it is in.
    package struct StoredVariant: Sendable {
        /// The response; its `body` is empty unless ``isLoaded``.
        package let entry: CachedHTTPResponse
        package let recordKey: String
        /// `entry.body` is the body, read (and checked) with the metadata.
        package let isLoaded: Bool
        /// The record's metadata text `entry` was read from (nil for one made otherwise): what
        /// ``HTTPResponseStore/storedResponseInMemory(forKey:)`` compares.
        package let metadataText: String?

        package init(entry: CachedHTTPResponse, recordKey: String, isLoaded: Bool = false, metadataText: String? = nil) {
            self.entry = entry
            self.recordKey = recordKey
            self.isLoaded = isLoaded
            self.metadataText = metadataText
        }

        /// The variant among `variants` whose response is `response` (the one a policy decision
        /// chose). A decision's stored response is always one of those it was given, so with one
        /// variant nothing is compared (comparing every header field was about 2 % of a 1 KB
        /// hit's CPU in the server).
        package static func holding(_ response: StoredResponse?, among variants: [StoredVariant]) -> StoredVariant? {
            guard let response else { return nil }
            if variants.count == 1 { return variants[0] }
            return variants.first { $0.entry.response == response }
        }
    }

    /// The key the key provider gives the request `request()` makes, whose method is `method`
    /// and URL `url`; nil when the provider bypasses it. With ``DefaultCacheKeyProvider`` and
    /// a method other than POST the key is the method and the URL alone, and the request is
    /// not made: for a server that answers hits without building a `URLRequest` (whose method
    /// and header fields cost more than the rest of the lookup).
    package func key(method: String, url: URL, request: () -> URLRequest) -> String? {
        if keyProvider is DefaultCacheKeyProvider, method != "POST" {
            return CachePolicyEngine.primaryKey(method: method, url: url)
        }
        return keyProvider.key(for: request())
    }

    /// Every response stored under `key` (from ``key(method:url:request:)``), without bodies
    /// but for a single one of at most `bodyLimit` bytes (read from memory, or from disk and
    /// then kept in memory). With `pageCacheOnly`, files are read only from the page cache (see
    /// `DiskCache.PageCacheOnly`): when it says a read gave up, the list is incomplete.
    package func storedVariants(forKey key: String, bodyLimit: Int64 = -1,
                                pageCacheOnly: DiskCache.PageCacheOnly? = nil) -> [StoredVariant] {
        responses.variants(forKey: key, loadingBodies: bodyLimit >= 0, bodyLimit: max(bodyLimit, 0), pageCacheOnly: pageCacheOnly)
            .map { StoredVariant(entry: $0.entry, recordKey: $0.recordKey, isLoaded: $0.isLoaded, metadataText: $0.text) }
    }

    /// ``storedVariants(forKey:bodyLimit:)`` when it can be answered without reading a file
    /// (cheap enough for any thread): nothing stored, or a single response the memory tier
    /// holds with its body. Nil when answering needs the disk (ask on an I/O thread).
    package func storedVariantsInMemory(forKey key: String) -> [StoredVariant]? {
        responses.variantsInMemory(forKey: key)?.map {
            StoredVariant(entry: $0.entry, recordKey: $0.recordKey, isLoaded: true, metadataText: $0.text)
        }
    }

    /// The single response stored under `key`, as the memory tier holds it: its record, its
    /// body and the text that alone decides its ``StoredVariant/entry`` (the metadata
    /// ``CachedHTTPResponse/init(body:metadata:)`` decodes). Nil when nothing or several
    /// responses are stored, or the memory tier does not hold it. Nothing is decoded: for a
    /// caller that keeps what it derived from a response and must know whether it is still the
    /// one stored (the text carries the response's request and response times at the clock's full
    /// precision, a fraction of a microsecond, so two responses stored from two exchanges
    /// never share it).
    package func storedResponseInMemory(forKey key: String) -> (recordKey: String, text: String, body: Data)? {
        guard let found = responses.soleRecordInMemory(forKey: key), let (recordKey, record) = found,
              let text = record.metadata[CachedHTTPResponse.metadataField]
        else { return nil }
        return (recordKey, text, record.data)
    }

    /// `variant`'s body as chunks read as they are asked for (the last only after the whole body
    /// matched its checksum); `nil` when its record has gone or now holds another response.
    package func body(of variant: StoredVariant, chunkSize: Int = 1 << 20) async throws -> DiskCache.Chunks? {
        guard let chunks = try await responses.records.chunks(for: variant.recordKey, chunkSize: chunkSize),
              Self.record(chunks.metadata, holds: variant)
        else { return nil }
        return chunks
    }

    /// Whether a record whose metadata is `metadata` still holds `variant`'s response (not one
    /// stored in its slot since). The same metadata text as the variant was read from is the
    /// same response (the text carries its times at the clock's full precision): then nothing
    /// is decoded a second time. Any other text is decoded and compared.
    private static func record(_ metadata: [String: String], holds variant: StoredVariant) -> Bool {
        if let text = variant.metadataText, metadata[CachedHTTPResponse.metadataField] == text { return true }
        guard let entry = CachedHTTPResponse(body: Data(), metadata: metadata) else { return false }
        return entry.variantID == variant.entry.variantID && entry.response == variant.entry.response
    }

    /// Bytes of the disk tier's body files kept mapped for ``checkedBody(of:sizeLimit:)``
    /// (`DiskCache.mappedBodyCapacity`; 0, the default, maps none). 0 without a disk tier.
    package var mappedBodyCapacity: Int64 {
        get { responses.records.disk?.mappedBodyCapacity ?? 0 }
        set { responses.records.disk?.mappedBodyCapacity = newValue }
    }

    /// `variant`'s body checked whole against its checksum and handed out as an open file or,
    /// as `copying` allows, a copy made as it was checked (each closed or freed when the
    /// `DiskCache.CheckedBody` goes, unless released), or, when it is in memory or inline, as bytes; `nil`
    /// when its record has gone, now holds another response, or failed its checksum (and was
    /// removed), and when the index records a body larger than `sizeLimit` (nothing is read
    /// then). Blocking: call it on an I/O thread, or with `pageCacheOnly` (then nil too when a
    /// read gave up rather than wait for the disk, which it says).
    package func checkedBody(of variant: StoredVariant, sizeLimit: Int64 = .max, copying: DiskCache.BodyCopying? = nil,
                             pageCacheOnly: DiskCache.PageCacheOnly? = nil) throws -> DiskCache.CheckedBody? {
        guard responses.records.storedSize(for: variant.recordKey).map({ $0 <= sizeLimit }) ?? false,
              let body = try responses.records.checkedBody(for: variant.recordKey, copying: copying, pageCacheOnly: pageCacheOnly)
        else { return nil }
        // Another response's body is let go (closed or freed) here.
        guard Self.record(body.metadata, holds: variant) else { return nil }
        return body
    }

    /// How a refresh (``applyNotModified(_:validated:key:requestTime:responseTime:through:)``,
    /// ``freshenAfterHEAD(_:request:key:requestTime:responseTime:through:)``) stores what it
    /// rewrote: through ``store(_:for:refreshing:bodyFile:onlyMetadata:)`` for `request`, so that
    /// ``willStore`` sees it (the caching client), rather than as it is (the server and the
    /// middleware, which run no hook). With `validatedBody`, the validated response is stored
    /// with the body it holds, for the hook to see; every other store rewrites metadata only.
    package struct Refreshing {
        let request: URLRequest
        let validatedBody: Bool

        package init(request: URLRequest, validatedBody: Bool = false) {
            self.request = request
            self.validatedBody = validatedBody
        }
    }

    /// Applies a 304's header fields to the stored responses it selects (RFC 9111 §4.3.4; the
    /// validated one when it selects none, a server that omits validators from its 304s),
    /// rewriting their metadata only (see ``Refreshing``), and returns the validated response
    /// as updated. Blocking: call it on an I/O thread.
    package func applyNotModified(_ headers: HTTPFields, validated: CachedHTTPResponse, key: String,
                                  requestTime: Date, responseTime: Date, through refreshing: Refreshing? = nil) -> CachedHTTPResponse {
        let variants = responses.variants(forKey: key, loadingBodies: false)
        let validatedIndex = variants.firstIndex { $0.entry.variantID == validated.variantID }
        var indices = CachePolicyEngine.storedResponsesToUpdate(by: headers, among: variants.map(\.entry.response))
        if indices.isEmpty, let validatedIndex { indices = [validatedIndex] }
        var result = validated
        result.response = CachePolicyEngine.updating(result.response, with: headers, requestTime: requestTime, responseTime: responseTime)
        for index in indices {
            // The others' bodies are not read: only their metadata is rewritten.
            let isValidated = index == validatedIndex
            // The client's validated response is the one it holds (its body, if loaded, goes
            // with it); the server and the middleware rewrite the stored one as read now.
            var entry = isValidated && refreshing != nil ? validated : variants[index].entry
            let stored = entry.response.responseTime
            entry.response = CachePolicyEngine.updating(entry.response, with: headers, requestTime: requestTime, responseTime: responseTime)
            storeRefreshed(entry, key: key, refreshing: stored, through: refreshing, withBody: isValidated)
            if isValidated { result = entry }
        }
        return result
    }

    private func storeRefreshed(_ entry: CachedHTTPResponse, key: String, refreshing stored: Date,
                                through refreshing: Refreshing?, withBody: Bool = false) {
        if let refreshing {
            _ = store(entry, for: refreshing.request, refreshing: stored, onlyMetadata: !(withBody && refreshing.validatedBody))
        } else {
            try? responses.store(entry, forKey: key, refreshing: stored, bodyUnchanged: true, onlyMetadata: true)
        }
    }

    /// Whether a stored GET response is the one a 200 to a HEAD describes (RFC 9111 §4.3.5):
    /// every validator the HEAD response has (`ETag`, `Last-Modified`) equals the stored
    /// response's, and its `Content-Length`, if it has one, equals the stored response's
    /// `Content-Length` field (`bodySize` when the stored response has none; a transport may
    /// have decoded a compressed body).
    static func headResponse(_ headers: HTTPFields, matches stored: StoredResponse, bodySize: Int?) -> Bool {
        func length(_ text: String) -> Int? { Int(text.trimmingCharacters(in: .whitespaces)) }
        let storedLength = stored.headers[.contentLength].flatMap(length) ?? bodySize
        return [HTTPField.Name.eTag, .lastModified].allSatisfy { name in headers[name].map { stored.headers[name] == $0 } ?? true }
            && headers[.contentLength].map { length($0) == storedLength } ?? true
    }

    /// A 200 to a HEAD of `request` updates the stored GET responses the HEAD could have been
    /// answered with (RFC 9111 §4.3.5): each that ``headResponse(_:matches:bodySize:)`` gets
    /// its header fields, in its metadata only (the body on disk is not read or rewritten; see
    /// ``Refreshing``); each that does not is removed, which the RFC allows in place of marking
    /// it stale. A stored GET response's body is never replaced by a HEAD. Blocking: call it on
    /// an I/O thread.
    package func freshenAfterHEAD(_ headers: HTTPFields, request: CacheRequest, key: String,
                                  requestTime: Date, responseTime: Date, through refreshing: Refreshing? = nil) {
        for variant in responses.variants(forKey: key, loadingBodies: false)
        where variant.entry.response.requestMethod == "GET" && CachePolicyEngine.varyMatches(variant.entry.response, request: request) {
            let entry = variant.entry
            let bodySize = responses.records.storedSize(for: variant.recordKey).map { Int($0) }
            if Self.headResponse(headers, matches: entry.response, bodySize: bodySize) {
                var updated = entry
                updated.response = CachePolicyEngine.updating(entry.response, with: headers, requestTime: requestTime, responseTime: responseTime)
                storeRefreshed(updated, key: key, refreshing: entry.response.responseTime, through: refreshing)
            } else {
                try? responses.remove(variantID: entry.variantID, forKey: key)
            }
        }
    }

    /// Removes what is stored for each of `urls` (after an unsafe method's success).
    package func invalidate(_ urls: [URL]) {
        for key in urls.flatMap({ keyProvider.invalidationKeys(for: $0) }) { try? responses.removeAll(forKey: key) }
    }

    /// Removes what is stored for a GET (and HEAD) of `url`; returns whether anything was.
    package func purge(_ url: URL) throws -> Bool {
        var found = false
        for key in keyProvider.invalidationKeys(for: url) {
            if !responses.variants(forKey: key, loadingBodies: false).isEmpty { found = true }
            try responses.removeAll(forKey: key)
        }
        // Durable on return, also when an eviction not yet synced took what was found.
        try responses.records.disk?.syncRemovals()
        return found
    }

    /// Removes what is stored for GETs (and HEADs) of every URL that begins with `urlPrefix`;
    /// returns how many stored responses went. Reads the metadata of every record on disk (a
    /// snapshot of the journal taken now): a scan, for an operator's purge, not a request path.
    package func purge(prefix urlPrefix: String) throws -> Int {
        guard let directory = responses.records.disk?.directory else { return 0 }
        // Keys as `CachePolicyEngine.primaryKey(method:url:)` makes them (HEAD shares GET's).
        let keyPrefix = "GET " + urlPrefix
        var removed = 0
        for entry in try DiskCacheInspector(directory: directory, whileOpen: true).entries() {
            guard let (primaryKey, _) = VariantRecords.parseVariantKey(entry.key), primaryKey.hasPrefix(keyPrefix),
                  responses.records.contains(entry.key) else { continue }
            try responses.removeRecord(entry.key, primaryKey: primaryKey)
            removed += 1
        }
        try responses.records.disk?.syncRemovals()
        return removed
    }

    /// Closes the disk tier (a clean shutdown: the journal records it); later calls fail.
    package func closeStore() throws {
        try responses.records.disk?.close()
    }

    /// Throws what ``DiskCache/checkDirectory()`` throws for the disk tier (nothing for a
    /// memory-only cache): its directory or journal went away while it was open.
    package func checkStore() throws {
        try responses.records.disk?.checkDirectory()
    }

    /// Records and bytes in the disk tier.
    package func storeStatistics() -> (entries: Int, bytes: Int64) {
        (responses.records.disk?.count ?? 0, responses.records.currentDiskUsage)
    }

    /// Whether there is a disk tier, whose `tmp/` can take bodies on their way in
    /// (``makeTemporaryFile()``).
    package var hasDiskTier: Bool { responses.records.disk != nil }

    /// A new empty file for a body on its way in, in the disk tier's `tmp/` (see
    /// `DiskCache.makeTemporaryFile()`: stored with `.move`, it is linked in without a copy),
    /// else in the system's temporary directory.
    package func makeTemporaryFile() throws -> (url: URL, fileDescriptor: Int32) {
        if let disk = responses.records.disk { return try disk.makeTemporaryFile() }
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("HTTPCache-\(UUID().uuidString)")
        let fd = open(url.path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw DiskCacheError(code: .ioFailure, message: "Could not create a file for a response body", path: url.path, errno: errno)
        }
        return (url, fd)
    }
}

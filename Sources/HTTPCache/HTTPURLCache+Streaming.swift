public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
public import DiskCache

// Responses whose bodies are too large to hold in memory: stored from a file (what
// `URLSession`'s download tasks hand out), read as chunks or as a file. Bodies above the
// store's `TieredCache.largeBodyThreshold` (5 % of the memory capacity by default, `URLCache`'s
// rule) never enter the memory tier, however they were stored.

extension HTTPURLCache {
    /// Stores `response` for `request` with the body in the file at `bodyFile`, without reading
    /// the file into memory: what a download task's file is stored with.
    ///
    /// As ``storeCachedResponse(_:for:)-9vcqg``: nothing is stored when `storagePolicy` is
    /// `.notAllowed`, when ``willStore`` returns `nil` (it sees the response with an empty body;
    /// a body it returns is stored in place of the file's), or when the key provider bypasses the
    /// request; the file is then left as it is. Unlike it, a failure throws, so that a caller
    /// knows the response was not stored (the file is then where it was, untouched).
    ///
    /// A response stored `.allowedInMemoryOnly` is necessarily read into memory.
    ///
    /// - Parameters:
    ///   - response: the response, as a download task returns it.
    ///   - bodyFile: the file holding its body.
    ///   - request: the request it answers (its key and its `Vary` values).
    ///   - userInfo: kept with the response, as `CachedURLResponse.userInfo` (property-list values only).
    ///   - storagePolicy: where it may be kept, as for `CachedURLResponse`.
    ///   - transfer: `.copy` leaves the file where it is; `.move` takes it (linked into the
    ///     cache when it is on the same filesystem, no bytes copied). See `DiskCache.FileTransfer`.
    /// - Throws: `DiskCacheError` (a missing file is `DiskCacheError.Code.notFound`); the
    ///   earlier response stays, and the file is where it was.
    public func storeCachedResponse(_ response: URLResponse, bodyContentsOf bodyFile: URL, for request: URLRequest,
                                    userInfo: [AnyHashable: Any]? = nil,
                                    storagePolicy: URLCache.StoragePolicy = .allowed,
                                    transfer: DiskCache.FileTransfer = .copy) throws {
        guard let cacheRequest = CacheRequest(request) else { return }
        let now = Date()
        let cached = CachedURLResponse(response: response, data: Data(), userInfo: userInfo, storagePolicy: storagePolicy)
        try responseStore.storeThrowing(Self.entry(from: cached, for: cacheRequest, requestTime: now, responseTime: now),
                          for: request, bodyFile: (bodyFile, transfer, nil))
    }

    /// The stored response for `request` (chosen as ``cachedResponse(for:)-7d07k`` chooses it),
    /// with an empty `body`, and its body as chunks read from disk as they are asked for; `nil`
    /// when there is none. See `DiskCache.chunks(for:chunkSize:)` for when a damaged body is
    /// noticed: the last chunk comes only after the whole body matched its checksum.
    public func cachedResponseBody(for request: URLRequest, chunkSize: Int = 1 << 20) async throws
        -> (response: CachedHTTPResponse, body: DiskCache.Chunks)? {
        guard let chosen = try await BlockingIOPool.shared.run({ self.chosenVariant(for: request) }),
              let chunks = try await responses.records.chunks(for: chosen.recordKey, chunkSize: chunkSize),
              let entry = Self.sameVariant(chosen, metadata: chunks.metadata)
        else { return nil }
        return (entry, chunks)
    }

    /// Calls `body` with the stored response for `request` (chosen as ``cachedResponse(for:)-7d07k``
    /// chooses it, with an empty `body`) and its body as a file that stays valid until `body`
    /// returns (see `DiskCache.withFile(for:_:)`), and returns what `body` returns; `nil`,
    /// and `body` is not called, when there is none.
    // Disfavoured so that in an async context a plain closure picks the async form (whose
    // preparation runs on the I/O threads), not this blocking one; elsewhere this is the only fit.
    @_disfavoredOverload
    public func withCachedResponseFile<R>(for request: URLRequest,
                                          _ body: (CachedHTTPResponse, DiskCache.File) throws -> R) throws -> R? {
        guard let chosen = chosenVariant(for: request) else { return nil }
        let result: R?? = try responses.records.withFile(for: chosen.recordKey) { file in
            guard let entry = Self.sameVariant(chosen, metadata: file.metadata) else { return nil }
            return try body(entry, file)
        }
        return result.flatMap { $0 }
    }

    /// ``withCachedResponseFile(for:_:)`` with the lookup on the caches' I/O threads and
    /// `body` run on the caller's isolation.
    public func withCachedResponseFile<R>(for request: URLRequest, isolation: isolated (any Actor)? = #isolation,
                                          _ body: (CachedHTTPResponse, DiskCache.File) async throws -> R)
        async throws -> R? {
        guard let chosen = try await BlockingIOPool.shared.run({ self.chosenVariant(for: request) }) else { return nil }
        let result: R?? = try await responses.records.withFile(for: chosen.recordKey) { file in
            guard let entry = Self.sameVariant(chosen, metadata: file.metadata) else { return nil }
            return try await body(entry, file)
        }
        return result.flatMap { $0 }
    }

    /// ``storeCachedResponse(_:bodyContentsOf:for:userInfo:storagePolicy:transfer:)-20uba`` on the
    /// caches' I/O threads.
    public func storeCachedResponse(_ response: URLResponse, bodyContentsOf bodyFile: URL, for request: URLRequest,
                                    userInfo: [AnyHashable: Any]? = nil,
                                    storagePolicy: URLCache.StoragePolicy = .allowed,
                                    transfer: DiskCache.FileTransfer = .copy) async throws {
        let arguments = UncheckedBox((response, userInfo))
        try await BlockingIOPool.shared.run {
            try self.storeCachedResponse(arguments.value.0, bodyContentsOf: bodyFile, for: request,
                                         userInfo: arguments.value.1, storagePolicy: storagePolicy, transfer: transfer)
        }
    }

    /// The variant ``storedResponse(for:)`` would choose, found from metadata alone.
    private func chosenVariant(for request: URLRequest) -> VariantRecords.Variant? {
        guard let key = keyProvider.key(for: request), let cacheRequest = CacheRequest(request) else { return nil }
        let variants = responses.variants(forKey: key, loadingBodies: false)
        guard let chosen = Self.select(for: cacheRequest, among: variants.map(\.entry)) else { return nil }
        return variants.first { $0.entry.variantID == chosen.variantID }
    }

    /// The response in `metadata` (read with the body about to be handed out) when it is still
    /// the variant that was chosen; `nil` when the record has since been given to another.
    private static func sameVariant(_ chosen: VariantRecords.Variant, metadata: [String: String]) -> CachedHTTPResponse? {
        guard let entry = CachedHTTPResponse(body: Data(), metadata: metadata),
              entry.variantID == chosen.entry.variantID else { return nil }
        return entry
    }
}

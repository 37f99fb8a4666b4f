#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
public import Foundation
import DiskCache
import HTTPTypes

/// A drop-in `URLCache` backed by the two-tier (memory, then disk) store, with RFC 9111
/// semantics.
///
/// ```swift
/// let cache = try HTTPURLCache(memoryCapacity: 16 << 20, diskCapacity: 256 << 20,
///                              directory: URL(fileURLWithPath: "/var/cache/myapp/http"))
/// URLCache.shared = cache                        // or configuration.urlCache = cache
/// let client = CachingHTTPClient(cache: cache)   // every cache policy, revalidation, Vary
/// ```
///
/// **What is stored.** An entry keeps the whole response (URL, status, header fields, MIME type,
/// text encoding), the body, `userInfo` (property-list values only), the storage policy, the
/// request and response times, and the request header fields the response's `Vary` names.
/// Several responses of one URL that differ by method (GET, HEAD) or by the request fields `Vary`
/// names are kept side by side (up to 16), each a record of its own with its own date, size and
/// place in eviction.
///
/// **Keys.** ``keyProvider`` maps a request to its key: by default the method and the URL
/// without its fragment, plus the body for POST (see ``DefaultCacheKeyProvider``).
///
/// **The `URLCache` methods** behave as Foundation documents them:
/// ``cachedResponse(for:)-7d07k`` returns the stored response whose `Vary` matches the request
/// (the most recent), fresh or not;
/// ``storeCachedResponse(_:for:)-9vcqg`` stores what it is given
/// (unless its storage policy is `.notAllowed` or ``willStore`` vetoes it). Freshness,
/// revalidation and the cache policies are applied by ``CachingHTTPClient`` and by the
/// data-task variants that Linux's `URLSession` calls; see docs/http-semantics.md.
///
/// **Capacities.** `memoryCapacity` and `diskCapacity` are in bytes; changes apply to the
/// store at once. Foundation's defaults are 4 MiB and 20 MiB.
///
/// **Large bodies.** A body larger than the store's large-body threshold (5 % of
/// `memoryCapacity`, as `URLCache` does) is kept on disk only.
/// ``storeCachedResponse(_:bodyContentsOf:for:userInfo:storagePolicy:transfer:)-20uba`` stores
/// a download's file without reading it into memory, and ``cachedResponseBody(for:chunkSize:)``
/// and ``withCachedResponseFile(for:_:)`` read a body as chunks or as a file.
///
/// **Threads.** Every method may be called from any thread. The synchronous calls do their disk
/// I/O on the caller's thread, the `async` ones on the caches' I/O threads. Failed writes are
/// dropped (a cache write is best effort, as in `URLCache`); the file-based store throws.
public final class HTTPURLCache: URLCache, @unchecked Sendable { // URLCache is an open NSObject class Foundation itself marks @unchecked Sendable; every stored property here is an immutable `let` of a Sendable type
    /// Edits or vetoes a response before it is stored: return it (changed or not) to store it,
    /// or `nil` to store nothing. Called on the storing thread, for every store from every path
    /// (``storeCachedResponse(_:for:)-9vcqg``, URLSession,
    /// ``CachingHTTPClient``), with the request the response answers. It must not call back into
    /// the cache. The response's `body` is empty where the body is not in memory: a body stored
    /// from a file (`storeCachedResponse(_:bodyContentsOf:for:)`, a streamed download
    /// over 1 MiB) and a stored response whose metadata alone a 304 or a HEAD updates; an edit
    /// of the body is then ignored.
    public typealias WillStoreHandler = @Sendable (CachedHTTPResponse, URLRequest) -> CachedHTTPResponse?

    /// The RFC 9111 rules the cache and its clients apply.
    public let engine: CachePolicyEngine
    /// Maps requests to keys.
    public let keyProvider: any CacheKeyProvider
    /// The hook run before every store; `nil` stores everything offered.
    public let willStore: WillStoreHandler?
    /// The responses this cache answers with and stores into; the server and the Hummingbird
    /// middleware use one of their own.
    package let responseStore: HTTPResponseStore
    /// The responses, per key and variant.
    var responses: VariantRecords { responseStore.responses }

    /// The shape of the records this cache writes, kept in the disk tier's `VERSION` file as its
    /// application version (`DiskCache.Configuration.applicationVersion`): a cache written
    /// with another shape, or with none, is emptied at open. 2: one record per variant in
    /// numbered slots (before it, unmarked: a variant list record per key).
    public static let recordFormatVersion = 2

    /// The kind the disk tier's `VERSION` file names (`DiskCache.Configuration.kind`):
    /// `HTTPURLCache` for a private cache, `HTTPURLCache.shared` for a shared one (the
    /// Hummingbird middleware's, `diskcache-server`'s). A directory holding a cache of another
    /// kind (a private cache's responses, or another component's data) is refused at open with
    /// `DiskCacheError.Code.otherKind`, untouched.
    package static func diskKind(_ mode: CacheMode) -> String {
        mode == .shared ? "HTTPURLCache.shared" : "HTTPURLCache"
    }

    /// Opens (or creates) a cache.
    ///
    /// - Parameters:
    ///   - memoryCapacity: bytes kept in memory. 4 MiB by default.
    ///   - diskCapacity: bytes kept on disk. 20 MiB by default; 0 or a `nil` directory keeps
    ///     the cache in memory only.
    ///   - directory: the disk tier's directory, which other processes and caches may have
    ///     open at the same time (the disk tier opens it shared: each sees what the others
    ///     store and remove; see `DiskCache.Sharing`); `nil` for a memory-only cache. A cache
    ///     there of another kind (a store used for something else, or an `HTTPURLCache` in the
    ///     other mode) is refused with `DiskCacheError.Code.otherKind` and left as it is; one
    ///     this kind wrote with an earlier record layout is emptied at open: see
    ///     ``recordFormatVersion``.
    ///   - engine: the caching rules; a private cache by default.
    ///   - keyProvider: how requests map to keys; ``DefaultCacheKeyProvider`` by default.
    ///   - willStore: a hook that may edit or veto each response before it is stored.
    ///
    /// #### Errors
    /// The storage layer's errors when the directory cannot be opened as a cache (a file, no
    /// permission, open exclusively by a `DiskCache`, a newer format, a cache of another kind).
    public convenience init(
        memoryCapacity: Int = 4 << 20,
        diskCapacity: Int = 20 << 20,
        directory: URL?,
        engine: CachePolicyEngine = CachePolicyEngine(),
        keyProvider: any CacheKeyProvider = DefaultCacheKeyProvider(),
        willStore: WillStoreHandler? = nil
    ) throws {
        self.init(store: try HTTPResponseStore(memoryCapacity: memoryCapacity, diskCapacity: diskCapacity, directory: directory,
                                               engine: engine, keyProvider: keyProvider, willStore: willStore))
    }

    /// A cache over `store` (opened with a disk configuration of the caller's: its logger, for
    /// one), with its engine, key provider, hook and capacities.
    package init(store: HTTPResponseStore) {
        let (memoryCapacity, diskCapacity) = (store.responses.records.memoryCapacity, Int(store.responses.records.diskCapacity))
        self.engine = store.engine
        self.keyProvider = store.keyProvider
        self.willStore = store.willStore
        responseStore = store
        #if canImport(FoundationNetworking)
        // "/dev/null" cannot become a directory, so the superclass keeps no directory of its
        // own and never lists or deletes files: every method it has is overridden here.
        super.init(memoryCapacity: memoryCapacity, diskCapacity: diskCapacity, diskPath: "/dev/null")
        #else
        super.init(memoryCapacity: 0, diskCapacity: 0, diskPath: nil)
        #endif
    }

    // MARK: - Looking up

    /// The stored response for `request` whose method and `Vary` match it (the most recent when
    /// several do), fresh or stale; `nil` when there is none or the key provider bypasses the
    /// request. A GET request is answered only by a response to a GET, a HEAD request by a
    /// response to a GET or a HEAD, any other method by a response to the same method.
    public override func cachedResponse(for request: URLRequest) -> CachedURLResponse? {
        storedResponse(for: request).map(Self.cachedURLResponse)
    }

    /// The stored response for `request` as a value; see ``cachedResponse(for:)-7d07k``.
    public func storedResponse(for request: URLRequest) -> CachedHTTPResponse? {
        guard let key = keyProvider.key(for: request), let cacheRequest = CacheRequest(request) else { return nil }
        let variants = responses.variants(forKey: key)
        return Self.select(for: cacheRequest, among: variants.map(\.entry))
            .flatMap { chosen in variants.first { $0.entry.variantID == chosen.variantID } }
            .flatMap(responses.load)
    }

    /// The most recent variant stored for a compatible method whose `Vary` matches.
    static func select(for request: CacheRequest, among variants: [CachedHTTPResponse]) -> CachedHTTPResponse? {
        variants
            .filter { canAnswer(request.method, with: $0.response.requestMethod) }
            .filter { CachePolicyEngine.varyMatches($0.response, request: request) }
            .max { ($0.response.dateValue, $0.response.responseTime) < ($1.response.dateValue, $1.response.responseTime) }
    }

    /// A response to a GET also answers a HEAD (RFC 9110 §9.3.2); a response to a HEAD has no
    /// body and answers only a HEAD; any other method answers only itself.
    static func canAnswer(_ requestMethod: String, with storedMethod: String) -> Bool {
        requestMethod == storedMethod || (requestMethod == "HEAD" && storedMethod == "GET")
    }

    // MARK: - Storing

    /// Stores `cachedResponse` for `request`, replacing the variant with the same `Vary` values.
    ///
    /// Nothing is stored when its storage policy is `.notAllowed`, when ``willStore`` returns
    /// `nil`, or when the key provider bypasses the request. No freshness rule is applied: this
    /// stores what it is given, as `URLCache` does. The request and response times are now.
    public override func storeCachedResponse(_ cachedResponse: CachedURLResponse, for request: URLRequest) {
        guard let cacheRequest = CacheRequest(request) else { return }
        let now = Date()
        store(Self.entry(from: cachedResponse, for: cacheRequest, requestTime: now, responseTime: now), for: request)
    }

    /// Stores `entry` for `request` through ``willStore``
    /// (``HTTPResponseStore/store(_:for:refreshing:bodyFile:onlyMetadata:)``).
    @discardableResult
    func store(_ entry: CachedHTTPResponse, for request: URLRequest, refreshing: Date? = nil,
               bodyFile: URL? = nil, onlyMetadata: Bool = false) -> CachedHTTPResponse? {
        responseStore.store(entry, for: request, refreshing: refreshing, bodyFile: bodyFile, onlyMetadata: onlyMetadata)
    }

    // MARK: - Removing

    /// Removes every variant stored for `request`'s key.
    public override func removeCachedResponse(for request: URLRequest) {
        guard let key = keyProvider.key(for: request) else { return }
        try? responses.removeAll(forKey: key)
    }

    /// Removes every stored response.
    public override func removeAllCachedResponses() {
        try? responseStore.removeAll()
    }

    /// Removes the responses stored at or after `date`, each variant by its own date: a variant
    /// stored earlier stays, whatever was stored for its URL since.
    public override func removeCachedResponses(since date: Date) {
        try? responses.removeRecords(modifiedSince: date)
    }

    // MARK: - Capacities

    /// Bytes the memory tier may hold. Setting it trims the memory tier at once.
    public override var memoryCapacity: Int {
        get { responses.records.memoryCapacity }
        set { responses.records.memoryCapacity = newValue }
    }

    /// Bytes the disk tier may hold.
    public override var diskCapacity: Int {
        get { Int(responses.records.diskCapacity) }
        set { responses.records.diskCapacity = Int64(newValue) }
    }

    /// Bytes held in memory now.
    public override var currentMemoryUsage: Int { responses.records.currentMemoryUsage }

    /// Bytes the disk tier occupies now.
    public override var currentDiskUsage: Int { Int(responses.records.currentDiskUsage) }

    // MARK: - URLSession data tasks

    // The data-task variants: what `URLSession` calls when it consults a configured `urlCache`.
    // On Linux it calls `getCachedResponse(for:completionHandler:)` before every data task and
    // `storeCachedResponse(_:for:)` after one whose response its own rules allow caching; see
    // docs/http-semantics.md for what it does with the answers.
    /// Answers with the stored response only when the policy engine lets it be used without
    /// the network for the task's request and its `cachePolicy`: fresh under
    /// `useProtocolCachePolicy`, any stored response under `returnCacheDataElseLoad` and
    /// `returnCacheDataDontLoad`, never under the reload policies. Otherwise `nil`, and the
    /// session goes to the network (it cannot revalidate or refresh in the background).
    ///
    /// A response with `Vary` is never handed to the session: Linux's `URLSession` refuses such
    /// a cached response and then deletes it from the cache.
    ///
    /// The handler is called before this method returns.
    public override func getCachedResponse(
        for dataTask: URLSessionDataTask,
        completionHandler: @escaping @Sendable (CachedURLResponse?) -> Void
    ) {
        completionHandler(dataTask.currentRequest.flatMap { usableResponse(for: $0, at: Date()) })
    }

    /// The stored response `request` may be answered with without the network, as a
    /// `CachedURLResponse`; see ``getCachedResponse(for:completionHandler:)``.
    func usableResponse(for request: URLRequest, at now: Date) -> CachedURLResponse? {
        guard let key = keyProvider.key(for: request), let cacheRequest = CacheRequest(request) else { return nil }
        let variants = responses.variants(forKey: key)
        let decision = engine.decision(
            for: cacheRequest, storedResponses: variants.map(\.entry.response), at: now,
            policy: RequestCachePolicy(request.cachePolicy)
        )
        switch decision {
        case .fresh(let stored), .stale(let stored):
            guard let variant = variants.first(where: { $0.entry.response == stored }), variant.entry.response.varyFieldNames.isEmpty,
                  let entry = responses.load(variant)
            else { return nil }
            return Self.cachedURLResponse(entry)
        default:
            return nil
        }
    }

    /// Stores the response of a finished data task when RFC 9111 allows it
    /// (``CachePolicyEngine/storability(ofStatus:headers:for:)``), then as
    /// ``storeCachedResponse(_:for:)-9vcqg`` does.
    public override func storeCachedResponse(_ cachedResponse: CachedURLResponse, for dataTask: URLSessionDataTask) {
        guard let request = dataTask.currentRequest, let cacheRequest = CacheRequest(request) else { return }
        if let http = cachedResponse.response as? HTTPURLResponse {
            let storability = engine.storability(ofStatus: http.statusCode, headers: HTTPFields(http), for: cacheRequest)
            guard storability.isStorable else { return }
        }
        let now = Date()
        store(Self.entry(from: cachedResponse, for: cacheRequest, requestTime: now, responseTime: now), for: request)
    }

    /// Removes every variant stored for the task's current request.
    public override func removeCachedResponse(for dataTask: URLSessionDataTask) {
        guard let request = dataTask.currentRequest else { return }
        removeCachedResponse(for: request)
    }

    // MARK: - Conversions

    static func entry(
        from cached: CachedURLResponse,
        for request: CacheRequest,
        requestTime: Date,
        responseTime: Date
    ) -> CachedHTTPResponse {
        let urlResponse = cached.response
        let http = urlResponse as? HTTPURLResponse
        let headers = http.map { HTTPFields($0) } ?? HTTPFields()
        let stored = StoredResponse(
            request: request, status: http?.statusCode ?? 200, headers: headers,
            requestTime: requestTime, responseTime: responseTime
        )
        let policy: HTTPStoragePolicy = switch cached.storagePolicy {
        case .allowed: .allowed
        case .allowedInMemoryOnly: .allowedInMemoryOnly
        case .notAllowed: .notAllowed
        @unknown default: .notAllowed
        }
        return CachedHTTPResponse(
            url: urlResponse.url ?? request.url, response: stored, body: cached.data,
            mimeType: urlResponse.mimeType, textEncodingName: urlResponse.textEncodingName,
            storagePolicy: policy, userInfo: encodeUserInfo(cached.userInfo), isHTTP: http != nil
        )
    }

    static func cachedURLResponse(_ entry: CachedHTTPResponse) -> CachedURLResponse {
        let policy: URLCache.StoragePolicy = switch entry.storagePolicy {
        case .allowed: .allowed
        case .allowedInMemoryOnly: .allowedInMemoryOnly
        case .notAllowed: .notAllowed
        }
        return CachedURLResponse(
            response: urlResponse(entry), data: entry.body,
            userInfo: decodeUserInfo(entry.userInfo), storagePolicy: policy
        )
    }

    /// The stored response as Foundation's response type, with `extraHeaders` replacing fields
    /// of the same name (the client adds `Age`).
    static func urlResponse(_ entry: CachedHTTPResponse, extraHeaders: [String: String] = [:]) -> URLResponse {
        guard entry.isHTTP else {
            return URLResponse(
                url: entry.url, mimeType: entry.mimeType,
                expectedContentLength: entry.body.count, textEncodingName: entry.textEncodingName
            )
        }
        return httpURLResponse(entry, extraHeaders: extraHeaders)
    }

    static func httpURLResponse(_ entry: CachedHTTPResponse, extraHeaders: [String: String] = [:]) -> HTTPURLResponse {
        var fields: [String: String] = [:]
        for field in entry.response.headers where fields[field.name.rawName] == nil {
            fields[field.name.rawName] = entry.response.headers[field.name]
        }
        for (name, value) in extraHeaders {
            for existing in fields.keys where existing._asciiCaseInsensitiveEquals(name) {
                fields[existing] = nil
            }
            fields[name] = value
        }
        return HTTPURLResponse(url: entry.url, statusCode: entry.response.status, httpVersion: "HTTP/1.1", headerFields: fields)!
    }

    static func encodeUserInfo(_ userInfo: [AnyHashable: Any]?) -> Data? {
        guard let userInfo, !userInfo.isEmpty else { return nil }
        var plist: [String: Any] = [:]
        for (key, value) in userInfo {
            guard let key = key.base as? String else { continue }
            plist[key] = value
        }
        guard PropertyListSerialization.propertyList(plist, isValidFor: .binary) else { return nil }
        return try? PropertyListSerialization.data(fromPropertyList: plist, format: .binary, options: 0)
    }

    static func decodeUserInfo(_ data: Data?) -> [AnyHashable: Any]? {
        guard let data,
              let plist = try? PropertyListSerialization.propertyList(from: data, options: [], format: nil) as? [String: Any]
        else { return nil }
        var userInfo: [AnyHashable: Any] = [:]
        for (key, value) in plist { userInfo[key] = value }
        return userInfo
    }
}

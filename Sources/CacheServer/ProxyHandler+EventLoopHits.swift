#if Server
import DiskCache
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCache
import NIOCore
import NIOHTTP1

// Hits answered on the connection's event loop, without a task: from memory, or from files the
// page cache holds.
extension ProxyHandler {
    /// The largest body the event loop checks before sending it from the page cache (hashing
    /// it through its mapping takes about 35 µs of CPU a MiB, reading and hashing it about
    /// 105, `Benchmarks/c/mapped-check.c`); a larger one is checked on the store's I/O threads.
    static let eventLoopCheckLimit: Int64 = 2 << 20

    /// The answer to `head`, when it can be given at once on the event loop: a GET or HEAD
    /// without a body, on a connection kept alive, for which a stored response may be served as
    /// it is, and either the memory tier holds it with its body, or the page cache holds its
    /// files (read with `DiskCache.PageCacheOnly`: a read that would wait for the disk gives the
    /// request to the task instead) and its body is at most
    /// ``eventLoopCheckLimit`` bytes: checked whole, then sent from its file by the kernel.
    /// Nil for every other request (it takes the connection's task: the disk, the origin, a body
    /// to read, the server's own endpoints). Counted as the task would count it. In shared mode
    /// the journal records other processes appended since are read, as by every call into the store.
    func answerOnEventLoop(_ head: HTTPRequestHead, sentFiles: SentFiles) -> ReadyResponse? {
        guard head.method == .GET || head.method == .HEAD, head.isKeepAlive, !head.uri.hasPrefix("/_cache/"),
              head.headers.first(name: "Content-Length").map({ $0 == "0" }) ?? true,
              !head.headers.contains(name: "Transfer-Encoding")
        else { return nil }
        let preparable = PreparedHits.canAnswer(head.headers)
        let target = PreparedHits.Target(isHEAD: head.method == .HEAD, uri: head.uri)
        if preparable, let answer = preparedAnswer(for: target) { return answer }
        guard let (originTarget, url) = originURL(of: head.uri), let request = Fields.request(head) else { return nil }
        let exchange = Exchange(request: request, target: originTarget, url: url)
        guard let key = cache.key(method: exchange.cacheRequest.method, url: url, request: { exchange.urlRequest }) else { return nil }
        let variants: [HTTPResponseStore.StoredVariant]
        if let found = cache.storedVariantsInMemory(forKey: key) {
            variants = found
        } else {
            let reads = DiskCache.PageCacheOnly()
            let stored = cache.storedVariants(forKey: key, bodyLimit: memoryBodyLimit, pageCacheOnly: reads)
            guard !reads.gaveUp else { return nil }
            variants = stored
        }
        guard !variants.isEmpty else { return nil }
        let now = Date()
        let decision = engine.decision(for: exchange.cacheRequest, storedResponses: variants.map(\.entry.response), at: now)
        switch decision {
        case .fresh, .stale: break
        default: return nil
        }
        guard let chosen = HTTPResponseStore.StoredVariant.holding(decision.storedResponse, among: variants) else { return nil }
        let fresh: Bool
        if case .fresh = decision { fresh = true } else { fresh = false }
        guard let answer = chosen.isLoaded ? hitInMemory(chosen, exchange, key: key, preparing: fresh && preparable, at: now)
                                           : try? checkedAnswer(chosen, exchange, fields: servedFields(chosen.entry.response, status: "HIT"),
                                                                status: "HIT", sizeLimit: min(configuration.wholeCheckLimit, Self.eventLoopCheckLimit),
                                                                pageCacheOnly: DiskCache.PageCacheOnly(), sentFiles: sentFiles)
        else { return nil }
        noteHit(.eventLoop(bytes: answer.outcome.bytes, prepared: false))
        return answer
    }
}
#endif

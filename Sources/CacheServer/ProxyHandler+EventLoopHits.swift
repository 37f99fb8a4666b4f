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

    /// What the event loop does with a request head: answers it, or leaves it to the
    /// connection's task, with what it made of it so far.
    enum EventLoopAnswer {
        case answered(ReadyResponse)
        case declined(DeclinedRequest?)
    }

    /// The answer to `head`, when it can be given at once on the event loop: a GET or HEAD
    /// without a body, on a connection kept alive, for which a stored response may be served as
    /// it is, and either the memory tier holds it with its body, or the page cache holds its
    /// files (read with `DiskCache.PageCacheOnly`: a read that would wait for the disk gives the
    /// request to the task instead) and its body is at most
    /// ``eventLoopCheckLimit`` bytes: checked whole, then sent from its file by the kernel.
    /// Every other request takes the connection's task (the disk, the origin, a body to read,
    /// the server's own endpoints), with the exchange and the stored responses the event loop
    /// found for it (``DeclinedRequest``). Counted as the task would count it. In shared mode
    /// the journal records other processes appended since are read, as by every call into the store.
    func answerOnEventLoop(_ head: HTTPRequestHead, sentFiles: SentFiles) -> EventLoopAnswer {
        guard head.method == .GET || head.method == .HEAD, head.isKeepAlive, !head.uri.hasPrefix("/_cache/"),
              head.headers.first(name: "Content-Length").map({ $0 == "0" }) ?? true,
              !head.headers.contains(name: "Transfer-Encoding")
        else { return .declined(nil) }
        let preparable = PreparedHits.canAnswer(head.headers)
        let target = PreparedHits.Target(isHEAD: head.method == .HEAD, uri: head.uri)
        if preparable, let answer = preparedAnswer(for: target) { return .answered(answer) }
        guard let (originTarget, url) = originURL(of: head.uri), let request = Fields.request(head) else { return .declined(nil) }
        var exchange = Exchange(request: request, target: originTarget, url: url)
        exchange.acceptsInterim = head.version.major > 1 || (head.version.major == 1 && head.version.minor >= 1)
        func decline(_ stored: Stored?) -> EventLoopAnswer {
            .declined(DeclinedRequest(head: head, exchange: exchange, stored: stored))
        }
        guard let key = key(of: exchange),
              let variants = cache.storedVariantsInMemory(forKey: key) ?? variantsFromDisk(forKey: key, pageCacheOnly: DiskCache.PageCacheOnly())
        else { return decline(nil) }
        guard !variants.isEmpty else { return decline((key, variants)) }
        let now = Date()
        let decision = engine.decision(for: exchange.cacheRequest, storedResponses: variants.map(\.entry.response), at: now)
        let fresh: Bool
        switch decision {
        case .fresh: fresh = true
        case .stale: fresh = false
        default: return decline((key, variants))
        }
        guard let chosen = HTTPResponseStore.StoredVariant.holding(decision.storedResponse, among: variants),
              let answer = chosen.isLoaded ? hitInMemory(chosen, exchange, key: key, preparing: fresh && preparable, at: now)
                                           : try? checkedAnswer(chosen, exchange, fields: servedFields(chosen.entry.response, status: "HIT"),
                                                                status: "HIT", sizeLimit: min(configuration.wholeCheckLimit, Self.eventLoopCheckLimit),
                                                                pageCacheOnly: DiskCache.PageCacheOnly(), sentFiles: sentFiles)
        // Not answered from the page cache (gone, over the limit, or not all resident): the
        // task reads the body where it may wait.
        else { return decline((key, variants)) }
        noteHit(.eventLoop(bytes: answer.outcome.bytes, prepared: false))
        return .answered(answer)
    }
}
#endif

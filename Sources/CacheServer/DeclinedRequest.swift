#if Server
import DiskCacheLocking
import HTTPCache
import NIOHTTP1

/// What the event loop made of a request it then left to the connection's task
/// (``ProxyHandler/answerOnEventLoop(_:sentFiles:)``): the exchange, and the responses stored
/// for it when its reads did not give up, so that the task goes on from there instead of
/// converting the head, keying it and reading its variants again.
struct DeclinedRequest: Sendable {
    let head: HTTPRequestHead
    let exchange: ProxyHandler.Exchange
    /// The key and what is stored under it; nil when the task must look (no key, or a read
    /// that would have waited for the disk).
    let stored: ProxyHandler.Stored?
}

/// A connection's request the event loop declined, from its event loop to its task. NIO's
/// pipelining handler hands on one request at a time, so there is at most one.
final class DeclinedRequests: Sendable {
    private let last = PthreadMutex<DeclinedRequest?>(nil)

    func hold(_ declined: DeclinedRequest) {
        last.withLock { $0 = declined }
    }

    /// What the event loop made of `head`, once; nil when it declined it before making anything
    /// or never saw it.
    func take(for head: HTTPRequestHead) -> DeclinedRequest? {
        last.withLock { held in
            defer { held = nil }
            return held?.head == head ? held : nil
        }
    }
}
#endif

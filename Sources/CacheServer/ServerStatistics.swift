#if Server
/// What a ``CacheServer`` has done since it started.
public struct ServerStatistics: Sendable, Hashable {
    /// Requests answered (internal endpoints excepted).
    public var requests = 0
    /// Answered from the cache without asking the origin (fresh, or stale where allowed).
    public var hits = 0
    /// Of the hits, those answered on the connection's event loop, without a task: from memory, or
    /// from files the page cache held.
    public var hitsOnEventLoop = 0
    /// Of those, the ones answered with an answer prepared for an earlier hit (the response's
    /// head and body ready to send, kept while it stays fresh and the memory tier holds it).
    public var hitsPrepared = 0
    /// Of those, the ones read and answered straight from the connection's bytes, without NIO's
    /// HTTP pipeline (a plain GET or HEAD of HTTP/1.1, in turn on its connection).
    public var hitsFromBytes = 0
    /// Answered from the cache after the origin confirmed it with a 304.
    public var revalidations = 0
    /// Went to the origin and were answered with what it sent.
    public var misses = 0
    /// Stale responses served because the origin failed and `stale-if-error` allowed it.
    public var staleOnError = 0
    /// Requests that waited for another's fetch of the same resource instead of fetching it.
    public var coalesced = 0
    /// Responses stored.
    public var stores = 0
    /// Storable responses not stored because their key had fewer misses than
    /// ``ServerConfiguration/minimumUses``.
    public var storesDeclined = 0
    /// Body bytes sent to clients.
    public var bytesServed: Int64 = 0
    /// Requests sent to the origin, and the seconds until their response heads arrived.
    public var originRequests = 0
    public var originSeconds: Double = 0
    /// Origin exchanges that failed (no connection, no answer, cut short).
    public var originErrors = 0
    /// Connections answered 503 and closed because ``ServerConfiguration/maximumConnections`` were open.
    public var connectionsRefused = 0
    /// Connections closed by one of ``ServerConfiguration/timeouts``.
    public var connectionsTimedOut = 0

    public init() {}

    mutating func count(_ event: ServerMetrics.Event) {
        switch event {
        case .requests: requests += 1
        case .hits: hits += 1
        case .hitsOnEventLoop: hitsOnEventLoop += 1
        case .hitsPrepared: hitsPrepared += 1
        case .hitsFromBytes: hitsFromBytes += 1
        case .revalidations: revalidations += 1
        case .misses: misses += 1
        case .staleOnError: staleOnError += 1
        case .coalesced: coalesced += 1
        case .stores: stores += 1
        case .originErrors: originErrors += 1
        case .storesDeclined: storesDeclined += 1
        case .connectionsRefused: connectionsRefused += 1
        case .connectionsTimedOut: connectionsTimedOut += 1
        case .bytesServed(let bytes): bytesServed += bytes
        case .originResponse(let seconds):
            originRequests += 1
            originSeconds += seconds
        }
    }
}
#endif

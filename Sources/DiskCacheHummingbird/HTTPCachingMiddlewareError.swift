#if Hummingbird
/// Why an ``HTTPCachingMiddleware`` could not be made.
public enum HTTPCachingMiddlewareError: Error, Equatable, CustomStringConvertible {
    /// The cache's engine is in `.private` mode: it would store `private` responses and answer
    /// every client with them.
    case privateCache
    /// The body size limit given was negative.
    case negativeBodySizeLimit(Int)

    public var description: String {
        switch self {
        case .privateCache:
            "The cache is private: open it with engine: CachePolicyEngine(mode: .shared) to answer several clients from it"
        case .negativeBodySizeLimit(let limit):
            "The body size limit \(limit) is negative"
        }
    }
}
#endif

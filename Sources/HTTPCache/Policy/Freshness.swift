public import Foundation

/// Whether a stored response is fresh, and why: its freshness lifetime (RFC 9111 §4.2.1), where
/// that lifetime came from, and its current age (§4.2.3).
public struct Freshness: Sendable, Hashable {
    /// Where the freshness lifetime came from, in the order of precedence of RFC 9111 §4.2.1.
    public enum Source: Sendable, Hashable {
        /// `s-maxage`, in a shared cache.
        case sharedMaxAge
        /// `max-age`.
        case maxAge
        /// `Expires` minus `Date` (or minus the response time when there is no `Date`).
        case expires
        /// A heuristic: a fraction of the time since `Last-Modified` (§4.2.2).
        case heuristic
        /// The explicit expiration information was invalid (`max-age=abc`, `Expires: 0`), so the
        /// response is treated as already stale (§4.2.1, §5.3).
        case invalid
        /// No explicit expiration time and no basis for a heuristic: lifetime 0.
        case none
    }

    /// The freshness lifetime in seconds.
    public var lifetime: TimeInterval
    /// Where ``lifetime`` came from.
    public var source: Source
    /// The age computation at the moment of the judgement.
    public var age: ResponseAge

    public init(lifetime: TimeInterval, source: Source, age: ResponseAge) {
        self.lifetime = lifetime
        self.source = source
        self.age = age
    }

    /// `current_age`, in seconds.
    public var currentAge: TimeInterval { age.currentAge }

    /// `freshness_lifetime > current_age` (RFC 9111 §4.2).
    public var isFresh: Bool { lifetime > currentAge }

    /// How far past its lifetime the response is, in seconds; 0 while it is fresh.
    public var staleness: TimeInterval { max(0, currentAge - lifetime) }

    /// How long the response stays fresh, in seconds; negative when it is stale.
    public var remainingLifetime: TimeInterval { lifetime - currentAge }
}

public import Foundation

/// A clock the test moves by hand, in milliseconds since 1970: what a cache's
/// `Configuration.clock` reads in a test that needs one moment after another without sleeping.
public final class ManualClock: @unchecked Sendable {  // unchecked: the lock guards `now`
    private let lock = NSLock()
    private var now: Int64

    /// From `start` (by default a fixed date in 2027, so that dates in a test are exact).
    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        now = Int64((start.timeIntervalSince1970 * 1000).rounded(.down))
    }

    /// From an ISO 8601 date, such as `2026-01-01T00:00:00Z`.
    public convenience init(_ iso: String) {
        self.init(ISO8601DateFormatter().date(from: iso)!)
    }

    public var milliseconds: Int64 { lock.withLock { now } }
    public var date: Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
    public func advance(seconds: Double) { advance(milliseconds: Int64(seconds * 1000)) }
    public func advance(milliseconds delta: Int64) { lock.withLock { now += delta } }
}

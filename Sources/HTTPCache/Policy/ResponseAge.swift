public import Foundation

/// The age of a stored response, computed exactly as RFC 9111 §4.2.3 specifies, with every
/// intermediate quantity kept so that it can be inspected.
///
/// ```
/// apparent_age          = max(0, response_time - date_value)
/// response_delay        = response_time - request_time
/// corrected_age_value   = age_value + response_delay
/// corrected_initial_age = max(apparent_age, corrected_age_value)
/// resident_time         = now - response_time
/// current_age           = corrected_initial_age + resident_time
/// ```
///
/// `age_value` is the `Age` field, or 0 when it is absent. `Age` is one non-negative integer
/// (RFC 9111 §5.1); a field that is anything else (a negative, fractional or non-numeric value,
/// a list on one line, several field lines even with equal values) says nothing reliable about
/// the response's age, so it counts as 0 here and sets ``hasInvalidAge``, which makes the
/// response stale (``Freshness/isFresh``). `date_value` is the `Date` field, or the response
/// time when it is absent or invalid. All quantities are in seconds.
public struct ResponseAge: Sendable, Hashable {
    /// `age_value`: the `Age` field in seconds, 0 when absent or invalid.
    public var ageValue: TimeInterval
    /// Whether the response has an `Age` field that is not a single delta-seconds value. Its
    /// true age is unknown: it may be older than any lifetime, so it is never fresh.
    public var hasInvalidAge: Bool
    /// `date_value`: the `Date` field, or the response time when there is none.
    public var dateValue: Date
    /// `apparent_age`: how old the response looked on arrival, judged by the clocks.
    public var apparentAge: TimeInterval
    /// `response_delay`: the round trip of the request that fetched the response.
    public var responseDelay: TimeInterval
    /// `corrected_age_value`: the `Age` field plus the response delay.
    public var correctedAgeValue: TimeInterval
    /// `corrected_initial_age`: the larger of the apparent and corrected ages.
    public var correctedInitialAge: TimeInterval
    /// `resident_time`: how long the response has been in this cache.
    public var residentTime: TimeInterval
    /// `current_age`: the age used to decide freshness.
    public var currentAge: TimeInterval

    /// Computes the age of `stored` at the local time `now`.
    public init(of stored: StoredResponse, at now: Date) {
        let age = Self.ageValue(stored.headers)
        ageValue = age ?? 0
        hasInvalidAge = age == nil
        dateValue = stored.dateValue
        apparentAge = max(0, stored.responseTime.timeIntervalSince(dateValue))
        responseDelay = stored.responseTime.timeIntervalSince(stored.requestTime)
        correctedAgeValue = ageValue + responseDelay
        correctedInitialAge = max(apparentAge, correctedAgeValue)
        residentTime = now.timeIntervalSince(stored.responseTime)
        currentAge = correctedInitialAge + residentTime
    }

    /// The `Age` field in seconds: 0 when there is none, `nil` when it is invalid.
    private static func ageValue(_ headers: HTTPHeaderFields) -> TimeInterval? {
        let lines = headers.values(for: "Age")
        guard !lines.isEmpty else { return 0 }
        // Age is a singleton field: several lines are a list, which §5.1 does not allow (and the
        // cache cannot tell which one is right), just as a comma-separated list on one line is.
        guard lines.count == 1, let seconds = _FieldSyntax.deltaSeconds(lines[0]) else { return nil }
        return TimeInterval(seconds)
    }
}

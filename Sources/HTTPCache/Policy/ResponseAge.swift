public import Foundation
import HTTPTypes

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
/// (RFC 9111 §5.1); a field that arrives as a list (on one line or several) counts by its
/// first member, the others discarded, and a field whose first member is not a delta-seconds
/// (a negative, fractional or non-numeric value) is ignored, as §5.1 says a cache should: it
/// counts as 0 and sets ``hasInvalidAge``. `date_value` is the `Date` field, or the response
/// time when it is absent or invalid. All quantities are in seconds.
public struct ResponseAge: Sendable, Hashable {
    /// `age_value`: the `Age` field's first member in seconds, 0 when absent or invalid.
    public var ageValue: TimeInterval
    /// Whether the response has an `Age` field whose first member is not a delta-seconds
    /// value: the field was ignored (RFC 9111 §5.1), and ``ageValue`` is 0.
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

    /// The `Age` field in seconds: 0 when there is none, `nil` when it is invalid. The field
    /// lines make one list (RFC 9110 §5.3); its first member counts (RFC 9111 §5.1).
    private static func ageValue(_ headers: HTTPFields) -> TimeInterval? {
        guard let line = headers[values: .age].first else { return 0 }
        let first = line.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        return _FieldSyntax.deltaSeconds(first._trimmingOWS).map(TimeInterval.init)
    }
}

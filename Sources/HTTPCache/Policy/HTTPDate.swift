public import Foundation

/// Parsing and formatting of HTTP timestamps (RFC 9110 §5.6.7).
///
/// Parsing accepts the three formats a recipient must understand:
///
/// | format | example |
/// | --- | --- |
/// | IMF-fixdate (preferred) | `Sun, 06 Nov 1994 08:49:37 GMT` |
/// | obsolete RFC 850 | `Sunday, 06-Nov-94 08:49:37 GMT` |
/// | obsolete ANSI C `asctime()` | `Sun Nov  6 08:49:37 1994` |
///
/// It is lenient where RFC 9110 encourages robustness and the meaning is unambiguous: day and
/// month names compare case-insensitively, the day name is not checked against the date, runs
/// of spaces count as one, and `UTC` is read like `GMT`. Anything else, such as `Expires: 0`
/// or `Expires: -1`, is not a date and parses as `nil`; the policy engine then treats the
/// response as already expired (RFC 9111 §5.3).
///
/// The parser is hand-written rather than built on `DateFormatter`: it does not depend on a
/// locale or time zone database, and it runs on every lookup.
public enum HTTPDate {
    /// Parses an HTTP timestamp, or returns `nil` when `text` is not one.
    ///
    /// - Parameters:
    ///   - text: The field value, for example the value of `Date`, `Expires` or `Last-Modified`.
    ///   - reference: The moment used to resolve two-digit years of the RFC 850 format: a year
    ///     that would lie more than 50 years after `reference` means the most recent past year
    ///     with the same last two digits (RFC 9110 §5.6.7). `nil` means the current time. The
    ///     policy engine passes the response time of the stored response, so its decisions do
    ///     not depend on the clock.
    public static func parse(_ text: String, relativeTo reference: Date? = nil) -> Date? {
        var scanner = _DateScanner(text)
        scanner.skipSpaces()
        guard let dayName = scanner.letters(), _dayNames.contains(dayName._asciiLowercased) else {
            return nil
        }
        let components: _Components?
        if scanner.consume(UInt8(ascii: ",")) {
            scanner.skipSpaces()
            let checkpoint = scanner
            if let imf = parseIMFFixdateRest(&scanner) {
                components = imf
            } else {
                scanner = checkpoint
                components = parseRFC850Rest(&scanner, reference: reference)
            }
        } else {
            components = parseAsctimeRest(&scanner)
        }
        scanner.skipSpaces()
        guard let components, scanner.isAtEnd else { return nil }
        return components.date
    }

    /// Formats `date` as an IMF-fixdate, the form senders must generate, for example
    /// `Sun, 06 Nov 1994 08:49:37 GMT`. Fractional seconds are dropped.
    public static func string(from date: Date) -> String {
        let seconds = Int(date.timeIntervalSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = _civil(fromDays: days)
        let weekday = ((days % 7) + 11) % 7  // 1970-01-01 was a Thursday; 0 is Sunday.
        func pad(_ value: Int, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(_shortDayNames[weekday]), \(pad(day, 2)) \(_monthNames[month - 1]) \(pad(year, 4)) "
            + "\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2)) GMT"
    }

    // MARK: Formats

    // `06 Nov 1994 08:49:37 GMT`
    private static func parseIMFFixdateRest(_ scanner: inout _DateScanner) -> _Components? {
        guard let day = scanner.digits(1...2) else { return nil }
        guard scanner.skipSpaces(), let month = scanner.month() else { return nil }
        guard scanner.skipSpaces(), let year = scanner.digits(4...4) else { return nil }
        guard scanner.skipSpaces(), let time = scanner.timeOfDay() else { return nil }
        guard scanner.skipSpaces(), scanner.zone() else { return nil }
        return _Components(year: year, month: month, day: day, time: time)
    }

    // `06-Nov-94 08:49:37 GMT`
    private static func parseRFC850Rest(_ scanner: inout _DateScanner, reference: Date?) -> _Components? {
        guard let day = scanner.digits(1...2), scanner.consume(UInt8(ascii: "-")) else { return nil }
        guard let month = scanner.month(), scanner.consume(UInt8(ascii: "-")) else { return nil }
        guard let twoDigitYear = scanner.digits(2...2) else { return nil }
        guard scanner.skipSpaces(), let time = scanner.timeOfDay() else { return nil }
        guard scanner.skipSpaces(), scanner.zone() else { return nil }
        let referenceYear = _civil(fromDays: Int(((reference ?? Date()).timeIntervalSince1970 / 86_400).rounded(.down))).year
        var year = referenceYear / 100 * 100 + twoDigitYear
        if year > referenceYear + 50 { year -= 100 }
        return _Components(year: year, month: month, day: day, time: time)
    }

    // `Nov  6 08:49:37 1994` (after the day name)
    private static func parseAsctimeRest(_ scanner: inout _DateScanner) -> _Components? {
        guard scanner.skipSpaces(), let month = scanner.month() else { return nil }
        guard scanner.skipSpaces(), let day = scanner.digits(1...2) else { return nil }
        guard scanner.skipSpaces(), let time = scanner.timeOfDay() else { return nil }
        guard scanner.skipSpaces(), let year = scanner.digits(4...4) else { return nil }
        return _Components(year: year, month: month, day: day, time: time)
    }
}

// MARK: - Internals

private let _shortDayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
private let _dayNames: Set<String> = [
    "sun", "mon", "tue", "wed", "thu", "fri", "sat",
    "sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
]
private let _monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

private struct _Components {
    var year: Int
    var month: Int
    var day: Int
    var time: (hour: Int, minute: Int, second: Int)

    var date: Date? {
        guard (1...12).contains(month), day >= 1, day <= _daysInMonth(year: year, month: month) else { return nil }
        let days = _days(fromCivilYear: year, month: month, day: day)
        let seconds = days * 86_400 + time.hour * 3600 + time.minute * 60 + time.second
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }
}

private func _daysInMonth(year: Int, month: Int) -> Int {
    switch month {
    case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
    case 4, 6, 9, 11: 30
    default: 31
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
private func _days(fromCivilYear year: Int, month: Int, day: Int) -> Int {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yearOfEra = y - era * 400
    let monthFromMarch = (month + 9) % 12
    let dayOfYear = (153 * monthFromMarch + 2) / 5 + day - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    return era * 146_097 + dayOfEra - 719_468
}

/// The inverse of `_days(fromCivilYear:month:day:)`.
private func _civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let dayOfEra = z - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let monthFromMarch = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
    let month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
    return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
}

private struct _DateScanner {
    private let bytes: [UInt8]
    private var position = 0

    init(_ text: String) {
        bytes = Array(text.utf8)
    }

    var isAtEnd: Bool { position == bytes.count }

    /// Skips spaces and tabs; returns whether at least one was skipped.
    @discardableResult
    mutating func skipSpaces() -> Bool {
        let start = position
        while position < bytes.count, bytes[position] == 0x20 || bytes[position] == 0x09 { position += 1 }
        return position > start
    }

    mutating func consume(_ byte: UInt8) -> Bool {
        guard position < bytes.count, bytes[position] == byte else { return false }
        position += 1
        return true
    }

    mutating func letters() -> String? {
        let start = position
        while position < bytes.count, (bytes[position] | 0x20) >= 0x61, (bytes[position] | 0x20) <= 0x7A {
            position += 1
        }
        return position > start ? String(decoding: bytes[start..<position], as: UTF8.self) : nil
    }

    mutating func digits(_ allowedCount: ClosedRange<Int>) -> Int? {
        let start = position
        var value = 0
        while position < bytes.count, position - start < allowedCount.upperBound,
              bytes[position] >= 0x30, bytes[position] <= 0x39 {
            value = value * 10 + Int(bytes[position] - 0x30)
            position += 1
        }
        // A longer run of digits than allowed is not this format.
        if position < bytes.count, bytes[position] >= 0x30, bytes[position] <= 0x39 { return nil }
        return allowedCount.contains(position - start) ? value : nil
    }

    mutating func month() -> Int? {
        guard let name = letters(), name.utf8.count == 3 else { return nil }
        let lower = name._asciiLowercased
        return _monthNames.firstIndex { $0._asciiLowercased == lower }.map { $0 + 1 }
    }

    mutating func timeOfDay() -> (hour: Int, minute: Int, second: Int)? {
        guard let hour = digits(2...2), hour < 24, consume(UInt8(ascii: ":")),
              let minute = digits(2...2), minute < 60, consume(UInt8(ascii: ":")),
              let second = digits(2...2), second <= 60  // 60: a leap second, RFC 9110 §5.6.7
        else { return nil }
        return (hour, minute, second)
    }

    mutating func zone() -> Bool {
        guard let name = letters() else { return false }
        let lower = name._asciiLowercased
        return lower == "gmt" || lower == "utc"
    }
}

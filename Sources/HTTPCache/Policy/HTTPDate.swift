public import Foundation
import DiskCacheLocking

/// Parsing and formatting of HTTP timestamps (RFC 9110 §5.6.7).
///
/// Parsing accepts the three formats a recipient must understand, exactly as RFC 9110's
/// grammar writes them:
///
/// | format | example |
/// | --- | --- |
/// | IMF-fixdate (preferred) | `Sun, 06 Nov 1994 08:49:37 GMT` |
/// | obsolete RFC 850 | `Sunday, 06-Nov-94 08:49:37 GMT` |
/// | obsolete ANSI C `asctime()` | `Sun Nov  6 08:49:37 1994` |
///
/// Tokens are separated by exactly one space (asctime pads a one-digit day with a second one),
/// days, hours, minutes and seconds have two digits, the zone is `GMT`, IMF-fixdate and asctime
/// take the three-letter day name and RFC 850 the full one. The one lenience is case: names
/// compare case-insensitively, as RFC 9111 §4.2 asks of caches although the grammar is
/// case-sensitive. The day name is not checked against the date, and whitespace around the
/// value is not part of it.
///
/// Anything else is not a date and parses as `nil`: `Expires: 0`, `UTC` in place of `GMT`
/// (RFC 9111 §4.2: a zone other than GMT is invalid), doubled spaces, a one-digit hour. The
/// policy engine then treats an `Expires` as already expired (RFC 9111 §5.3), a `Date` as
/// absent (the response time is used) and a `Last-Modified` as absent (no heuristic freshness,
/// no `If-Modified-Since`).
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
    ///     with the same last two digits (RFC 9110 §5.6.7). `nil` (or NaN) means the current
    ///     time; a reference outside years 0...9999 counts as the nearest end of that range.
    ///     The policy engine passes the response time of the stored response, so its decisions
    ///     do not depend on the clock.
    public static func parse(_ text: String, relativeTo reference: Date? = nil) -> Date? {
        var scanner = _DateScanner(text)
        guard let dayName = scanner.letters() else { return nil }
        let name = dayName._asciiLowercased
        let components: _Components?
        if scanner.consume(UInt8(ascii: ",")) {
            guard scanner.consumeSpace() else { return nil }
            if _shortDayNames.contains(name) {
                components = parseIMFFixdateRest(&scanner)
            } else if _longDayNames.contains(name) {
                components = parseRFC850Rest(&scanner, reference: reference)
            } else {
                return nil
            }
        } else {
            guard _shortDayNames.contains(name) else { return nil }
            components = parseAsctimeRest(&scanner)
        }
        guard let components, scanner.isAtEnd else { return nil }
        return components.date
    }

    /// ``parse(_:relativeTo:)`` of an IMF-fixdate (the form servers send, which needs no
    /// reference), from a memo of the texts parsed lately: a stored response's `Date` is parsed
    /// on every lookup of it.
    static func parseRemembering(_ text: String, relativeTo reference: Date?) -> Date? {
        // Only a form whose meaning does not depend on the reference is remembered.
        guard text.utf8.count == 29, text.utf8.dropFirst(3).first == UInt8(ascii: ",") else {
            return parse(text, relativeTo: reference)
        }
        if let known = parsedTexts.withLock({ $0[text] }) { return known }
        guard let date = parse(text, relativeTo: reference) else { return nil }
        parsedTexts.withLock { memo in
            if memo.count >= 4096 { memo.removeAll(keepingCapacity: true) }
            memo[text] = date
        }
        return date
    }

    private static let parsedTexts = PthreadMutex([String: Date]())

    /// Formats `date` as an IMF-fixdate, the form senders must generate, for example
    /// `Sun, 06 Nov 1994 08:49:37 GMT`. Fractional seconds are dropped.
    ///
    /// IMF-fixdate has four year digits: a date after 9999 is written as the last second of
    /// 9999, one before year 0 (or not a number) as the first second of year 0.
    public static func string(from date: Date) -> String {
        let seconds = _representableSeconds(date.timeIntervalSince1970)
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = _civil(fromDays: days)
        let weekday = ((days % 7) + 11) % 7  // 1970-01-01 was a Thursday; 0 is Sunday.
        func pad(_ value: Int, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(_formattedDayNames[weekday]), \(pad(day, 2)) \(_monthNames[month - 1]) \(pad(year, 4)) "
            + "\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2)) GMT"
    }

    // MARK: Formats

    // `06 Nov 1994 08:49:37 GMT` (after `Sun, `)
    private static func parseIMFFixdateRest(_ scanner: inout _DateScanner) -> _Components? {
        guard let day = scanner.digits(2), scanner.consumeSpace(),
              let month = scanner.month(), scanner.consumeSpace(),
              let year = scanner.digits(4), scanner.consumeSpace(),
              let time = scanner.timeOfDay(), scanner.consumeSpace(),
              scanner.gmt()
        else { return nil }
        return _Components(year: year, month: month, day: day, time: time)
    }

    // `06-Nov-94 08:49:37 GMT` (after `Sunday, `)
    private static func parseRFC850Rest(_ scanner: inout _DateScanner, reference: Date?) -> _Components? {
        guard let day = scanner.digits(2), scanner.consume(UInt8(ascii: "-")),
              let month = scanner.month(), scanner.consume(UInt8(ascii: "-")),
              let twoDigitYear = scanner.digits(2), scanner.consumeSpace(),
              let time = scanner.timeOfDay(), scanner.consumeSpace(),
              scanner.gmt()
        else { return nil }
        // The reference comes from a stored response, so from disk: one outside years 0...9999
        // counts as the nearest end of that range (an `Int` could not even hold its days), NaN
        // as no reference.
        var referenceInterval = reference?.timeIntervalSince1970 ?? .nan
        if referenceInterval.isNaN { referenceInterval = Date().timeIntervalSince1970 }
        let referenceSeconds = _representableSeconds(referenceInterval)
        let referenceYear = _civil(fromDays: referenceSeconds >= 0 ? referenceSeconds / 86_400 : (referenceSeconds - 86_399) / 86_400).year
        var year = referenceYear / 100 * 100 + twoDigitYear
        if year > referenceYear + 50 { year -= 100 }
        return _Components(year: year, month: month, day: day, time: time)
    }

    // `Nov  6 08:49:37 1994` or `Nov 16 08:49:37 1994` (after `Sun`)
    private static func parseAsctimeRest(_ scanner: inout _DateScanner) -> _Components? {
        guard scanner.consumeSpace(), let month = scanner.month(), scanner.consumeSpace() else { return nil }
        // date3 = month SP ( 2DIGIT / ( SP DIGIT ) )
        let day = scanner.consumeSpace() ? scanner.digits(1) : scanner.digits(2)
        guard let day, scanner.consumeSpace(),
              let time = scanner.timeOfDay(), scanner.consumeSpace(),
              let year = scanner.digits(4)
        else { return nil }
        return _Components(year: year, month: month, day: day, time: time)
    }
}

// MARK: - Internals

/// The first and last seconds an IMF-fixdate can write: 0000-01-01T00:00:00Z, 9999-12-31T23:59:59Z.
private let _earliestSecond: TimeInterval = -62_167_219_200
private let _latestSecond: TimeInterval = 253_402_300_799

/// Whole seconds since 1970 of `interval`, rounded down and kept within the years an
/// IMF-fixdate can write: a later time is the last second of 9999, an earlier one (and NaN)
/// the first second of year 0.
private func _representableSeconds(_ interval: TimeInterval) -> Int {
    let seconds = interval.rounded(.down)
    if seconds >= _earliestSecond && seconds <= _latestSecond { return Int(seconds) }
    return seconds > _latestSecond ? Int(_latestSecond) : Int(_earliestSecond)
}

private let _formattedDayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
/// Lowercased, for the case-insensitive match.
private let _shortDayNames: Set<String> = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
private let _longDayNames: Set<String> = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
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
    private var position: Int
    private let end: Int

    /// Scans `text` without the spaces and tabs around it, which are not part of a field value
    /// (RFC 9110 §5.5).
    init(_ text: String) {
        bytes = Array(text.utf8)
        var start = 0, end = bytes.count
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
        while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
        position = start
        self.end = end
    }

    var isAtEnd: Bool { position == end }

    mutating func consume(_ byte: UInt8) -> Bool {
        guard position < end, bytes[position] == byte else { return false }
        position += 1
        return true
    }

    /// One SP: the grammar's only separator (a tab or a second space is not one).
    mutating func consumeSpace() -> Bool { consume(0x20) }

    mutating func letters() -> String? {
        let start = position
        while position < end, (bytes[position] | 0x20) >= 0x61, (bytes[position] | 0x20) <= 0x7A {
            position += 1
        }
        return position > start ? String(decoding: bytes[start..<position], as: UTF8.self) : nil
    }

    /// Exactly `count` ASCII digits, not followed by another digit.
    mutating func digits(_ count: Int) -> Int? {
        var value = 0
        for _ in 0..<count {
            guard position < end, bytes[position] >= 0x30, bytes[position] <= 0x39 else { return nil }
            value = value * 10 + Int(bytes[position] - 0x30)
            position += 1
        }
        if position < end, bytes[position] >= 0x30, bytes[position] <= 0x39 { return nil }
        return value
    }

    mutating func month() -> Int? {
        guard let name = letters(), name.utf8.count == 3 else { return nil }
        let lower = name._asciiLowercased
        return _monthNames.firstIndex { $0._asciiLowercased == lower }.map { $0 + 1 }
    }

    mutating func timeOfDay() -> (hour: Int, minute: Int, second: Int)? {
        guard let hour = digits(2), hour < 24, consume(UInt8(ascii: ":")),
              let minute = digits(2), minute < 60, consume(UInt8(ascii: ":")),
              let second = digits(2), second <= 60  // 60: a leap second, RFC 9110 §5.6.7
        else { return nil }
        return (hour, minute, second)
    }

    /// `GMT`, in any case; no other zone (RFC 9111 §4.2).
    mutating func gmt() -> Bool {
        letters()?._asciiLowercased == "gmt"
    }
}

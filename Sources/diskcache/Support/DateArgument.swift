import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Dates on the command line and in output.
enum DateText {
    /// Whether a relative duration (`10m`) counts back from now (`rm --since`) or forward (`put --expires`).
    enum Direction { case ago, fromNow }

    /// Parses `2026-11-22T10:00:00Z` (any ISO 8601 date-time with a zone, fractional seconds
    /// allowed), `2026-11-22` (midnight UTC), or a duration `90s`, `10m`, `2h`, `3d`, `1w`
    /// (combinable: `1h30m`) counted from `now` in `direction`.
    static func parse(_ text: String, direction: Direction, now: Date = Date()) -> Date? {
        let text = text.trimmingCharacters(in: .whitespaces)
        if let seconds = durationSeconds(text) {
            return direction == .ago ? now.addingTimeInterval(-seconds) : now.addingTimeInterval(seconds)
        }
        for options: ISO8601DateFormatter.Options in [
            [.withInternetDateTime], [.withInternetDateTime, .withFractionalSeconds], [.withFullDate],
        ] {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = options
            formatter.timeZone = TimeZone(identifier: "UTC")
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }

    /// `1h30m` → 5400; nil unless the whole text is one or more number-unit pairs.
    static func durationSeconds(_ text: String) -> Double? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604_800]
        var total = 0.0
        var digits = ""
        var sawPair = false
        for character in text.lowercased() {
            if character.isASCII && character.isNumber {
                digits.append(character)
            } else if let unit = units[character], let value = Double(digits), !digits.isEmpty {
                total += value * unit
                digits = ""
                sawPair = true
            } else {
                return nil
            }
        }
        return sawPair && digits.isEmpty ? total : nil
    }

    static func argument(_ text: String, direction: Direction) throws -> Date {
        guard let date = parse(text, direction: direction) else {
            let example = direction == .ago ? "2h (two hours ago)" : "2h (two hours from now)"
            throw ValidationError("expected an ISO 8601 date (2026-11-22T10:00:00Z or 2026-11-22) or a duration such as 10m, \(example), 3d")
        }
        return date
    }

    /// `2026-11-22T10:00:00Z`: ISO 8601 in UTC, to the second.
    static func iso(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02dZ",
                      Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
                      Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
    }
}

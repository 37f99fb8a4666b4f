// Fuzzes `HTTPDate.parse` (Date, Expires, Last-Modified, If-Modified-Since values) and
// `HTTPDate.string(from:)`.
//
// Invariants:
// - a text that parses has the shape of one of the three formats of RFC 9110 §5.6.7
//   (`Sun, 06 Nov 1994 08:49:37 GMT`, `Sunday, 06-Nov-94 08:49:37 GMT`, `Sun Nov  6 08:49:37 1994`),
//   letter for letter class, with nothing but spaces and tabs around it;
// - it parses to the same date in upper and in lower case (RFC 9111 §4.2);
// - the date is a whole second, and formats as an IMF-fixdate that parses back to it;
// - any date formats, without trapping, to an IMF-fixdate that parses to that date's whole
//   second, or to the nearest one a four-digit year can write;
// - any date may be the reference for two-digit years, without trapping, and changes the
//   meaning of RFC 850 dates only.
import Foundation
import FuzzSupport
@testable import HTTPCache

/// 2025-06-01T00:00:00Z: the reference for two-digit years, so that runs are repeatable.
private let reference = Date(timeIntervalSince1970: 1_748_736_000)

/// The first and last second an IMF-fixdate can write: 0000-01-01 and 9999-12-31.
private let earliest: TimeInterval = -62_167_219_200
private let latest: TimeInterval = 253_402_300_799

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTPDate(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let value = text(data, size)
    if let date = HTTPDate.parse(value, relativeTo: reference) {
        let trimmed = value.trimmingSpacesAndTabs
        require(shapes.contains { matches(trimmed, $0) }, "\(value.debugDescription) parsed but has no date's shape")
        require(HTTPDate.parse(value.asciiUppercased, relativeTo: reference) == date, "\(value.debugDescription) upper-cased parses otherwise")
        require(HTTPDate.parse(value.asciiLowercased, relativeTo: reference) == date, "\(value.debugDescription) lower-cased parses otherwise")
        let seconds = date.timeIntervalSince1970
        require(seconds.rounded(.down) == seconds && seconds >= earliest && seconds <= latest,
                "\(value.debugDescription) parsed to \(seconds)")
        checkFormatting(date, expected: seconds)
    }
    // The first eight bytes as a time interval: every Double, NaN and infinities included.
    if size >= 8, let data {
        var bits: UInt64 = 0
        for i in 0..<8 { bits |= UInt64(data[i]) << UInt64(8 * i) }
        let date = Date(timeIntervalSince1970: Double(bitPattern: bits))
        // What the Date holds, which is not always the Double it was made from (it counts from 2001).
        let interval = date.timeIntervalSince1970
        let expected = interval.isNaN ? earliest : min(max(interval.rounded(.down), earliest), latest)
        checkFormatting(date, expected: expected)

        // The same instant as the reference for two-digit years (the engine passes a stored
        // response's time, which comes from disk): only an RFC 850 date may read otherwise.
        let rest = String(decoding: UnsafeBufferPointer(start: data + 8, count: size - 8), as: UTF8.self)
        let withFixedReference = HTTPDate.parse(rest, relativeTo: reference)
        let withThisReference = HTTPDate.parse(rest, relativeTo: date)
        if !matches(rest.trimmingSpacesAndTabs, shapes[1]) {
            require(withThisReference == withFixedReference,
                    "\(rest.debugDescription) parses to \(String(describing: withThisReference)) relative to \(interval)")
        } else {
            require((withThisReference == nil) == (withFixedReference == nil),
                    "\(rest.debugDescription) is a date relative to one reference only")
        }
    }
    return 0
}

private func checkFormatting(_ date: Date, expected: TimeInterval) {
    let formatted = HTTPDate.string(from: date)
    require(matches(formatted, imfFixdate) && formatted.hasSuffix(" GMT"), "\(date.timeIntervalSince1970) formats as \(formatted.debugDescription)")
    let parsed = HTTPDate.parse(formatted)
    require(parsed == Date(timeIntervalSince1970: expected),
            "\(date.timeIntervalSince1970) formats as \(formatted), which parses to \(String(describing: parsed?.timeIntervalSince1970)), not \(expected)")
}

// Shapes: `a` a letter, `d` a digit, `+` one or more letters, anything else itself.
private let imfFixdate = "aaa, dd aaa dddd dd:dd:dd aaa"
private let shapes = [imfFixdate, "+, dd-aaa-dd dd:dd:dd aaa", "aaa aaa dd dd:dd:dd dddd", "aaa aaa  d dd:dd:dd dddd"]

private func matches(_ text: String, _ shape: String) -> Bool {
    let bytes = Array(text.utf8)
    var position = 0
    func isLetter(_ byte: UInt8) -> Bool { (byte | 0x20) >= 0x61 && (byte | 0x20) <= 0x7A }
    for symbol in shape.utf8 {
        switch symbol {
        case UInt8(ascii: "a"):
            guard position < bytes.count, isLetter(bytes[position]) else { return false }
            position += 1
        case UInt8(ascii: "d"):
            guard position < bytes.count, bytes[position] >= 0x30, bytes[position] <= 0x39 else { return false }
            position += 1
        case UInt8(ascii: "+"):
            let start = position
            while position < bytes.count, isLetter(bytes[position]) { position += 1 }
            guard position > start else { return false }
        default:
            guard position < bytes.count, bytes[position] == symbol else { return false }
            position += 1
        }
    }
    return position == bytes.count
}

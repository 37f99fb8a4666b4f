// What every fuzz target shares: how an invariant failure is reported, and how input bytes
// become the text an HTTP parser reads.

/// Stops the process when an invariant does not hold, so that libFuzzer records the input as a
/// crash (`crash-<sha1>` beside the working corpus) with the message on standard error.
public func require(
    _ condition: @autoclosure () -> Bool,
    _ message: @autoclosure () -> String,
    file: StaticString = #fileID,
    line: UInt = #line
) {
    if !condition() {
        fatalError("invariant violated: \(message())", file: file, line: line)
    }
}

/// The input as text. Field values reach the HTTP parsers as `String`s, so invalid UTF-8 is
/// repaired the way `String(decoding:as:)` does it everywhere else.
public func text(_ data: UnsafePointer<UInt8>?, _ size: Int) -> String {
    String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
}

/// The input as field lines: split at line feeds, a carriage return before one dropped.
public func lines(_ text: String) -> [String] {
    // Bytes, not Characters: "\r\n" is one Character and would not split at "\n".
    text.utf8.split(separator: 0x0A, omittingEmptySubsequences: false).map { line in
        String(decoding: line.last == 0x0D ? line.dropLast() : line, as: UTF8.self)
    }
}

extension String {
    /// ASCII letters upper-cased, everything else as it is.
    public var asciiUppercased: String {
        String(decoding: utf8.map { $0 >= 0x61 && $0 <= 0x7A ? $0 - 0x20 : $0 }, as: UTF8.self)
    }

    /// ASCII letters lower-cased, everything else as it is.
    public var asciiLowercased: String {
        String(decoding: utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }, as: UTF8.self)
    }

    /// Without the spaces and tabs around it (RFC 9110 §5.5: they are not part of a field value).
    public var trimmingSpacesAndTabs: String {
        let bytes = Array(utf8)
        var start = 0, end = bytes.count
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
        while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }
}

/// RFC 9111 §1.2.2, computed another way: all digits, leading zeros ignored, 2^31 at most.
public func deltaSeconds(_ text: String) -> Int? {
    guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
    let significant = text.drop { $0 == "0" }
    if significant.count > 10 { return 2_147_483_648 }
    return min(Int(significant) ?? 0, 2_147_483_648)
}

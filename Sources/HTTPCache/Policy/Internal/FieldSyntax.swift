// Small parsers for the field-value syntax of RFC 9110 §5.6 shared by the policy types.

extension String {
    /// ASCII-only lowercase: field names and directive names are ASCII tokens, and a
    /// locale-aware lowercasing would be both slower and wrong for them.
    var _asciiLowercased: String {
        guard utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) else { return self }
        return String(decoding: utf8.map { ($0 >= 0x41 && $0 <= 0x5A) ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// Case-insensitive comparison of two ASCII tokens (RFC 9110 §5.1: field names are case-insensitive).
    func _asciiCaseInsensitiveEquals(_ other: String) -> Bool {
        let lhs = utf8, rhs = other.utf8
        guard lhs.count == rhs.count else { return false }
        for (a, b) in zip(lhs, rhs) where a != b {
            let la = (a >= 0x41 && a <= 0x5A) ? a | 0x20 : a
            let lb = (b >= 0x41 && b <= 0x5A) ? b | 0x20 : b
            if la != lb { return false }
        }
        return true
    }

    /// The value with optional whitespace (SP / HTAB, RFC 9110 §5.6.3) removed from both ends.
    var _trimmingOWS: String {
        // As a rule nothing to trim (NIO and Foundation hand over trimmed values): no copy then.
        func isOWS(_ byte: UInt8?) -> Bool { byte == 0x20 || byte == 0x09 }
        if !isOWS(utf8.first) && !isOWS(utf8.last) { return self }
        let bytes = Array(utf8)
        var start = 0, end = bytes.count
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
        while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
        if start == 0 && end == bytes.count { return self }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }
}

enum _FieldSyntax {
    /// Splits a list-based field value (`#element`, RFC 9110 §5.6.1) into its elements.
    ///
    /// Commas inside quoted strings do not separate elements, empty elements are dropped
    /// (the grammar allows `a, , b`), and each element is trimmed of surrounding whitespace.
    static func listElements(_ value: String) -> [String] {
        var elements: [String] = []
        var current: [UInt8] = []
        var inQuotes = false
        var escaped = false
        for byte in value.utf8 {
            if inQuotes {
                current.append(byte)
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inQuotes = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: ","):
                let element = String(decoding: current, as: UTF8.self)._trimmingOWS
                if !element.isEmpty { elements.append(element) }
                current.removeAll(keepingCapacity: true)
            case UInt8(ascii: "\""):
                inQuotes = true
                current.append(byte)
            default:
                current.append(byte)
            }
        }
        let last = String(decoding: current, as: UTF8.self)._trimmingOWS
        if !last.isEmpty { elements.append(last) }
        return elements
    }

    /// Parses `delta-seconds` (RFC 9111 §1.2.2): one or more ASCII digits, nothing else.
    ///
    /// Values beyond what the cache can represent are clamped to 2^31 as §1.2.2 requires.
    /// Returns `nil` for anything that is not a non-negative decimal integer.
    static func deltaSeconds(_ text: String) -> Int? {
        guard !text.isEmpty else { return nil }
        var result = 0
        for byte in text.utf8 {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            if result < 2_147_483_648 {
                result = result * 10 + Int(byte - 0x30)
            }
        }
        return min(result, 2_147_483_648)
    }
}

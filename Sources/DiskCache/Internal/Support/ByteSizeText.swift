import Foundation

/// Sizes as people write them, shared by the command-line tools (`diskcache`, `diskcache-server`)
/// so that both accept the same: `512`, `512K`, `64M`, `2G`, `1T`, `1P` (binary units,
/// case-insensitive, optionally followed by `B` or `iB`: `64MB`, `64MiB`; a fraction that names
/// a whole number of bytes or more: `1.5G`).
package enum ByteSizeText {
    /// The bytes `text` names; nil when it is not a size (or one too large for 64 bits).
    package static func parse(_ text: String) -> Int64? {
        var rest = Substring(text.trimmingCharacters(in: .whitespaces)).lowercased()[...]
        if rest.hasSuffix("ib") {
            rest = rest.dropLast(2)
            guard let last = rest.last, "kmgtp".contains(last) else { return nil }
        } else if rest.hasSuffix("b") {
            rest = rest.dropLast()
        }
        var shift: Int64 = 0
        if let last = rest.last, let index = "kmgtp".firstIndex(of: last) {
            shift = Int64("kmgtp".distance(from: "kmgtp".startIndex, to: index) + 1) * 10
            rest = rest.dropLast()
        }
        guard !rest.isEmpty, rest.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              rest.filter({ $0 == "." }).count <= 1
        else { return nil }
        if rest.contains(".") {
            // "1.5G": fractional sizes are fine when they name a whole number of bytes.
            guard let value = Double(rest), value.isFinite else { return nil }
            let bytes = (value * Double(Int64(1) << shift)).rounded(.down)
            guard bytes < 9.2e18 else { return nil }
            return Int64(bytes)
        }
        guard let value = Int64(rest) else { return nil }
        let (result, overflow) = value.multipliedReportingOverflow(by: Int64(1) << shift)
        return overflow ? nil : result
    }

    /// `1234` → "1.2 KiB"; under 1 KiB, "123 B".
    package static func format(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
        var value = Double(bytes)
        var unit = 0
        while abs(value) >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(bytes) B" }
        return String(format: value >= 100 ? "%.0f" : "%.1f", value) + " " + units[unit]
    }
}

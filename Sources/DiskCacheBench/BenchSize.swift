import Foundation

package enum BenchSize {
    /// `512`, `1K`, `16K`, `4M`, `1G` (binary units, optional `B`/`iB`).
    package static func parse(_ text: String) -> Int? {
        var rest = text.trimmingCharacters(in: .whitespaces).uppercased()[...]
        if rest.hasSuffix("IB") { rest = rest.dropLast(2) } else if rest.hasSuffix("B") { rest = rest.dropLast() }
        var shift = 0
        if let last = rest.last, let position = "KMG".firstIndex(of: last) {
            shift = ("KMG".distance(from: "KMG".startIndex, to: position) + 1) * 10
            rest = rest.dropLast()
        }
        guard let value = Int(rest), value >= 0 else { return nil }
        return value << shift
    }

    /// 1024 → "1K", 4194304 → "4M", 1500 → "1500".
    package static func label(_ bytes: Int) -> String {
        if bytes >= 1 << 20, bytes % (1 << 20) == 0 { return "\(bytes >> 20)M" }
        if bytes >= 1 << 10, bytes % (1 << 10) == 0 { return "\(bytes >> 10)K" }
        return "\(bytes)"
    }
}

import Foundation

/// Aligned columns for human-readable output; the last column is never padded, so a long
/// key does not push trailing spaces.
struct Table {
    enum Alignment { case left, right }

    var headers: [String]
    var alignments: [Alignment]
    var rows: [[String]] = []

    init(_ columns: [(String, Alignment)]) {
        headers = columns.map(\.0)
        alignments = columns.map(\.1)
    }

    mutating func append(_ row: [String]) {
        precondition(row.count == headers.count, "a row needs one cell per column")
        rows.append(row)
    }

    func render(separator: String = "  ") -> String {
        let all = [headers] + rows
        let widths = headers.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        var out = ""
        for row in all {
            var line = ""
            for (column, cell) in row.enumerated() {
                if column > 0 { line += separator }
                let padding = String(repeating: " ", count: widths[column] - cell.count)
                if column == row.count - 1 {
                    line += alignments[column] == .right ? padding + cell : cell
                } else {
                    line += alignments[column] == .right ? padding + cell : cell + padding
                }
            }
            out += line + "\n"
        }
        return out
    }
}

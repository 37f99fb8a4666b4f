import Foundation

/// "label:  value" lines with the values aligned.
struct Fields {
    private var pairs: [(String, String)] = []

    mutating func add(_ label: String, _ value: String) { pairs.append((label, value)) }

    func render() -> String {
        let width = (pairs.map(\.0.count).max() ?? 0) + 1
        return pairs.map { label, value in
            (label + ":").padding(toLength: width, withPad: " ", startingAt: 0) + "  " + value + "\n"
        }.joined()
    }
}

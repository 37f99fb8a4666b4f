import Foundation

/// A one-line progress bar on standard error, drawn only when standard error is a terminal
/// (so redirected output and scripts never see it). Redraws at most when the shown value changes.
final class ProgressBar {
    private let label: String
    private let isEnabled: Bool
    private var lastDrawn = ""
    private var lastDrawTime = Date.distantPast

    init(label: String, enabled: Bool = Terminal.standardErrorIsTerminal) {
        self.label = label
        self.isEnabled = enabled
    }

    func update(done: Int, total: Int) {
        guard isEnabled else { return }
        let now = Date()
        // At most ~20 redraws a second, but always the final one.
        if done < total && now.timeIntervalSince(lastDrawTime) < 0.05 { return }
        let line = Self.line(label: label, done: done, total: total, columns: Terminal.standardErrorColumns)
        guard line != lastDrawn else { return }
        lastDrawn = line
        lastDrawTime = now
        Terminal.writeError("\r" + line + "\u{1B}[K")
    }

    /// Erases the bar so that what follows starts on a clean line.
    func finish() {
        guard isEnabled, !lastDrawn.isEmpty else { return }
        Terminal.writeError("\r\u{1B}[K")
        lastDrawn = ""
    }

    /// "verifying [#########...........]  45%  450/1000", fitted to `columns`.
    static func line(label: String, done: Int, total: Int, columns: Int) -> String {
        let fraction = total > 0 ? min(1, Double(done) / Double(total)) : 1
        let counts = "\(done)/\(total)"
        let percent = String(format: "%3d%%", Int((fraction * 100).rounded(.down)))
        let fixed = label.count + 2 + 2 + 2 + percent.count + 2 + counts.count
        let width = max(10, min(40, columns - 1 - fixed))
        let filled = Int((Double(width) * fraction).rounded(.down))
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        return "\(label)  [\(bar)]  \(percent)  \(counts)"
    }
}

import Foundation
import DiskCacheLocking
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A one-line progress bar on standard error (a line per phase when it is not a terminal).
/// Thread-safe; redraws at most ten times a second.
package final class BenchProgress: Sendable {
    private struct State {
        var totalPhases = 1
        var finishedPhases = 0
        var fraction = 0.0
        var label = ""
        var lastDraw: UInt64 = 0
        var start: UInt64 = benchNanoseconds()
    }
    private let state = PthreadMutex(State())
    private let isTerminal: Bool
    private let isEnabled: Bool

    /// Whether anything redraws while a phase runs.
    var isVisible: Bool { isEnabled && isTerminal }

    /// Draws nothing: for runs inside a phase whose progress the caller reports.
    static let silent = BenchProgress(enabled: false)

    package init(enabled: Bool) {
        isEnabled = enabled
        isTerminal = isatty(STDERR_FILENO) == 1
    }

    package func plan(phases: Int) {
        state.withLock { $0.totalPhases = max(1, phases) }
    }

    /// Starts the next phase.
    func phase(_ label: String) {
        let line: String? = state.withLock { state in
            if !state.label.isEmpty { state.finishedPhases += 1 }
            state.label = label
            state.fraction = 0
            state.lastDraw = 0
            return isTerminal ? nil : "[\(percent(state))] \(label)\n"
        }
        guard isEnabled else { return }
        if let line { Self.writeError(line) } else { draw(force: true) }
    }

    /// How far the current phase is, 0...1.
    func phaseFraction(_ fraction: Double) {
        guard isEnabled, isTerminal else { return }
        state.withLock { $0.fraction = min(1, max(0, fraction)) }
        draw(force: false)
    }

    /// A remark that should stay on screen above the bar.
    package func note(_ text: String) {
        guard isEnabled else { return }
        Self.writeError((isTerminal ? "\r\u{1B}[K" : "") + text + "\n")
        draw(force: true)
    }

    package func finish() {
        guard isEnabled else { return }
        let elapsed = state.withLock { Double(benchNanoseconds() - $0.start) / 1e9 }
        Self.writeError((isTerminal ? "\r\u{1B}[K" : "") + String(format: "bench: done in %.1f s\n", elapsed))
    }

    private func percent(_ state: State) -> String {
        let done = (Double(state.finishedPhases) + state.fraction) / Double(state.totalPhases)
        return String(format: "%3.0f%%", min(100, done * 100))
    }

    private func draw(force: Bool) {
        guard isEnabled, isTerminal else { return }
        let line: String? = state.withLock { state in
            let now = benchNanoseconds()
            guard force || now - state.lastDraw > 100_000_000 else { return nil }
            state.lastDraw = now
            let width = 30
            let done = min(1, (Double(state.finishedPhases) + state.fraction) / Double(state.totalPhases))
            let filled = Int(done * Double(width))
            let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
            let elapsed = Double(now - state.start) / 1e9
            return "\r\u{1B}[K[\(bar)] \(percent(state)) \(String(format: "%5.1fs", elapsed))  \(state.label)"
        }
        if let line { Self.writeError(line) }
    }

    static func writeError(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { write(STDERR_FILENO, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 { if errno == EINTR { continue } else { return } }
            offset += written
        }
        bytes.removeAll()
    }
}

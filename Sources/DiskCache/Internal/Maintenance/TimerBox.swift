import Dispatch

/// Dispatch sources are thread-safe to cancel from any thread, but not marked `Sendable`.
final class TimerBox: @unchecked Sendable {  // unchecked: DispatchSource is internally synchronised
    let source: any DispatchSourceTimer
    init(source: any DispatchSourceTimer) { self.source = source }
}

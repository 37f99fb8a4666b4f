import ArgumentParser
import DiskCache

/// An error the tool reports as one line on standard error, exiting with `status`.
struct ToolError: Error, CustomStringConvertible {
    var message: String
    var status: Int32

    init(_ message: String, status: Int32 = ExitStatus.failed) {
        self.message = message
        self.status = status
    }

    var description: String { message }

    static func usage(_ message: String) -> ToolError { ToolError(message, status: ExitStatus.usage) }

    static func noSuchEntry(_ key: String) -> ToolError {
        ToolError("No entry for key \(Terminal.quoted(key))", status: ExitStatus.noSuchEntry)
    }
}

extension DiskCacheError {
    /// Failures of the operation itself; every other code means the cache could not be opened.
    var exitStatus: Int32 {
        switch code {
        case .diskFull, .ioFailure, .closed, .invalidArgument, .corruptEntry, .undecodableValue: ExitStatus.failed
        default: ExitStatus.cannotOpen
        }
    }
}

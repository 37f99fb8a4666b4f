import ArgumentParser
import DiskCache
import DiskCacheBench
import Foundation
import Logging

@main
struct DiskCacheTool: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diskcache",
        abstract: "Inspect, verify and maintain a DiskCache directory.",
        discussion: """
            Every subcommand takes the cache directory as its first argument. The read-only \
            subcommands (stats, ls, show, get, verify without --repair) never create or modify \
            anything (a verify of a shared cache takes its writers' locks for a moment to settle \
            what looks like an orphan); on a cache a running process has open they report what it held \
            when they read it. The others open the cache shared, beside any application and \
            any other command using it; one that an application opened exclusively they wait \
            for (--wait), then refuse.

            Sizes are bytes or binary units: 512, 512K, 64M, 2G, 1T (64MB and 64MiB too).

            \(ExitStatus.helpText)
            """,
        subcommands: [
            Stats.self, List.self, Show.self, Get.self, Put.self, Remove.self, Clear.self,
            Verify.self, Compact.self, Sweep.self, Bench.self, BenchWorker.self,
        ]
    )

    /// Parses and runs like ArgumentParser's own `main`, with the tool's exit statuses: usage
    /// errors exit 2 (not 64), and a `DiskCacheError` or a `ToolError` prints as one line.
    static func main() async {
        LoggingSystem.bootstrap { label in
            // The store reports what it repaired at open; that belongs on stderr, never in
            // the middle of `get`'s bytes on stdout.
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .warning
            return handler
        }
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            fail(with: error)
        }
    }

    static func fail(with error: any Error) -> Never {
        switch error {
        case let error as ToolError:
            exit(status: error.status, message: error.message)
        case let error as BenchError:
            exit(status: ExitStatus.failed, message: error.description)
        case let error as DiskCacheError:
            exit(status: error.exitStatus, message: error.description)
        default:
            let status = exitCode(for: error)
            if status == .validationFailure {
                Terminal.writeError(fullMessage(for: error) + "\n")
                Foundation.exit(ExitStatus.usage)
            }
            exit(withError: error)
        }
    }

    private static func exit(status: Int32, message: String) -> Never {
        let oneLine = message.split(whereSeparator: \.isNewline).joined(separator: " ")
        Terminal.writeError("diskcache: error: \(oneLine)\n")
        Foundation.exit(status)
    }
}

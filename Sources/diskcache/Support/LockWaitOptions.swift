import ArgumentParser

/// How long a command that writes waits for a cache another process has open.
struct LockWaitOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Seconds to wait while another process has the cache open (0: fail at once).",
                               valueName: "seconds"))
    var wait: Double = 10

    func validate() throws {
        guard wait >= 0, wait.isFinite else { throw ValidationError("--wait must be 0 or more seconds") }
    }
}

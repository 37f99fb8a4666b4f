import ArgumentParser
import DiskCache
import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The cache directory every subcommand takes as its first argument.
struct CacheOptions: ParsableArguments {
    @Argument(help: ArgumentHelp("The cache directory.", valueName: "directory"), completion: .directory)
    var directory: String

    var url: URL { URL(fileURLWithPath: directory) }

    /// Opens the cache read-only: never creates, locks or writes anything.
    func inspect() throws -> DiskCacheInspector {
        try DiskCacheInspector(directory: url)
    }

    /// ``inspect()`` that also reads a cache a running process has open, as a snapshot, and
    /// says so on standard error (standard output stays the command's own).
    func inspectSnapshot(quietly: Bool = false) throws -> DiskCacheInspector {
        let inspector = try DiskCacheInspector(directory: url, whileOpen: true)
        if !quietly, let owner = inspector.summary.openBy {
            let by = owner.isEmpty ? "" : owner == "shared" ? " (shared by running processes)" : " in process " + owner
            Terminal.writeError("note: the cache is open\(by); this is what it held when read\n")
        }
        return inspector
    }

    /// Opens an existing cache read-write (taking its lock). Unless `create` is true, a missing
    /// directory or one that is not a cache yet is refused rather than turned into a new cache.
    ///
    /// The tool's configuration never evicts on its own: no capacity, no free-space floor and
    /// no background sweeper, so that opening someone's cache to look at it or store one entry
    /// cannot shrink it; and every write is made durable before the command returns.
    ///
    /// With `reportsRecovery` false, what opening repairs (a torn journal tail) is not logged:
    /// the caller reports it itself.
    ///
    /// A cache another process has open (``DiskCacheError/Code/locked``) is tried again every few
    /// milliseconds for up to `waiting` seconds, so that commands started together (twenty
    /// `diskcache put` from a script) take turns instead of failing.
    func open(create: Bool = false, reportsRecovery: Bool = true, waiting: Double = 0) throws -> DiskCache {
        try Self.retryingWhileLocked(waiting: waiting) { try openOnce(create: create, reportsRecovery: reportsRecovery) }
    }

    /// Runs `body` again, after short jittered pauses, while it throws ``DiskCacheError/Code/locked``
    /// and `waiting` seconds have not passed; the last error then says how long it waited.
    private static func retryingWhileLocked<T>(waiting: Double, _ body: () throws -> T) throws -> T {
        let deadline = Date().addingTimeInterval(max(0, waiting))
        var pause = 0.002
        while true {
            do {
                return try body()
            } catch let error as DiskCacheError where error.code == .locked && Date() < deadline {
                // Growing pauses: the holders are other short commands, as a rule.
                Thread.sleep(forTimeInterval: min(pause * Double.random(in: 0.5...1.5), max(0, deadline.timeIntervalSinceNow)))
                pause = min(pause * 2, 0.05)
            } catch let error as DiskCacheError where error.code == .locked && waiting > 0 {
                throw DiskCacheError(code: .locked, message: error.message + " (waited \(String(format: "%g", waiting)) s; --wait sets how long)",
                                     path: error.path, errno: error.errno)
            }
        }
    }

    private func openOnce(create: Bool, reportsRecovery: Bool) throws -> DiskCache {
        if !create { try checkIsCache() }
        var configuration = DiskCache.Configuration(
            diskCapacity: .max,
            durability: .immediate,
            minimumFreeSpace: 0,
            minimumFreeFraction: 0,
            sweepInterval: nil
        )
        if !reportsRecovery { configuration.logger.logLevel = .error }
        // A tool opens a cache of any kind as it is (and marks a cache it makes with none).
        configuration.kind = nil
        return try DiskCache(directory: url, configuration: configuration)
    }

    /// The cheap checks `DiskCache` itself does not make, because it creates a cache where
    /// there is none: the directory exists and holds a cache's files.
    private func checkIsCache() throws {
        let path = url.path
        var info = stat()
        guard stat(path, &info) == 0 else {
            let error = errno
            if error == ENOENT {
                throw ToolError("No such directory (\(path))", status: ExitStatus.cannotOpen)
            }
            throw ToolError("Cannot look at the cache directory (\(path)): \(String(cString: strerror(error)))",
                            status: error == EACCES ? ExitStatus.cannotOpen : ExitStatus.failed)
        }
        // Not a directory: DiskCache says so itself.
        guard info.st_mode & S_IFMT == S_IFDIR else { return }
        // An unreadable directory: DiskCache reports the permission problem.
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return }
        guard names.contains("VERSION") || names.contains("journal") else {
            let what = names.isEmpty ? "The directory is empty" : "The directory holds other files"
            throw ToolError("\(what) and is not a cache (\(path))", status: ExitStatus.cannotOpen)
        }
    }
}

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

    /// Opens an existing cache read-write (taking its lock). Unless `create` is true, a missing
    /// directory or one that is not a cache yet is refused rather than turned into a new cache.
    ///
    /// The tool's configuration never evicts on its own: no capacity, no free-space floor and
    /// no background sweeper, so that opening someone's cache to look at it or store one entry
    /// cannot shrink it; and every write is made durable before the command returns.
    ///
    /// With `reportsRecovery` false, what opening repairs (a torn journal tail) is not logged:
    /// the caller reports it itself.
    func open(create: Bool = false, reportsRecovery: Bool = true) throws -> DiskCache {
        if !create { try checkIsCache() }
        var configuration = DiskCache.Configuration(
            diskCapacity: .max,
            durability: .immediate,
            minimumFreeSpace: 0,
            minimumFreeFraction: 0,
            sweepInterval: nil
        )
        if !reportsRecovery { configuration.logger.logLevel = .error }
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

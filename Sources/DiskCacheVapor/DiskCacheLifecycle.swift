#if Vapor
import DiskCache
import Foundation
import Synchronization
import Vapor

/// Closes (or flushes) the cache when the application shuts down.
struct DiskCacheLifecycle: LifecycleHandler {
    let cache: DiskCache
    let closes: Bool

    func shutdown(_ application: Application) {
        do {
            if closes { try cache.close() } else { try cache.flush() }
        } catch {
            application.logger.warning("Could not \(closes ? "close" : "flush") the disk cache in \(cache.directory.path): \(error)")
        }
    }

    func shutdownAsync(_ application: Application) async {
        do {
            if closes { try await cache.close() } else { try await cache.flush() }
        } catch {
            application.logger.warning("Could not \(closes ? "close" : "flush") the disk cache in \(cache.directory.path): \(error)")
        }
    }
}

/// Where a cache opened for the application logs: the application's logger once the provider
/// is in use (``attach(_:)``), the configuration's until then.
final class ApplicationLogs: Sendable {
    private let logger: Mutex<Logger>

    init(until logger: Logger) {
        self.logger = Mutex(logger)
    }

    func attach(_ logger: Logger) {
        self.logger.withLock { $0 = logger }
    }

    var current: Logger { logger.withLock { $0 } }

    /// Hands each message to ``current``, with this handler's own metadata added.
    struct Handler: LogHandler {
        let logs: ApplicationLogs
        var metadata: Logger.Metadata = [:]
        /// A level set on this handler; otherwise the current logger's.
        private var level: Logger.Level?

        init(logs: ApplicationLogs) {
            self.logs = logs
        }

        var logLevel: Logger.Level {
            get { level ?? logs.current.logLevel }
            set { level = newValue }
        }

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String,
                 file: String, function: String, line: UInt) {
            let merged = self.metadata.merging(metadata ?? [:]) { $1 }
            logs.current.log(level: level, message, metadata: merged.isEmpty ? nil : merged, source: source,
                             file: file, function: function, line: line)
        }
    }
}
#endif

#if Vapor
import DiskCache
import Foundation
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
#endif

public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import DiskCache

extension HTTPURLCache {
    /// The calls that read or write the disk tier as `async` functions, run on the I/O threads
    /// the caches share, never on Swift's cooperative pool (see `DiskCache`'s async API):
    /// `try await cache.async.cachedResponse(for: request)`.
    ///
    /// They are reached through this property, not as overloads of `URLCache`'s own names, so
    /// that code written against `URLCache` compiles unchanged in `async` functions too: there
    /// `cache.cachedResponse(for: request)` is `URLCache`'s synchronous call, as it is for any
    /// `URLCache`. A task cancelled before the I/O starts throws `CancellationError`, and
    /// nothing is read, stored or removed.
    public var async: AsyncCalls { AsyncCalls(cache: self) }

    /// ``HTTPURLCache/async``'s calls.
    public struct AsyncCalls: Sendable {
        let cache: HTTPURLCache

        /// ``HTTPURLCache/cachedResponse(for:)`` on the caches' I/O threads.
        public func cachedResponse(for request: URLRequest) async throws -> CachedURLResponse? {
            let cache = self.cache
            let box = try await BlockingIOPool.shared.run { UncheckedBox(cache.cachedResponse(for: request)) }
            return box.value
        }

        /// ``HTTPURLCache/storedResponse(for:)`` on the caches' I/O threads.
        public func storedResponse(for request: URLRequest) async throws -> CachedHTTPResponse? {
            let cache = self.cache
            return try await BlockingIOPool.shared.run { cache.storedResponse(for: request) }
        }

        /// ``HTTPURLCache/storeCachedResponse(_:for:)-9vcqg`` on the caches' I/O threads.
        public func storeCachedResponse(_ cachedResponse: CachedURLResponse, for request: URLRequest) async throws {
            let cache = self.cache
            let response = UncheckedBox(cachedResponse)
            try await BlockingIOPool.shared.run { cache.storeCachedResponse(response.value, for: request) }
        }

        /// ``HTTPURLCache/removeCachedResponse(for:)-(URLRequest)`` on the caches' I/O threads.
        public func removeCachedResponse(for request: URLRequest) async throws {
            let cache = self.cache
            try await BlockingIOPool.shared.run { cache.removeCachedResponse(for: request) }
        }

        /// ``HTTPURLCache/removeAllCachedResponses()`` on the caches' I/O threads.
        public func removeAllCachedResponses() async throws {
            let cache = self.cache
            try await BlockingIOPool.shared.run { cache.removeAllCachedResponses() }
        }

        /// ``HTTPURLCache/removeCachedResponses(since:)`` on the caches' I/O threads.
        public func removeCachedResponses(since date: Date) async throws {
            let cache = self.cache
            try await BlockingIOPool.shared.run { cache.removeCachedResponses(since: date) }
        }
    }
}

/// Carries a Foundation object that is not declared `Sendable` (`CachedURLResponse`, immutable
/// once made) to or from the I/O thread, which uses it only while the caller waits.
struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

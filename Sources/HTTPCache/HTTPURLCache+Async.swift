public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import DiskCache

// The async forms of the calls that read or write the disk tier, run on the I/O threads the
// caches share, never on Swift's cooperative pool (see `DiskCache`'s async API). In an async
// context Swift picks them, and asks for `await`. A task cancelled before the I/O starts throws
// `CancellationError`, and nothing is read, stored or removed.

extension HTTPURLCache {
    /// ``cachedResponse(for:)`` on the caches' I/O threads.
    public func cachedResponse(for request: URLRequest) async throws -> CachedURLResponse? {
        let box = try await BlockingIOPool.shared.run { UncheckedBox(self.cachedResponse(for: request)) }
        return box.value
    }

    /// ``storedResponse(for:)`` on the caches' I/O threads.
    public func storedResponse(for request: URLRequest) async throws -> CachedHTTPResponse? {
        try await BlockingIOPool.shared.run { self.storedResponse(for: request) }
    }

    /// ``storeCachedResponse(_:for:)-9vcqg`` on the caches' I/O threads.
    public func storeCachedResponse(_ cachedResponse: CachedURLResponse, for request: URLRequest) async throws {
        let response = UncheckedBox(cachedResponse)
        try await BlockingIOPool.shared.run { self.storeCachedResponse(response.value, for: request) }
    }

    /// ``removeCachedResponse(for:)-(URLRequest)`` on the caches' I/O threads.
    public func removeCachedResponse(for request: URLRequest) async throws {
        try await BlockingIOPool.shared.run { self.removeCachedResponse(for: request) }
    }

    /// ``removeAllCachedResponses()`` on the caches' I/O threads.
    public func removeAllCachedResponses() async throws {
        try await BlockingIOPool.shared.run { self.removeAllCachedResponses() }
    }

    /// ``removeCachedResponses(since:)`` on the caches' I/O threads.
    public func removeCachedResponses(since date: Date) async throws {
        try await BlockingIOPool.shared.run { self.removeCachedResponses(since: date) }
    }
}

/// Carries a Foundation object that is not declared `Sendable` (`CachedURLResponse`, immutable
/// once made) to or from the I/O thread, which uses it only while the caller waits.
struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

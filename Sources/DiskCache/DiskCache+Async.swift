public import Foundation

// The async API: the same calls as the synchronous one, run on the threads of a pool the caches
// own (as many as the machine has cores, 2 to 8, shared by every cache of the process), never
// on Swift's cooperative pool, so that a task waiting for the disk leaves the pool's threads to
// the others. In an async function Swift picks these overloads, and asks for `await` (calls that
// take a closure, `withFile`, too: their blocking forms are disfavoured). Top-level code in a
// `main.swift` is the exception: there Swift picks the blocking forms, so put async work in an
// async function.
//
// Cancellation is honoured until the I/O starts: a task cancelled before the call, or while
// its call waits for a thread, throws `CancellationError` and nothing is read or written. A
// call that has started runs to the end and returns its result.

extension DiskCache {
    /// ``data(for:)`` on the cache's I/O threads.
    public func data(for key: String) async throws -> Data? {
        try await BlockingIOPool.shared.run { self.data(for: key) }
    }

    /// ``dataAndEntry(for:)`` on the cache's I/O threads.
    public func dataAndEntry(for key: String) async throws -> (data: Data, entry: Entry)? {
        try await BlockingIOPool.shared.run { self.dataAndEntry(for: key) }
    }

    /// ``entry(for:)`` on the cache's I/O threads.
    public func entry(for key: String) async throws -> Entry? {
        try await BlockingIOPool.shared.run { self.entry(for: key) }
    }

    /// ``store(_:for:metadata:expires:)`` on the cache's I/O threads; returns whether it wrote.
    @discardableResult
    public func store(_ data: Data, for key: String, metadata: [String: String] = [:], expires: Date? = nil) async throws -> Bool {
        try await BlockingIOPool.shared.run { try self.store(data, for: key, metadata: metadata, expires: expires) }
    }

    /// ``store(value:for:coder:metadata:expires:)``: the value is encoded on the calling task,
    /// then stored on the cache's I/O threads; returns whether it wrote.
    @discardableResult
    public func store<Value: Encodable>(value: Value, for key: String, coder: some CacheCoder = JSONCacheCoder(),
                                        metadata: [String: String] = [:], expires: Date? = nil) async throws -> Bool {
        let data = try TypedValues.encode(value, for: key, with: coder)
        return try await store(data, for: key, metadata: metadata, expires: expires)
    }

    /// ``value(_:for:coder:removingIfUndecodable:)`` on the cache's I/O threads.
    public func value<Value: Decodable & Sendable>(_ type: Value.Type, for key: String,
                                                   coder: some CacheCoder = JSONCacheCoder(),
                                                   removingIfUndecodable: Bool = false) async throws -> Value? {
        try await BlockingIOPool.shared.run {
            try self.value(type, for: key, coder: coder, removingIfUndecodable: removingIfUndecodable)
        }
    }

    /// ``updateMetadata(_:for:)`` on the cache's I/O threads.
    public func updateMetadata(_ metadata: [String: String], for key: String) async throws -> Bool {
        try await BlockingIOPool.shared.run { try self.updateMetadata(metadata, for: key) }
    }

    /// ``removeValue(for:)`` on the cache's I/O threads.
    public func removeValue(for key: String) async throws {
        try await BlockingIOPool.shared.run { try self.removeValue(for: key) }
    }

    /// ``removeAll()`` on the cache's I/O threads.
    public func removeAll() async throws {
        try await BlockingIOPool.shared.run { try self.removeAll() }
    }

    /// ``removeEntries(modifiedSince:)`` on the cache's I/O threads.
    public func removeEntries(modifiedSince date: Date) async throws {
        try await BlockingIOPool.shared.run { try self.removeEntries(modifiedSince: date) }
    }

    /// ``flush()`` on the cache's I/O threads.
    public func flush() async throws {
        try await BlockingIOPool.shared.run { try self.flush() }
    }

    /// ``close()`` on the cache's I/O threads.
    public func close() async throws {
        try await BlockingIOPool.shared.run { try self.close() }
    }

    /// ``sweep()`` on the cache's I/O threads.
    public func sweep() async throws -> SweepReport {
        try await BlockingIOPool.shared.run { self.sweep() }
    }

    /// ``trim(toSize:)`` on the cache's I/O threads.
    public func trim(toSize size: Int64) async throws -> SweepReport {
        try await BlockingIOPool.shared.run { self.trim(toSize: size) }
    }

    /// ``compact()`` on the cache's I/O threads.
    public func compact() async throws {
        try await BlockingIOPool.shared.run { try self.compact() }
    }

    /// ``verify(repair:progress:)`` on the cache's I/O threads; `progress` is called on them.
    public func verify(repair: Bool = false,
                       progress: (@Sendable (_ done: Int, _ total: Int) -> Void)? = nil) async throws -> VerificationReport {
        try await BlockingIOPool.shared.run { try self.verify(repair: repair, progress: progress) }
    }
}

extension TieredCache {
    /// ``record(for:)``: a value in the memory tier is returned at once, on the calling task;
    /// one that must be read from disk is read on the cache's I/O threads.
    public func record(for key: String) async throws -> Record? {
        if let record = memoryRecord(for: key) { return record }
        return try await BlockingIOPool.shared.run { self.diskRecord(for: key) }
    }

    /// ``data(for:)``, as ``record(for:)-2w7bz`` async reads.
    public func data(for key: String) async throws -> Data? {
        try await record(for: key)?.data
    }

    /// ``store(_:for:metadata:expires:policy:)`` on the cache's I/O threads (a memory-only
    /// store included: it removes the key from the disk tier).
    public func store(_ data: Data, for key: String, metadata: [String: String] = [:], expires: Date? = nil,
                      policy: StoragePolicy = .allowed) async throws {
        try await BlockingIOPool.shared.run {
            try self.store(data, for: key, metadata: metadata, expires: expires, policy: policy)
        }
    }

    /// ``store(value:for:coder:metadata:expires:policy:)``: encoded on the calling task, stored
    /// on the cache's I/O threads.
    public func store<Value: Encodable>(value: Value, for key: String, coder: some CacheCoder = JSONCacheCoder(),
                                        metadata: [String: String] = [:], expires: Date? = nil,
                                        policy: StoragePolicy = .allowed) async throws {
        let data = try TypedValues.encode(value, for: key, with: coder)
        try await store(data, for: key, metadata: metadata, expires: expires, policy: policy)
    }

    /// ``value(_:for:coder:removingIfUndecodable:)`` on the cache's I/O threads.
    public func value<Value: Decodable & Sendable>(_ type: Value.Type, for key: String,
                                                   coder: some CacheCoder = JSONCacheCoder(),
                                                   removingIfUndecodable: Bool = false) async throws -> Value? {
        try await BlockingIOPool.shared.run {
            try self.value(type, for: key, coder: coder, removingIfUndecodable: removingIfUndecodable)
        }
    }

    /// ``updateMetadata(_:for:policy:)`` on the cache's I/O threads.
    public func updateMetadata(_ metadata: [String: String], for key: String,
                               policy: StoragePolicy = .allowed) async throws -> Bool {
        try await BlockingIOPool.shared.run { try self.updateMetadata(metadata, for: key, policy: policy) }
    }

    /// ``removeValue(for:)`` on the cache's I/O threads.
    public func removeValue(for key: String) async throws {
        try await BlockingIOPool.shared.run { try self.removeValue(for: key) }
    }

    /// ``removeAll()`` on the cache's I/O threads.
    public func removeAll() async throws {
        try await BlockingIOPool.shared.run { try self.removeAll() }
    }

    /// ``removeEntries(modifiedSince:)`` on the cache's I/O threads.
    public func removeEntries(modifiedSince date: Date) async throws {
        try await BlockingIOPool.shared.run { try self.removeEntries(modifiedSince: date) }
    }
}

// Caching JSON API responses as typed `Codable` values, with an expiry date.
//
// The typed API encodes a value with a `CacheCoder` (`JSONCacheCoder` by default) and stores the
// bytes; reading decodes them back. `TieredCache` offers the same calls with a memory tier in
// front of the disk. In async functions Swift picks the async overloads, which do their disk I/O
// on the cache's own threads.
import DiskCache
import Foundation

/// What the (simulated) API returns for `GET /users/<id>`.
struct User: Codable, Sendable {
    var id: Int
    var name: String
    var email: String
}

/// The same resource after a schema change: a new required field. Values cached as `User`
/// cannot be decoded as `UserV2`.
struct UserV2: Codable, Sendable {
    var id: Int
    var name: String
    var email: String
    var avatarURL: String
}

/// Stands in for a network request: a short delay, then a fresh value.
func fetchUser(id: Int) async throws -> User {
    try await Task.sleep(for: .milliseconds(100))
    return User(id: id, name: "User \(id)", email: "user\(id)@example.com")
}

/// Read-through lookup: the cached value if there is a live one, else a fetch that is then
/// cached for `timeToLive` seconds.
func user(id: Int, in cache: DiskCache, timeToLive: TimeInterval = 60) async throws -> User {
    let key = "api/users/\(id)"
    // nil on a miss, and also once the entry has expired (it is then removed).
    if let cached = try await cache.value(User.self, for: key) {
        print("  \(key): hit  -> \(cached.name)")
        return cached
    }
    let fresh = try await fetchUser(id: id)
    try await cache.store(value: fresh, for: key, expires: Date().addingTimeInterval(timeToLive))
    print("  \(key): miss -> fetched \(fresh.name), cached for \(timeToLive) s")
    return fresh
}

func runExample() async throws {
    // A fresh cache in a temporary directory. `.none` durability: nothing here needs to survive a
    // power loss, so no fsync.
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("JSONAPICache-\(UUID().uuidString)", isDirectory: true)
    defer {
        try? FileManager.default.removeItem(at: directory)
        print("Removed \(directory.lastPathComponent)")
    }
    let cache = try DiskCache(directory: directory, configuration: .init(durability: .none))
    print("Cache in \(directory.path)")

    print("1. Miss, then hit:")
    _ = try await user(id: 1, in: cache)        // miss: fetched and stored
    _ = try await user(id: 1, in: cache)        // hit: decoded from disk

    print("2. Expiry:")
    _ = try await user(id: 2, in: cache, timeToLive: 0.5)
    try await Task.sleep(for: .milliseconds(700))
    _ = try await user(id: 2, in: cache)        // expired: reads as a miss, fetched again

    print("3. A changed schema:")
    // The entry for user 1 holds a `User`; this version of the app reads `UserV2`.
    do {
        _ = try await cache.value(UserV2.self, for: "api/users/1")
    } catch let error as DiskCacheError where error.code == .undecodableValue {
        // By default the entry is kept (another version of the app may still read it).
        print("  undecodable, entry kept: \(cache.contains("api/users/1"))")
    }
    do {
        _ = try await cache.value(UserV2.self, for: "api/users/1", removingIfUndecodable: true)
    } catch DiskCacheError.Code.undecodableValue {
        // Asked to, the cache removes the stale entry before throwing, so the next read is a miss.
        print("  undecodable with removingIfUndecodable: true, entry kept: \(cache.contains("api/users/1"))")
    }
    let old = try await fetchUser(id: 1)
    let upgraded = UserV2(id: old.id, name: old.name, email: old.email, avatarURL: "https://example.com/1.png")
    try await cache.store(value: upgraded, for: "api/users/1", expires: Date().addingTimeInterval(60))
    if let again = try await cache.value(UserV2.self, for: "api/users/1") {
        print("  stored again as UserV2: \(again.name), \(again.avatarURL)")
    }

    // The entry's dates, read without its body.
    if let entry = try await cache.entry(for: "api/users/1") {
        print("  entry: \(entry.size) bytes, expires \(entry.expires.map { "\($0)" } ?? "never")")
    }

    // The statistics count reads of bytes: the two undecodable reads above found their entry,
    // so they are hits.
    let stats = cache.statistics
    print("Statistics: \(stats.hits) hits, \(stats.misses) misses (\(stats.expiredReads) expired), \(stats.writes) writes")

    try await cache.close()
}

// The example runs in an async function rather than as top-level code: in main.swift's
// top-level code Swift resolves `try await cache.data(for:)` to the synchronous overload (and
// only warns that nothing is awaited), whereas inside an async function it picks the async one.
try await runExample()

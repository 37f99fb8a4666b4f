// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "swift-disk-cache",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11)],
    products: [
        .library(name: "DiskCache", targets: ["DiskCache"]),
        .library(name: "MemoryCache", targets: ["MemoryCache"]),
        .library(name: "HTTPCache", targets: ["HTTPCache"]),
        // The framework integrations: each builds its framework's driver (or transport) only with
        // the trait of the same name enabled (`traits: ["Hummingbird"]` on the dependency), and a
        // package that enables none resolves, fetches and builds none of the frameworks.
        .library(name: "DiskCacheHummingbird", targets: ["DiskCacheHummingbird"]),
        .library(name: "DiskCacheVapor", targets: ["DiskCacheVapor"]),
        .library(name: "HTTPCacheAsyncHTTPClient", targets: ["HTTPCacheAsyncHTTPClient"]),
        .executable(name: "diskcache", targets: ["diskcache"]),
        .executable(name: "diskcache-server", targets: ["diskcache-server"]),
    ],
    traits: [
        .trait(name: "Hummingbird", description: "DiskCacheHummingbird: a Hummingbird 2 PersistDriver over DiskCache."),
        .trait(name: "Vapor", description: "DiskCacheVapor: a Vapor 4 Cache driver over DiskCache (app.caches.use(.disk(...)))."),
        .trait(name: "AsyncHTTPClient", description: "HTTPCacheAsyncHTTPClient: a streaming AsyncHTTPClient transport for CachingHTTPClient."),
        .trait(name: "Server", description: "diskcache-server, the caching reverse proxy, with SwiftNIO and the packages only it needs."),
        .default(enabledTraits: []),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        // The server (`diskcache-server`, behind the `Server` trait), and a real HTTP origin on
        // loopback for the tests; no library product links it.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        // The server only (its trait): graceful shutdown on signals, and metrics in Prometheus's format.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // The server only: `CDN-Cache-Control` is a structured field (RFC 9213, RFC 8941).
        .package(url: "https://github.com/apple/swift-http-structured-headers.git", from: "1.7.0"),
        // The integrations only, each behind its trait: used by no target unless the trait is
        // enabled, so SwiftPM neither resolves nor fetches them for a package that leaves it off.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/vapor/vapor.git", from: "4.122.3"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        // HTTP's header fields as the ecosystem spells them (`HTTPFields`): HTTPCache's policy engine
        // speaks them, as Hummingbird, AsyncHTTPClient and swift-nio-extras do. Pure Swift, no dependencies.
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0", traits: []),
    ],
    targets: [
        // SQLite's C API, for `diskcache bench`'s SQLite peer only: no library product links it.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        // Syscalls Swift's Glibc module does not expose (fallocate with KEEP_SIZE), and xxHash
        // (XXH3-64 checksums, XXH3-128 key hashes) from its header (libxxhash-dev), inlined.
        .target(name: "CDiskCacheSupport"),
        // The lock every module and test takes (a `pthread_mutex_t` that Thread Sanitizer sees);
        // no product, and `package` access: not part of any library's API.
        .target(name: "DiskCacheLocking"),
        .target(
            name: "DiskCache",
            dependencies: [
                "CDiskCacheSupport",
                "DiskCacheLocking",
                "MemoryCache",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(name: "MemoryCache", dependencies: ["DiskCacheLocking"]),
        .target(
            name: "HTTPCache",
            dependencies: [
                "DiskCache",
                "DiskCacheLocking",
                "MemoryCache",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        // A Hummingbird `PersistDriver` over DiskCache, and a response-caching middleware over
        // HTTPCache's policy engine; empty unless the `Hummingbird` trait is on.
        .target(
            name: "DiskCacheHummingbird",
            dependencies: [
                "DiskCache",
                .target(name: "HTTPCache", condition: .when(traits: ["Hummingbird"])),
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
                .product(name: "HTTPTypes", package: "swift-http-types", condition: .when(traits: ["Hummingbird"])),
                .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Hummingbird"])),
                // `Service`, which Hummingbird's own services conform to (Hummingbird depends on it).
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["Hummingbird"])),
            ]
        ),
        // A Vapor `Cache` driver over DiskCache; empty unless the `Vapor` trait is on.
        .target(
            name: "DiskCacheVapor",
            dependencies: [
                "DiskCache",
                .product(name: "Vapor", package: "vapor", condition: .when(traits: ["Vapor"])),
            ]
        ),
        // A streaming `HTTPTransport` over AsyncHTTPClient; empty unless the `AsyncHTTPClient` trait is on.
        .target(
            name: "HTTPCacheAsyncHTTPClient",
            dependencies: [
                "HTTPCache",
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(traits: ["AsyncHTTPClient"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["AsyncHTTPClient"])),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: .when(traits: ["AsyncHTTPClient"])),
            ]
        ),
        // `diskcache bench`'s engine: the workloads, the floor and the SQLite peer, the trace
        // replay and its simulations, the report. No product: the tool links it.
        .target(
            name: "DiskCacheBench",
            dependencies: [
                "CDiskCacheSupport",
                "CSQLite",
                "DiskCache",
                "DiskCacheLocking",
                "HTTPCache",
                "MemoryCache",
                "ToolSupport",
            ]
        ),
        .executableTarget(
            name: "diskcache",
            dependencies: [
                "DiskCache",
                "DiskCacheBench",
                "HTTPCache",
                "MemoryCache",
                "ToolSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The caching reverse proxy: its own executable, so the libraries and `diskcache` stay
        // light, and behind the `Server` trait, so that a package depending on this one for a
        // library resolves none of the packages only the server needs. Without the trait its
        // sources (inside `#if Server`) compile to nothing and `diskcache-server` says so.
        .target(
            name: "CacheServer",
            dependencies: [
                "CDiskCacheSupport",
                "DiskCache",
                "DiskCacheLocking",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                "HTTPCache",
                "MemoryCache",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Server"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["Server"])),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: .when(traits: ["Server"])),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["Server"])),
                .product(name: "CoreMetrics", package: "swift-metrics", condition: .when(traits: ["Server"])),
                .product(name: "Prometheus", package: "swift-prometheus", condition: .when(traits: ["Server"])),
                .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers", condition: .when(traits: ["Server"])),
            ]
        ),
        .executableTarget(
            name: "diskcache-server",
            dependencies: [
                "CacheServer",
                "DiskCache",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["Server"])),
                .product(name: "UnixSignals", package: "swift-service-lifecycle", condition: .when(traits: ["Server"])),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // What `diskcache` and the test worker share: a seeded generator, the resident set.
        .target(name: "ToolSupport"),
        // A child process for the crash and lock tests: it writes to a cache until killed.
        .executableTarget(
            name: "DiskCacheTestWorker",
            dependencies: [
                "DiskCache",
                "ToolSupport",
                // Its `download` command, for the AsyncHTTPClient transport's memory test.
                .target(name: "HTTPCache", condition: .when(traits: ["AsyncHTTPClient", "Hummingbird"])),
                .target(name: "HTTPCacheAsyncHTTPClient", condition: .when(traits: ["AsyncHTTPClient"])),
                .target(name: "HTTPTestOrigin", condition: .when(traits: ["AsyncHTTPClient"])),
                // Its `hummingbird` command, a response-cached app for the middleware's kill test.
                .target(name: "DiskCacheHummingbird", condition: .when(traits: ["Hummingbird"])),
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
            ]
        ),
        // What several test targets share: the page cache, child processes, temporary directories.
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(
            name: "DiskCacheTests",
            dependencies: [
                "CDiskCacheSupport",
                "DiskCache",
                "DiskCacheLocking",
                "DiskCacheTestWorker",
                "TestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "MemoryCacheTests", dependencies: ["DiskCacheLocking", "MemoryCache"]),
        // A scripted HTTP origin on loopback, for the HTTP cache's and the server's tests.
        .target(
            name: "HTTPTestOrigin",
            dependencies: [
                "DiskCacheLocking",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/HTTPTestOrigin"
        ),
        .testTarget(
            name: "HTTPCacheTests",
            dependencies: ["DiskCacheLocking", "HTTPCache", "HTTPTestOrigin", "TestSupport", .product(name: "HTTPTypes", package: "swift-http-types")]
        ),
        .testTarget(
            name: "CacheServerTests",
            dependencies: [
                "CacheServer", "DiskCache", "DiskCacheLocking", "HTTPCache", "HTTPTestOrigin", "TestSupport", "diskcache-server",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Server"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["Server"])),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: .when(traits: ["Server"])),
                .product(name: "NIOEmbedded", package: "swift-nio", condition: .when(traits: ["Server"])),
            ]
        ),
        // The integrations' tests, in real apps with each framework's own testing library; empty
        // unless the trait is on (scripts/test.sh enables them all).
        .testTarget(
            name: "DiskCacheHummingbirdTests",
            dependencies: [
                "DiskCache",
                "DiskCacheHummingbird",
                "DiskCacheTestWorker",
                "TestSupport",
                .target(name: "HTTPCache", condition: .when(traits: ["Hummingbird"])),
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
                .product(name: "HummingbirdTesting", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
                .product(name: "HTTPTypes", package: "swift-http-types", condition: .when(traits: ["Hummingbird"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Hummingbird"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["Hummingbird"])),
            ]
        ),
        .testTarget(
            name: "DiskCacheVaporTests",
            dependencies: [
                "DiskCache",
                "DiskCacheVapor",
                "TestSupport",
                .product(name: "Vapor", package: "vapor", condition: .when(traits: ["Vapor"])),
                .product(name: "VaporTesting", package: "vapor", condition: .when(traits: ["Vapor"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Vapor"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["Vapor"])),
            ]
        ),
        // The transport against the test origin on loopback; empty unless the trait is on.
        .testTarget(
            name: "HTTPCacheAsyncHTTPClientTests",
            dependencies: [
                "DiskCacheTestWorker",
                "HTTPCache",
                "HTTPCacheAsyncHTTPClient",
                "HTTPTestOrigin",
                "TestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(traits: ["AsyncHTTPClient"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["AsyncHTTPClient"])),
            ]
        ),
        .testTarget(
            name: "DiskCacheToolTests",
            dependencies: ["diskcache", "DiskCache", "DiskCacheBench", "DiskCacheLocking", "HTTPCache", "TestSupport"]
        ),
    ]
)

for target in package.targets where target.type != .system && target.name != "CDiskCacheSupport" {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    settings.append(.enableUpcomingFeature("InternalImportsByDefault"))
    target.swiftSettings = settings
}

// The server's module as a library, only when scripts/fuzz.sh asks for it: the `request-scan`
// target of the Fuzz package feeds `RequestScan` and NIO's decoder the same bytes, and a package
// reaches another's modules only through its products. Packages that depend on this one never
// see it.
if Context.environment["DISKCACHE_FUZZ"] == "1" {
    package.products.append(.library(name: "CacheServer", targets: ["CacheServer"]))
}

// The documentation plugin (`scripts/docs.sh`), only when that script asks for it: packages that
// depend on this one never fetch it.
if Context.environment["DISKCACHE_DOCS"] == "1" {
    package.dependencies.append(.package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"))
}

// swift-tools-version: 6.1
// Runnable examples of the DiskCache API. They live in their own package, which depends on the
// library by path, so that depending on swift-disk-cache never builds them.
//
//   swift run --package-path Examples JSONAPICache     # typed Codable values with expiry
//   swift run --package-path Examples ThumbnailCache   # files in and out, without loading them
//   swift run --package-path Examples AsyncLookup      # concurrent async lookups, Writer
//   swift run --package-path Examples HummingbirdSessions  # Hummingbird's PersistDriver and response cache on disk
//   swift run --package-path Examples VaporQuotes      # Vapor's app.caches.use(.disk(...))
//   swift run --package-path Examples CachedDownload   # CachingHTTPClient over AsyncHTTPClient
import PackageDescription

let package = Package(
    name: "Examples",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11)],
    dependencies: [
        // The integrations' traits on: the Hummingbird, Vapor and AsyncHTTPClient examples use
        // their products.
        .package(name: "swift-disk-cache", path: "..", traits: ["Hummingbird", "Vapor", "AsyncHTTPClient"]),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/vapor/vapor.git", from: "4.122.3"),
    ],
    targets: [
        .executableTarget(
            name: "JSONAPICache",
            dependencies: [.product(name: "DiskCache", package: "swift-disk-cache")]
        ),
        .executableTarget(
            name: "ThumbnailCache",
            dependencies: [.product(name: "DiskCache", package: "swift-disk-cache")]
        ),
        .executableTarget(
            name: "AsyncLookup",
            dependencies: [.product(name: "DiskCache", package: "swift-disk-cache")]
        ),
        .executableTarget(
            name: "HummingbirdSessions",
            dependencies: [
                .product(name: "DiskCache", package: "swift-disk-cache"),
                .product(name: "DiskCacheHummingbird", package: "swift-disk-cache"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ]
        ),
        .executableTarget(
            name: "VaporQuotes",
            dependencies: [
                .product(name: "DiskCache", package: "swift-disk-cache"),
                .product(name: "DiskCacheVapor", package: "swift-disk-cache"),
                .product(name: "Vapor", package: "vapor"),
            ]
        ),
        .executableTarget(
            name: "CachedDownload",
            dependencies: [
                .product(name: "HTTPCache", package: "swift-disk-cache"),
                .product(name: "HTTPCacheAsyncHTTPClient", package: "swift-disk-cache"),
                .product(name: "Vapor", package: "vapor"),
            ]
        ),
    ]
)

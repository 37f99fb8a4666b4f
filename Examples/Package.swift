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

// The Swift snippets of README.md and docs/, only when scripts/snippets.sh compiles them: each is
// an executable target of its own, written under .build/snippets/, that depends on the products of
// the modules it imports (DISKCACHE_SNIPPETS lists them as `name:Module,Module`).
if let snippets = Context.environment["DISKCACHE_SNIPPETS"] {
    let products: [String: Target.Dependency] = [
        "DiskCache": .product(name: "DiskCache", package: "swift-disk-cache"),
        "MemoryCache": .product(name: "MemoryCache", package: "swift-disk-cache"),
        "HTTPCache": .product(name: "HTTPCache", package: "swift-disk-cache"),
        "DiskCacheHummingbird": .product(name: "DiskCacheHummingbird", package: "swift-disk-cache"),
        "DiskCacheVapor": .product(name: "DiskCacheVapor", package: "swift-disk-cache"),
        "HTTPCacheAsyncHTTPClient": .product(name: "HTTPCacheAsyncHTTPClient", package: "swift-disk-cache"),
        "Hummingbird": .product(name: "Hummingbird", package: "hummingbird"),
        "Vapor": .product(name: "Vapor", package: "vapor"),
    ]
    var names: [String] = []
    for spec in snippets.split(separator: " ") {
        let parts = spec.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let name = String(parts[0])
        let modules = parts.count > 1 ? parts[1].split(separator: ",").map(String.init) : []
        package.targets.append(.executableTarget(
            name: name,
            dependencies: ["SnippetScaffold"] + modules.compactMap { products[$0] },
            path: ".build/snippets/\(name)",
            // A deprecation or an unused result in the documentation is a snippet to fix too.
            swiftSettings: [.unsafeFlags(["-warnings-as-errors"])]
        ))
        names.append(name)
    }
    package.targets.append(.target(
        name: "SnippetScaffold",
        path: ".build/snippets/SnippetScaffold"
    ))
    package.targets.append(.target(
        name: "Snippets",
        dependencies: names.map { .target(name: $0) },
        path: ".build/snippets/Snippets"
    ))
}

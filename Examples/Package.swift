// swift-tools-version: 6.1
// Runnable examples of the DiskCache API. They live in their own package, which depends on the
// library by path, so that depending on swift-disk-cache never builds them.
//
//   swift run --package-path Examples JSONAPICache     # typed Codable values with expiry
//   swift run --package-path Examples ThumbnailCache   # files in and out, without loading them
//   swift run --package-path Examples AsyncLookup      # concurrent async lookups, Writer
import PackageDescription

let package = Package(
    name: "Examples",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11)],
    dependencies: [
        .package(name: "swift-disk-cache", path: ".."),
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
    ]
)

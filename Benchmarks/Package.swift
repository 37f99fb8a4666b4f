// swift-tools-version: 6.1
// The benchmarks live in their own package, which depends on the library by path, so that
// depending on swift-disk-cache never resolves benchmark dependencies.
//
//   swift package --package-path Benchmarks benchmark                 # the ordo-one suites
//   swift run -c release --package-path Benchmarks MemoryPolicies     # eviction-policy study
import PackageDescription

let package = Package(
    name: "Benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "swift-disk-cache", path: ".."),
        // The MallocInterposer trait alone: the default traits pull a package these machines lack.
        .package(url: "https://github.com/ordo-one/benchmark.git", exact: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // Hot paths of the store and of the memory tier, through the public API.
        .executableTarget(
            name: "DiskCacheBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "DiskCache", package: "swift-disk-cache"),
                .product(name: "MemoryCache", package: "swift-disk-cache"),
            ],
            path: "DiskCacheBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // Hit ratio of MemoryCache's eviction policies on a Zipf workload, and hit-lookup rates
        // (RESULTS.md beside it).
        .executableTarget(
            name: "MemoryPolicies",
            dependencies: [.product(name: "MemoryCache", package: "swift-disk-cache")],
            path: "MemoryPolicies",
            exclude: ["RESULTS.md"]
        ),
    ]
)

for target in package.targets {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    settings.append(.enableUpcomingFeature("InternalImportsByDefault"))
    target.swiftSettings = settings
}

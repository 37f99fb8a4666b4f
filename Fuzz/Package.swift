// swift-tools-version: 6.1
// libFuzzer targets for the decoders that read bytes the cache does not control: the journal
// replay, the `.meta` decoders and the HTTP field parsers. They live in their own package so
// that the library's build and tests never see them or their sanitizer flags. Run one with
//
//   scripts/fuzz.sh TARGET SECONDS        # scripts/fuzz.sh list names the targets
//
// which builds them as
//
//   DISKCACHE_FUZZ=1 swift build --package-path Fuzz -c release --sanitize=fuzzer --sanitize=address \
//       -Xswiftc -enable-testing -Xswiftc -sanitize=fuzzer
//
// `-enable-testing` lets the targets `@testable import` the library, as its unit tests do, so
// that no decoder has to be made visible to the library's clients for them. The second
// `-sanitize=fuzzer` reaches the library's modules: SwiftPM's `--sanitize=fuzzer` instruments
// only this package's own, and libFuzzer would not see the coverage of the code it explores.
//
// `request-scan` feeds the same bytes to the server's `RequestScan` and to NIO's request decoder.
// A package reaches another's modules only through its products, and the server's module,
// `CacheServer`, is none: the root manifest declares it as a library only when
// `DISKCACHE_FUZZ=1` is set (scripts/fuzz.sh sets it), so that packages depending on the library
// never see it; without the variable this package does not resolve. The other ways were worse:
// the server's sources compiled a second time here (with its dependencies and the root's
// internal modules it imports), or a `CacheServer` product for everyone. The check itself is one
// file, Sources/FuzzRequestScan/RequestScanAgreement.swift, which the root's `CacheServerTests`
// compile too (through a symlink) to run the seed corpus as a unit test.
import PackageDescription

/// The policy engine's header fields (`HTTPFields`), for the HTTPCache targets.
let httpTypes: [Target.Dependency] = [.product(name: "HTTPTypes", package: "swift-http-types")]

let package = Package(
    name: "Fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        // The `Server` trait: the server's module is empty without it.
        .package(name: "swift-disk-cache", path: "..", traits: ["Server"]),
        // NIO's request decoder and `EmbeddedChannel`, for `request-scan`.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        // The policy engine's header fields (`HTTPFields`).
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
    ],
    targets: [
        .target(name: "FuzzSupport", path: "Sources/FuzzSupport"),
        fuzzTarget("FuzzJournal", library: "DiskCache"),
        fuzzTarget("FuzzMetadata", library: "DiskCache"),
        fuzzTarget("FuzzCacheControl", library: "HTTPCache", extra: httpTypes),
        fuzzTarget("FuzzHTTPDate", library: "HTTPCache"),
        fuzzTarget("FuzzVary", library: "HTTPCache", extra: httpTypes),
        fuzzTarget("FuzzEntityTag", library: "HTTPCache", extra: httpTypes),
        fuzzTarget("FuzzAge", library: "HTTPCache", extra: httpTypes),
        // `Server` defined here too: the check it shares with the root's tests is inside `#if Server`.
        fuzzTarget("FuzzRequestScan", library: "CacheServer", extra: [
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ], settings: [.define("Server")]),
    ]
)

/// An executable whose entry point is `LLVMFuzzerTestOneInput`; libFuzzer provides `main`.
func fuzzTarget(_ name: String, library: String, extra: [Target.Dependency] = [],
                settings: [SwiftSetting] = []) -> Target {
    .executableTarget(
        name: name,
        dependencies: ["FuzzSupport", .product(name: library, package: "swift-disk-cache")] + extra,
        swiftSettings: settings
    )
}

for target in package.targets {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    settings.append(.enableUpcomingFeature("InternalImportsByDefault"))
    target.swiftSettings = settings
}

// swift-tools-version: 6.1
// libFuzzer targets for the decoders that read bytes the cache does not control: the journal
// replay, the `.meta` decoders and the HTTP field parsers. They live in their own package so
// that the library's build and tests never see them or their sanitizer flags. Run one with
//
//   scripts/fuzz.sh TARGET SECONDS        # scripts/fuzz.sh list names the targets
//
// which builds them as
//
//   swift build --package-path Fuzz -c release --sanitize=fuzzer --sanitize=address \
//       -Xswiftc -enable-testing -Xswiftc -sanitize=fuzzer
//
// `-enable-testing` lets the targets `@testable import` the library, as its unit tests do, so
// that no decoder has to be made visible to the library's clients for them. The second
// `-sanitize=fuzzer` reaches the library's modules: SwiftPM's `--sanitize=fuzzer` instruments
// only this package's own, and libFuzzer would not see the coverage of the code it explores.
import PackageDescription

let package = Package(
    name: "Fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "swift-disk-cache", path: ".."),
    ],
    targets: [
        .target(name: "FuzzSupport", path: "Sources/FuzzSupport"),
        fuzzTarget("FuzzJournal", library: "DiskCache"),
        fuzzTarget("FuzzMetadata", library: "DiskCache"),
        fuzzTarget("FuzzCacheControl", library: "HTTPCache"),
        fuzzTarget("FuzzHTTPDate", library: "HTTPCache"),
        fuzzTarget("FuzzVary", library: "HTTPCache"),
        fuzzTarget("FuzzEntityTag", library: "HTTPCache"),
        fuzzTarget("FuzzAge", library: "HTTPCache"),
    ]
)

/// An executable whose entry point is `LLVMFuzzerTestOneInput`; libFuzzer provides `main`.
func fuzzTarget(_ name: String, library: String) -> Target {
    .executableTarget(
        name: name,
        dependencies: ["FuzzSupport", .product(name: library, package: "swift-disk-cache")]
    )
}

for target in package.targets {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    settings.append(.enableUpcomingFeature("InternalImportsByDefault"))
    target.swiftSettings = settings
}

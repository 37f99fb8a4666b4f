// swift-tools-version: 6.1
// A standalone package so that the simulation builds even while the rest of the
// repository does not: Sources/MemoryCache is a symlink to ../../../Sources/MemoryCache.
import PackageDescription

let package = Package(
    name: "MemoryPolicies",
    platforms: [.macOS(.v15)],
    targets: [
        .target(name: "MemoryCache"),
        .executableTarget(name: "MemoryPolicies", dependencies: ["MemoryCache"]),
    ]
)

for target in package.targets {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    settings.append(.enableUpcomingFeature("InternalImportsByDefault"))
    target.swiftSettings = settings
}

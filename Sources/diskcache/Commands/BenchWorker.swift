import ArgumentParser
import DiskCache
import DiskCacheBench
import Foundation
import ToolSupport

/// `diskcache bench-worker`: one process of `bench --processes` (not for direct use).
struct BenchWorker: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-worker",
        abstract: "One process of `bench --processes` (driven by it over standard input).",
        shouldDisplay: false
    )

    @Argument var directory: String
    @Option var sharing = "shared"
    @Option var durability = "none"
    @Option var inlineThreshold = DiskCache.Configuration().inlineThreshold
    @Option var size = 1024
    @Option var entries = 1000
    @Option var index = 0
    @Option var workers = 1
    @Option var seed: UInt64 = 1

    func run() throws {
        var configuration = DiskCache.Configuration(diskCapacity: .max, durability: try Bench.parseDurability(durability),
                                                    minimumFreeSpace: 0, minimumFreeFraction: 0, sweepInterval: nil)
        configuration.inlineThreshold = inlineThreshold
        configuration.sharing = sharing == "exclusive" ? .exclusive : .shared
        let cache = try DiskCache(directory: URL(fileURLWithPath: directory), configuration: configuration)
        var random = SplitMix64(seed: seed)
        var value = Data(count: size)
        value.withUnsafeMutableBytes { bytes in
            for i in 0..<bytes.count { bytes[i] = UInt8(truncatingIfNeeded: random.next()) }
        }
        say("ready")
        while let line = Swift.readLine() {
            let words = line.split(separator: " ")
            switch words.first {
            case "put":
                let start = benchNanoseconds()
                var done = 0, failed = 0
                for key in stride(from: index, to: entries, by: workers) {
                    do { try cache.store(value, for: "bench-\(key)") } catch { failed += 1 }
                    done += 1
                }
                say("done \(done) \(benchNanoseconds() - start) \(failed)")
            case "get":
                let seconds = words.count > 1 ? Double(words[1]) ?? 1 : 1
                let start = benchNanoseconds()
                let end = start + UInt64(seconds * 1e9)
                var done = 0, failed = 0
                var now = start
                while now < end {
                    for _ in 0..<64 {
                        if cache.data(for: "bench-\(random.below(entries))")?.count != size { failed += 1 }
                        done += 1
                    }
                    now = benchNanoseconds()
                }
                say("done \(done) \(now - start) \(failed)")
            case "quit":
                try cache.close()
                say("closed")
                return
            default:
                throw ToolError("bench-worker: unknown command \(line)", status: ExitStatus.failed)
            }
        }
    }

    private func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}

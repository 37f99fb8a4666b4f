@testable import DiskCache
import Foundation
import Testing
import TestSupport

/// Kills a real child process (`kill -9`) while it writes, many times, then reopens the cache.
struct CrashTests {
    /// What `DiskCacheTestWorker` stores as version `version` of key number `k`.
    func payload(k: Int, version: Int) -> Data {
        var bytes = Array("key-\(k)|\(version)|".utf8)
        let length = (version &* 7919 &+ k &* 104_729) % 20_000
        for i in 0..<length { bytes.append(UInt8(truncatingIfNeeded: i &* version &+ k)) }
        return Data(bytes)
    }

    /// After each kill, every key must hold exactly the state its last acknowledged operation
    /// left (a value, or nothing after a remove), or the state of the one operation that was in
    /// flight when the process died. A kill loses nothing acknowledged in any durability mode:
    /// the kernel still has every write that returned.
    @Test(arguments: ["none", "batched", "immediate"])
    func killedWriterLosesNoAcknowledgedWriteAndNeverCorrupts(mode: String) async throws {
        // Blocking waits, on a thread of their own (see `onOwnThread`).
        try await onOwnThread {
            let dir = TemporaryDirectory()
            let keys = 30
            let rounds = 10
            var acknowledgedOperations = 0
            // The version each key holds (nil: no value), as of the last check.
            var expected = [Int?](repeating: nil, count: keys)
            for round in 0..<rounds {
                let base = (round + 1) * 1_000_000
                let worker = try Worker(["write", dir.cache.path, mode, "\(keys)", "\(round + 1)", "\(base)"])
                #expect(worker.waitFor { $0 == "READY" } != nil)
                Thread.sleep(forTimeInterval: 0.05 + Double((round * 37) % 200) / 1000)
                worker.kill()

                var inFlight: (k: Int, version: Int?)?
                for line in worker.lines {
                    let parts = line.split(separator: " ")
                    guard parts.count == 4, let k = Int(parts[2].dropFirst(4)), let version = Int(parts[3]) else { continue }
                    let state: Int? = parts[1] == "PUT" ? version : nil
                    if parts[0] == "BEGIN" {
                        inFlight = (k, state)
                    } else {
                        expected[k] = state
                        acknowledgedOperations += 1
                        inFlight = nil
                    }
                }

                let cache = try DiskCache(directory: dir.cache, configuration: .testing())
                for k in 0..<keys {
                    let value = cache.data(for: "key-\(k)")
                    var allowed: [Int?] = [expected[k]]
                    if let inFlight, inFlight.k == k { allowed.append(inFlight.version) }
                    let found: Int? = value.flatMap { value in
                        let fields = value.prefix(30).split(separator: UInt8(ascii: "|"), omittingEmptySubsequences: false)
                        return fields.count > 1 ? Int(String(decoding: fields[1], as: UTF8.self)) : nil
                    }
                    #expect(allowed.contains(found), "round \(round) key-\(k): found \(String(describing: found)), allowed \(allowed)")
                    if let found { #expect(value == payload(k: k, version: found), "round \(round) key-\(k): bytes differ") }
                    expected[k] = found
                }
                #expect(cache.statistics.corruptEntriesRemoved == 0, "round \(round)")
                try cache.close()
            }
            // The test only means something if the workers really wrote.
            #expect(acknowledgedOperations > rounds * 5, "acknowledged \(acknowledgedOperations)")
        }
    }
}

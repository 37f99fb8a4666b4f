// A child process for the crash and lock tests of DiskCache. Not part of the library.
//
//   DiskCacheTestWorker write DIR MODE KEYS SEED BASE   stores (and sometimes removes) values until killed,
//                                                   printing "ACK PUT key version" / "ACK DEL key version"
//                                                   after each operation returns, and "BEGIN ..." before it
//   DiskCacheTestWorker sweep DIR                   evicts every entry (capacity 0), printing "SWEEPING n" first
//   DiskCacheTestWorker hold DIR                    opens the cache, prints "OPEN", sleeps until killed
//   DiskCacheTestWorker open DIR                    tries to open; prints "OPEN" or "ERROR <code>", exits
//   DiskCacheTestWorker open-as-nobody DIR          the same as user nobody (run as root)
import DiskCache
import Foundation

/// The value version `version` of key number `k`: "key-k|version|" then bytes that follow
/// from the two numbers, so a reader can tell which write it came from and whether every byte
/// is right. The crash tests check values against the same formula.
func payload(k: Int, version: Int) -> Data {
    var bytes = Array("key-\(k)|\(version)|".utf8)
    let length = (version &* 7919 &+ k &* 104_729) % 20_000
    for i in 0..<length { bytes.append(UInt8(truncatingIfNeeded: i &* version &+ k)) }
    return Data(bytes)
}

struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    say("usage: DiskCacheTestWorker write|hold|open DIR ...")
    exit(2)
}
let directory = URL(fileURLWithPath: arguments[2])

switch arguments[1] {
case "write":
    let durability: DiskCache.Durability = switch arguments[3] {
    case "immediate": .immediate
    case "batched": .batched(interval: .milliseconds(20))
    default: .none
    }
    let keys = Int(arguments[4]) ?? 50
    let seed = UInt64(arguments[5]) ?? 1
    let cache = try DiskCache(directory: directory, configuration: .init(durability: durability))
    var random = SplitMix(seed: seed)
    // Versions start at BASE so that successive runs on one cache never reuse a version.
    let base = arguments.count > 6 ? Int(arguments[6]) ?? 0 : 0
    var versions = [Int](repeating: base, count: keys)
    say("READY")
    while true {
        let k = Int(random.next() % UInt64(keys))
        let key = "key-\(k)"
        versions[k] += 1
        let version = versions[k]
        if random.next() % 10 == 0 {
            say("BEGIN DEL \(key) \(version)")
            try cache.removeValue(for: key)
            say("ACK DEL \(key) \(version)")
        } else {
            say("BEGIN PUT \(key) \(version)")
            try cache.store(payload(k: k, version: version), for: key)
            say("ACK PUT \(key) \(version)")
        }
    }
case "sweep":
    // Evicts every entry of an existing cache, one by one, until killed or done.
    var configuration = DiskCache.Configuration(durability: .none)
    configuration.sweepInterval = nil
    let cache = try DiskCache(directory: directory, configuration: configuration)
    say("SWEEPING \(cache.count)")
    cache.diskCapacity = 0
    let report = cache.sweep()
    say("SWEPT \(report.totalRemovedEntries)")
case "hold":
    let cache = try DiskCache(directory: directory)
    say("OPEN")
    while true { sleep(60) }
    _ = cache
case "open", "open-as-nobody":
    if arguments[1] == "open-as-nobody" {
        // Drop root's privileges so that permission checks apply.
        guard setgid(65534) == 0, setuid(65534) == 0 else {
            say("SKIP cannot drop privileges")
            exit(0)
        }
    }
    do {
        let cache = try DiskCache(directory: directory)
        say("OPEN")
        try cache.close()
    } catch let error as DiskCacheError {
        say("ERROR \(error.code) \(error)")
    }
default:
    say("unknown command \(arguments[1])")
    exit(2)
}

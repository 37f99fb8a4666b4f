import DiskCache
import Foundation
import HTTPTypes
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCache

/// Random sequences of `URLCache` calls (GET and HEAD stores of several `Vary` variants per
/// URL, lookups, removal of a URL, by date and of everything, capacity eviction, reopening),
/// checked after every step against a small model of Apple's contract. The seed is printed
/// with any failure; `VARIANT_MODEL_SEED=n` replays one.
struct VariantModelTests {
    /// A variant as the model knows it.
    struct Stored: Equatable {
        var body: String
        var sequence: Int
        var time: Date
        var memoryOnly: Bool
    }

    /// Which variant: the request method and the `Accept-Language` the response varies on.
    struct Identity: Hashable, Comparable {
        var method: String
        var language: String
        static func < (lhs: Identity, rhs: Identity) -> Bool { (lhs.method, lhs.language) < (rhs.method, rhs.language) }
    }

    static let urls = (0..<3).map { URL(string: "https://example.com/resource/\($0)")! }
    static let languages = (0..<10).map { "l\($0)" }
    static let methods = ["GET", "HEAD"]

    static func request(_ url: URL, _ identity: Identity) -> URLRequest {
        var request = URLRequest(url: url)
        request.httpMethod = identity.method
        request.setValue(identity.language, forHTTPHeaderField: "Accept-Language")
        return request
    }

    static func response(_ url: URL, body: String, memoryOnly: Bool) -> CachedURLResponse {
        let http = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                                   headerFields: ["Vary": "Accept-Language", "Cache-Control": "max-age=60"])!
        return CachedURLResponse(response: http, data: Data(body.utf8), userInfo: nil,
                                 storagePolicy: memoryOnly ? .allowedInMemoryOnly : .allowed)
    }

    @Test(arguments: [0, 1, 2])
    func randomSequencesKeepApplesContract(run: Int) throws {
        let seed = ProcessInfo.processInfo.environment["VARIANT_MODEL_SEED"].flatMap(UInt64.init)
            ?? UInt64.random(in: 0...UInt64.max)
        var failure: String?
        do {
            try Self.run(seed: seed, steps: 1500)
        } catch {
            failure = "\(error)"
        }
        #expect(failure == nil, "seed \(seed) (VARIANT_MODEL_SEED=\(seed) replays it): \(failure ?? "")")
    }

    struct Mismatch: Error, CustomStringConvertible {
        var description: String
    }

    static func run(seed: UInt64, steps: Int) throws {
        var random = SplitMix64(seed: seed)
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let largeDisk = 64 << 20
        func open() throws -> HTTPURLCache {
            try HTTPURLCache(memoryCapacity: 64 << 20, diskCapacity: largeDisk, directory: directory.cacheDirectory)
        }
        var cache: HTTPURLCache? = try open()
        var model: [URL: [Identity: Stored]] = [:]
        var marks: [Date] = []
        var sequence = 0
        var log: [String] = []

        func fail(_ what: String) -> Mismatch {
            Mismatch(description: "step \(log.count): \(what)\nlast steps:\n" + log.suffix(12).joined(separator: "\n"))
        }

        for _ in 0..<steps {
            let url = urls[Int(random.next() % UInt64(urls.count))]
            let identity = Identity(method: methods[Int(random.next() % 2)],
                                    language: languages[Int(random.next() % UInt64(languages.count))])
            let choice = random.next() % 100
            if choice >= 96 {
                log.append("reopen")
                cache = nil  // the only reference: the store closes and lets go of the directory
                cache = try open()
                for key in model.keys {
                    model[key] = model[key]!.filter { !$0.value.memoryOnly }
                }
                try check(cache!, against: model, fail: fail)
                continue
            }
            let urlCache = cache!
            switch choice {
            case 0..<45:
                sequence += 1
                let memoryOnly = random.next() % 10 == 0
                let body = identity.method == "HEAD" ? "" : "\(url.lastPathComponent) \(identity.language) #\(sequence) "
                    + String(repeating: "x", count: Int(random.next() % 3000))
                log.append("store \(url.lastPathComponent) \(identity.method) \(identity.language)\(memoryOnly ? " memory-only" : "")")
                urlCache.storeCachedResponse(response(url, body: body, memoryOnly: memoryOnly), for: request(url, identity))
                var variants = model[url, default: [:]]
                if variants[identity] == nil, variants.count == VariantRecords.maximumVariantCount {
                    // The least recently stored gives way.
                    let oldest = variants.min { $0.value.sequence < $1.value.sequence }!.key
                    variants[oldest] = nil
                }
                variants[identity] = Stored(body: body, sequence: sequence, time: Date(), memoryOnly: memoryOnly)
                model[url] = variants
            case 45..<75:
                log.append("look up \(url.lastPathComponent) \(identity.method) \(identity.language)")
                let found = urlCache.cachedResponse(for: request(url, identity))
                // GET: the GET variant of that language; HEAD: the newer of GET and HEAD.
                let candidates = (model[url] ?? [:]).filter {
                    $0.key.language == identity.language && ($0.key.method == identity.method || identity.method == "HEAD")
                }
                let expected = candidates.max { $0.value.sequence < $1.value.sequence }?.value.body
                let actual = found.map { String(decoding: $0.data, as: UTF8.self) }
                guard actual == expected else {
                    throw fail("cachedResponse gave \(actual.map { String($0.prefix(40)) } ?? "nil"), the model \(expected.map { String($0.prefix(40)) } ?? "nil")")
                }
            case 75..<81:
                log.append("remove \(url.lastPathComponent)")
                urlCache.removeCachedResponse(for: request(url, identity))
                model[url] = nil
            case 81..<86:
                Thread.sleep(forTimeInterval: 0.002)
                marks.append(Date())
                Thread.sleep(forTimeInterval: 0.002)
                log.append("mark \(marks.count - 1)")
            case 86..<90 where !marks.isEmpty:
                let index = Int(random.next() % UInt64(marks.count))
                log.append("remove since mark \(index)")
                urlCache.removeCachedResponses(since: marks[index])
                for key in model.keys {
                    model[key] = model[key]!.filter { $0.value.time < marks[index] }
                }
            case 90..<92:
                log.append("remove all")
                urlCache.removeAllCachedResponses()
                model = [:]
            case 92..<96:
                // Capacity eviction: the disk tier trimmed to a fraction of what it holds.
                let disk = try #require(urlCache.responses.records.disk)
                let target = disk.totalSize / Int64(2 + random.next() % 3)
                log.append("trim to \(target)")
                _ = disk.trim(toSize: target)
                // Whatever the eviction chose, the cache may only have lost variants, whole; one
                // the disk tier let go of may still be held in memory (until a reopen).
                for url in urls {
                    let variants = urlCache.responses.variants(forKey: key(url))
                    let present = Set(variants.map { Self.identity(of: $0.entry) })
                    for (identity, stored) in model[url] ?? [:] where !present.contains(identity) {
                        guard !stored.memoryOnly else { throw fail("eviction of the disk tier took a memory-only variant") }
                        model[url]![identity] = nil
                    }
                    for variant in variants where !disk.contains(variant.recordKey) {
                        model[url]![Self.identity(of: variant.entry)]?.memoryOnly = true
                    }
                }
            default:
                continue
            }
            try check(cache!, against: model, fail: fail)
        }

        // Closed and inspected: every record on disk is one the model has, and one a lookup reaches.
        let onDisk = model.values.reduce(0) { $0 + $1.values.filter { !$0.memoryOnly }.count }
        cache = nil
        let inspector = try DiskCacheInspector(directory: directory.cacheDirectory)
        let entries = inspector.entries()
        guard entries.count == onDisk else { throw fail("\(entries.count) records on disk, \(onDisk) in the model") }
        let unreachable = HTTPURLCache.unreachableRecords(among: entries)
        guard unreachable.isEmpty else { throw fail("unreachable records: \(unreachable)") }
        let report = inspector.verify()
        guard report.isHealthy else { throw fail("verify: \(report.problems)") }
    }

    static func key(_ url: URL) -> String { CachePolicyEngine.primaryKey(method: "GET", url: url) }

    static func identity(of entry: CachedHTTPResponse) -> Identity {
        Identity(method: entry.response.requestMethod,
                 language: entry.response.varyingRequestHeaders["Accept-Language"] ?? "")
    }

    /// The stored variants of every URL are the model's, with the same bodies; the disk tier
    /// holds no record beyond them.
    static func check(_ cache: HTTPURLCache, against model: [URL: [Identity: Stored]], fail: (String) -> Mismatch) throws {
        var onDisk = 0
        for url in urls {
            let variants = cache.responses.variants(forKey: key(url))
            var actual: [Identity: String] = [:]
            for variant in variants {
                guard let entry = cache.responses.load(variant) else { throw fail("a listed variant of \(url) did not load") }
                actual[Self.identity(of: entry)] = String(decoding: entry.body, as: UTF8.self)
            }
            let expected = (model[url] ?? [:]).mapValues(\.body)
            guard actual == expected else {
                throw fail("\(url.lastPathComponent) holds \(actual.keys.sorted()), the model \(expected.keys.sorted())")
            }
            onDisk += (model[url] ?? [:]).values.filter { !$0.memoryOnly }.count
        }
        let records = cache.responses.records.disk?.count ?? 0
        guard records == onDisk else { throw fail("\(records) records on disk, \(onDisk) variants stored there") }
    }
}

/// A small seeded generator (SplitMix64), so that a failing sequence can be replayed.
struct SplitMix64: RandomNumberGenerator {
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

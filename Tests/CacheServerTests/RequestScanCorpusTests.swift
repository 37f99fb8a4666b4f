#if Server
import Foundation
import Testing
@testable import CacheServer

/// The `request-scan` fuzz target's seed corpus (Tests/FuzzCorpus/request-scan), each file run
/// through the check the target runs on every input, `requestScanDisagreement(_:)`: for every
/// request `RequestScan` answers itself, NIO's decoder reads a request that ends at the same
/// byte, without a body, with the same method, target, version and field lines.
struct RequestScanCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("FuzzCorpus/request-scan")

    static let seeds: [String] = (try? FileManager.default.contentsOfDirectory(atPath: corpus.path).sorted()) ?? []

    static func bytes(of seed: String) throws -> [UInt8] {
        try [UInt8](Data(contentsOf: corpus.appendingPathComponent(seed)))
    }

    @Test(arguments: seeds)
    func theScanAndNIOsDecoderAgreeOnEverySeed(_ seed: String) throws {
        let disagreement = requestScanDisagreement(try Self.bytes(of: seed))
        #expect(disagreement == nil, "\(seed)")
    }

    /// A whole head whose fields pass NIO's limits (80 KiB by default) in one buffer: NIO's
    /// decoder refuses it, so the scan must hand it on rather than answer it. Too long for a
    /// seed (libFuzzer would stretch every input towards it), so it is checked here.
    @Test func aWholeHeadBeyondNIOsLimitsIsNotClaimed() {
        let head = "GET /a HTTP/1.1\r\nHost: x\r\nX-Long: " + String(repeating: "a", count: 90 * 1024) + "\r\n\r\nGET /b HTTP/1.1\r\n\r\n"
        let disagreement = requestScanDisagreement(Array(head.utf8))
        #expect(disagreement == nil)
    }

    /// So that the check keeps reaching each of its clauses: the seeds have requests the scan
    /// answers itself (several on one connection), bytes it holds for more, and bytes it hands
    /// on to NIO, after a request it answered and at the start.
    @Test func theSeedsReachEveryOutcomeOfTheScan() throws {
        var claimedInOne = 0, held = 0, handedOnAfterClaims = 0, handedOnAtOnce = 0
        for seed in Self.seeds {
            let input = try Self.bytes(of: seed)
            var start = 0, claimed = 0
            var last = RequestScan.incomplete
            while start < input.count {
                last = input[start...].withUnsafeBytes { RequestScan.scan($0) }
                guard case .headOnly(let length, _) = last else { break }
                claimed += 1
                start += length
            }
            claimedInOne = max(claimedInOne, claimed)
            if start < input.count, last == .incomplete { held += 1 }
            if start < input.count, last == .other { claimed > 0 ? (handedOnAfterClaims += 1) : (handedOnAtOnce += 1) }
        }
        #expect(Self.seeds.count >= 40)
        #expect(claimedInOne >= 10)
        #expect(held >= 3)
        #expect(handedOnAfterClaims >= 3)
        #expect(handedOnAtOnce >= 10)
    }
}
#endif

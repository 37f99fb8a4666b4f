@testable import diskcache
import Foundation
import Testing

/// Sizes and dates as the command line accepts them.
struct ArgumentParsingTests {
    @Test(arguments: [
        ("512", 512), ("512K", 512 << 10), ("512k", 512 << 10), ("64M", 64 << 20), ("64MB", 64 << 20),
        ("64MiB", 64 << 20), ("2G", 2 << 30), ("1T", 1 << 40), ("1.5K", 1536), ("0", 0), ("10b", 10),
    ] as [(String, Int64)])
    func sizesParse(text: String, bytes: Int64) {
        #expect(ByteSize.parse(text) == bytes)
    }

    @Test(arguments: ["", "K", "12Q", "-5M", "1 G", "1e3", "1..5K", "0x10", "9999999999T", "5iB"])
    func junkSizesAreRejected(text: String) {
        #expect(ByteSize.parse(text) == nil)
    }

    @Test func sizesFormatInBinaryUnits() {
        #expect(ByteSize.format(0) == "0 B")
        #expect(ByteSize.format(1023) == "1023 B")
        #expect(ByteSize.format(1024) == "1.0 KiB")
        #expect(ByteSize.format(20000) == "19.5 KiB")
        #expect(ByteSize.format(300 << 20) == "300 MiB")
    }

    @Test(arguments: [
        ("2026-11-22T10:00:00Z", 1_795_341_600.0), ("2026-11-22T12:00:00+02:00", 1_795_341_600.0),
        ("2026-11-22T10:00:00.500Z", 1_795_341_600.5), ("2026-11-22", 1_795_305_600.0),
    ])
    func absoluteDatesParse(text: String, seconds: Double) {
        #expect(DateText.parse(text, direction: .ago)?.timeIntervalSince1970 == seconds)
    }

    @Test(arguments: [("90s", 90.0), ("10m", 600), ("2h", 7200), ("3d", 259_200), ("1w", 604_800), ("1h30m", 5400)])
    func relativeDatesCountFromNow(text: String, seconds: Double) {
        let now = Date(timeIntervalSince1970: 1_000_000_000)
        #expect(DateText.parse(text, direction: .ago, now: now) == now.addingTimeInterval(-seconds))
        #expect(DateText.parse(text, direction: .fromNow, now: now) == now.addingTimeInterval(seconds))
    }

    @Test(arguments: ["yesterday", "10", "m", "2026-13-01", "10 m", "-2h"])
    func junkDatesAreRejected(text: String) {
        #expect(DateText.parse(text, direction: .ago) == nil)
    }

    @Test func datesPrintAsISO8601InUTC() {
        #expect(DateText.iso(Date(timeIntervalSince1970: 1_795_341_600.9)) == "2026-11-22T10:00:00Z")
    }
}

import Foundation
import Testing
@testable import HTTPCache

extension PolicyEngineTests {
    struct HTTPDates {
        /// 2025-06-01T00:00:00Z, the reference for two-digit years.
        static let reference = Date(timeIntervalSince1970: 1_748_736_000)

        @Test(arguments: [
            ("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_777),  // IMF-fixdate
            ("Sunday, 06-Nov-94 08:49:37 GMT", 784_111_777),  // RFC 850
            ("Sun Nov  6 08:49:37 1994", 784_111_777),  // asctime
            ("Sun Nov 6 08:49:37 1994", 784_111_777),  // asctime, single space
            ("sun, 06 nov 1994 08:49:37 gmt", 784_111_777),  // names in any case
            ("  Sun, 06 Nov 1994 08:49:37 GMT  ", 784_111_777),
            ("Sun, 06 Nov 1994 08:49:37 UTC", 784_111_777),
            ("Mon, 06 Nov 1994 08:49:37 GMT", 784_111_777),  // a wrong day name is not checked
            ("Thu, 01 Jan 1970 00:00:00 GMT", 0),
            ("Tue, 29 Feb 2000 12:00:00 GMT", 951_825_600),
            ("Wed, 31 Dec 1969 23:59:59 GMT", -1),
        ])
        func validTimestampsParseInAllThreeFormats(text: String, seconds: Int) {
            #expect(HTTPDate.parse(text, relativeTo: Self.reference) == Date(timeIntervalSince1970: TimeInterval(seconds)))
        }

        @Test(arguments: [
            "0", "-1", "", "never",
            "Sun, 32 Nov 1994 08:49:37 GMT",  // no such day
            "Thu, 29 Feb 1900 00:00:00 GMT",  // 1900 is not a leap year
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 PST",  // only GMT
            "Sun, 06 Nov 1994 08:49:37",
            "Sun, 06 Nov 94 08:49:37 GMT",  // IMF-fixdate needs four year digits
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Xyz, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT, Mon, 07 Nov 1994 08:49:37 GMT",  // two combined lines
        ])
        func malformedTimestampsAreNotDates(text: String) {
            #expect(HTTPDate.parse(text, relativeTo: Self.reference) == nil)
        }

        @Test(arguments: [
            ("Sunday, 06-Nov-94 08:49:37 GMT", 784_111_777),  // 2094 is more than 50 years ahead: 1994
            ("Tuesday, 01-Jan-30 00:00:00 GMT", 1_893_456_000),  // 2030
            ("Thursday, 01-Jan-76 00:00:00 GMT", 189_302_400),  // 2076 > 2025 + 50: 1976
            ("Tuesday, 01-Jan-75 00:00:00 GMT", 3_313_526_400),  // 2075 is not more than 50 years ahead
        ])
        func twoDigitYearsMoreThanFiftyYearsAheadMeanThePast(text: String, seconds: Int) {
            #expect(HTTPDate.parse(text, relativeTo: Self.reference) == Date(timeIntervalSince1970: TimeInterval(seconds)))
        }

        @Test(arguments: [
            (784_111_777, "Sun, 06 Nov 1994 08:49:37 GMT"),
            (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
            (951_825_600, "Tue, 29 Feb 2000 12:00:00 GMT"),
            (-1, "Wed, 31 Dec 1969 23:59:59 GMT"),
        ])
        func formattingProducesIMFFixdate(seconds: Int, text: String) {
            let date = Date(timeIntervalSince1970: TimeInterval(seconds))
            #expect(HTTPDate.string(from: date) == text)
            #expect(HTTPDate.parse(HTTPDate.string(from: date)) == date)
        }

        @Test func formattingDropsFractionalSeconds() {
            #expect(HTTPDate.string(from: Date(timeIntervalSince1970: 784_111_777.9)) == "Sun, 06 Nov 1994 08:49:37 GMT")
        }
    }
}

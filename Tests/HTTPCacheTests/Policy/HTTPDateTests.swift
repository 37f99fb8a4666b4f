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
            ("Sun Nov 06 08:49:37 1994", 784_111_777),  // asctime, two-digit day
            ("Wed Nov 16 08:49:37 1994", 784_975_777),
            ("sun, 06 nov 1994 08:49:37 gmt", 784_111_777),  // names in any case (RFC 9111 §4.2)
            ("THU, 18 AUG 2050 02:01:18 gMT", 2_544_400_878),
            ("SUNDAY, 06-NOV-94 08:49:37 Gmt", 784_111_777),
            ("  Sun, 06 Nov 1994 08:49:37 GMT  ", 784_111_777),  // surrounding whitespace is not part of a value
            ("Mon, 06 Nov 1994 08:49:37 GMT", 784_111_777),  // a wrong day name is not checked
            ("Sun, 06 Nov 1994 23:59:60 GMT", 784_166_400),  // a leap second
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
            "Sun, 06 Nov 1994 08:49:37 UTC",  // only GMT (RFC 9111 §4.2: another zone is invalid)
            "Thu, 18 Aug 2050 02:01:18 UTC",
            "Sun, 06 Nov 1994 08:49:37 +0000",
            "Sun, 06 Nov 1994 08:49:37 GMT+1",
            "Thu, 18  Aug  2050 02:01:18 GMT",  // one SP between tokens, no more
            "Sun,  06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994  08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37  GMT",
            "Sun,\t06 Nov 1994 08:49:37 GMT",  // a tab is not SP
            "Sun, 06 Nov 1994\t08:49:37 GMT",
            "Sun,06 Nov 1994 08:49:37 GMT",
            "Sun , 06 Nov 1994 08:49:37 GMT",
            "Thu 18 Aug 2050 02:01:18 GMT",  // no comma
            "Sun, 6 Nov 1994 08:49:37 GMT",  // IMF-fixdate needs a two-digit day
            "Sun, 006 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 01994 08:49:37 GMT",
            "Thu, 18-Aug-2050 02:01:18 GMT",  // dashes with a four-digit year
            "Thu, 18 Aug 2050 02.01.18 GMT",
            "Thu, 18 Aug 2050 2:01:18 GMT",  // one-digit hour
            "Thu, 18 Aug 2050 02:1:18 GMT",
            "Thu, 18 Aug 2050 02:01:18.5 GMT",
            "Sunday, 06 Nov 1994 08:49:37 GMT",  // IMF-fixdate takes the short day name
            "Sun, 06-Nov-94 08:49:37 GMT",  // RFC 850 takes the long day name
            "Sunday, 06-Nov-94 08:49:37",
            "Sunday, 6-Nov-94 08:49:37 GMT",
            "Sunday 06-Nov-94 08:49:37 GMT",
            "Sun Nov 6 08:49:37 1994",  // asctime: a one-digit day is preceded by a second SP
            "Sun Nov   6 08:49:37 1994",
            "Sun Nov  06 08:49:37 1994",
            "Sun Nov  6 08:49:37 94",
            "Sun Nov  6 08:49:37 1994 GMT",
            "Sunday Nov  6 08:49:37 1994",  // asctime takes the short day name
            "Sun, Nov  6 08:49:37 1994",
            "Sun, 06 November 1994 08:49:37 GMT",
            "S, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT x",
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

        /// The reference comes from a stored response (its response time), which comes from
        /// disk. Found by fuzzing (FuzzHTTPDate): one beyond `Int` days trapped. A reference
        /// outside years 0...9999 counts as the nearest end of that range, NaN as no reference.
        @Test(arguments: [1e300, -1e300, .infinity, -.infinity, .nan, 1e18, -1e18] as [TimeInterval])
        func anyReferenceResolvesTwoDigitYearsWithoutTrapping(reference: TimeInterval) {
            let date = Date(timeIntervalSince1970: reference)
            let rfc850 = HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT", relativeTo: date)
            #expect(rfc850 != nil)
            if reference > 0 { #expect(rfc850.map(HTTPDate.string) == "Sun, 06 Nov 9994 08:49:37 GMT") }
            #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT", relativeTo: date) == Date(timeIntervalSince1970: 784_111_777))
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

        /// IMF-fixdate has four year digits: later dates write the last second of 9999, earlier
        /// ones (and NaN) the first second of year 0. Found by fuzzing (FuzzHTTPDate): a time
        /// interval beyond `Int` trapped, and years outside 0...9999 were written unparseably.
        @Test(arguments: [
            (4.135846595886721e+275, "Fri, 31 Dec 9999 23:59:59 GMT"),
            (.infinity, "Fri, 31 Dec 9999 23:59:59 GMT"),
            (253_402_300_800, "Fri, 31 Dec 9999 23:59:59 GMT"),  // 10000-01-01
            (253_402_300_799.5, "Fri, 31 Dec 9999 23:59:59 GMT"),
            (-62_167_219_200, "Sat, 01 Jan 0000 00:00:00 GMT"),
            (-62_167_219_201, "Sat, 01 Jan 0000 00:00:00 GMT"),  // year -1
            (-1e300, "Sat, 01 Jan 0000 00:00:00 GMT"),
            (-.infinity, "Sat, 01 Jan 0000 00:00:00 GMT"),
            (.nan, "Sat, 01 Jan 0000 00:00:00 GMT"),
        ] as [(TimeInterval, String)])
        func datesBeyondFourDigitYearsAreFormattedAtTheNearestEnd(interval: TimeInterval, text: String) {
            let formatted = HTTPDate.string(from: Date(timeIntervalSince1970: interval))
            #expect(formatted == text)
            #expect(HTTPDate.parse(formatted) != nil)
        }

        @Test func formattingDropsFractionalSeconds() {
            #expect(HTTPDate.string(from: Date(timeIntervalSince1970: 784_111_777.9)) == "Sun, 06 Nov 1994 08:49:37 GMT")
        }
    }
}

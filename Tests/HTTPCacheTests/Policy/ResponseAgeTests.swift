import Foundation
import HTTPTypes
import Testing
@testable import HTTPCache

extension PolicyEngineTests {
    struct AgeCalculation {
        struct Case: Sendable, CustomTestStringConvertible {
            var name: String
            var headers: HTTPFields
            var apparentAge: TimeInterval
            var correctedAgeValue: TimeInterval
            var correctedInitialAge: TimeInterval
            var currentAge: TimeInterval
            var testDescription: String { name }
        }

        // Every case: request sent at t0, response received at t0+2, judged at t0+62.
        // So response_delay = 2 and resident_time = 60 throughout.
        static let cases: [Case] = [
            Case(name: "Age header and Date one second after the request",
                 headers: ["Date": "Sun, 06 Nov 1994 08:49:38 GMT", "Age": "10"],
                 apparentAge: 1, correctedAgeValue: 12, correctedInitialAge: 12, currentAge: 72),
            Case(name: "origin clock ahead: apparent age clamps at zero",
                 headers: ["Date": "Sun, 06 Nov 1994 08:51:17 GMT"],
                 apparentAge: 0, correctedAgeValue: 2, correctedInitialAge: 2, currentAge: 62),
            Case(name: "origin clock behind: apparent age wins",
                 headers: ["Date": "Sun, 06 Nov 1994 08:44:37 GMT", "Age": "5"],
                 apparentAge: 302, correctedAgeValue: 7, correctedInitialAge: 302, currentAge: 362),
            Case(name: "no Date: date_value is the response time",
                 headers: ["Age": "30"],
                 apparentAge: 0, correctedAgeValue: 32, correctedInitialAge: 32, currentAge: 92),
            // An invalid Age is ignored: it counts as 0 (RFC 9111 §5.1).
            Case(name: "non-numeric Age counts as 0",
                 headers: ["Date": "Sun, 06 Nov 1994 08:49:39 GMT", "Age": "abc"],
                 apparentAge: 0, correctedAgeValue: 2, correctedInitialAge: 2, currentAge: 62),
            Case(name: "negative Age counts as 0",
                 headers: ["Date": "Sun, 06 Nov 1994 08:49:39 GMT", "Age": "-3"],
                 apparentAge: 0, correctedAgeValue: 2, correctedInitialAge: 2, currentAge: 62),
            Case(name: "Age given on two lines counts by the first",
                 headers: ["Date": "Sun, 06 Nov 1994 08:49:39 GMT", "Age": "5", "age": "6"],
                 apparentAge: 0, correctedAgeValue: 7, correctedInitialAge: 7, currentAge: 67),
        ]

        @Test(arguments: cases)
        func currentAgeIsComputedAsRFC9111Section4_2_3Specifies(_ testCase: Case) {
            let stored = StoredResponse(
                status: 200,
                headers: testCase.headers,
                requestTime: PolicyFixtures.t0,
                responseTime: PolicyFixtures.at(2)
            )
            let age = ResponseAge(of: stored, at: PolicyFixtures.at(62))
            #expect(age.responseDelay == 2)
            #expect(age.residentTime == 60)
            #expect(age.apparentAge == testCase.apparentAge)
            #expect(age.correctedAgeValue == testCase.correctedAgeValue)
            #expect(age.correctedInitialAge == testCase.correctedInitialAge)
            #expect(age.currentAge == testCase.currentAge)
        }

        @Test func ageValueAndDateValueAreExposed() {
            let stored = StoredResponse(
                status: 200,
                headers: ["Date": "Sun, 06 Nov 1994 08:49:38 GMT", "Age": "10"],
                requestTime: PolicyFixtures.t0,
                responseTime: PolicyFixtures.at(2)
            )
            let age = ResponseAge(of: stored, at: PolicyFixtures.at(2))
            #expect(age.ageValue == 10)
            #expect(age.dateValue == PolicyFixtures.at(1))
            #expect(age.residentTime == 0)
            #expect(age.currentAge == 12)
        }

        /// `Age` is a single delta-seconds (RFC 9111 §5.1). A field whose first member (on one
        /// line or across several) is anything else is ignored; the values come from the Age
        /// parsing tests of the HTTP caching test suite (http-tests/cache-tests, `age-parse`).
        static let invalidAges: [[String]] = [
            ["abc"], ["-7200"], ["7200.0"], ["+5"], ["5 s"], [""], ["0x10"], ["abc, 7200"], ["-1", "7200"],
        ]

        @Test(arguments: invalidAges)
        func anInvalidAgeIsFlaggedAndCountsAsZero(_ lines: [String]) {
            var headers: HTTPFields = ["Cache-Control": "max-age=3600"]
            for line in lines { headers.append(name: "Age", value: line) }
            let age = ResponseAge(of: PolicyFixtures.stored(headers: headers), at: PolicyFixtures.t0)
            #expect(age.hasInvalidAge)
            #expect(age.ageValue == 0)
        }

        /// Lists on one line or several, and the first member's value.
        static let lists: [([String], TimeInterval)] = [
            (["7200,0"], 7200), (["7200, 0"], 7200), (["0,7200"], 0), (["0, 0"], 0), (["7200, 7200"], 7200),
            (["7200", "0"], 7200), (["0", "7200"], 0), (["0", "0"], 0), (["7200", "7200"], 7200), (["30, abc"], 30), (["4540\t,x"], 4540), ([" 12 \t, 0"], 12),
        ]

        /// A list (on one line or several) counts by its first member; the others are discarded.
        @Test(arguments: lists)
        func aListCountsByItsFirstMember(_ lines: [String], seconds: TimeInterval) {
            var headers: HTTPFields = ["Cache-Control": "max-age=3600"]
            for line in lines { headers.append(name: "Age", value: line) }
            let stored = PolicyFixtures.stored(headers: headers)
            let age = ResponseAge(of: stored, at: PolicyFixtures.t0)
            #expect(!age.hasInvalidAge)
            #expect(age.ageValue == seconds)
            #expect(PolicyFixtures.privateEngine.freshness(of: stored, at: PolicyFixtures.t0).isFresh == (seconds < 3600))
        }

        @Test(arguments: [("0", 0.0), ("7200", 7200), ("007", 7), ("  30  ", 30), ("99999999999", 2_147_483_648)])
        func aValidAgeIsUsed(_ line: String, seconds: TimeInterval) {
            let stored = PolicyFixtures.stored(headers: ["Age": line])
            let age = ResponseAge(of: stored, at: PolicyFixtures.t0)
            #expect(!age.hasInvalidAge)
            #expect(age.ageValue == seconds)
        }

        @Test func noAgeIsNotInvalid() {
            let age = ResponseAge(of: PolicyFixtures.stored(headers: [:]), at: PolicyFixtures.t0)
            #expect(!age.hasInvalidAge)
            #expect(age.ageValue == 0)
        }

        /// An ignored `Age` leaves the response as fresh as its lifetime and the clocks make it.
        @Test(arguments: invalidAges)
        func anInvalidAgeIsIgnored(_ lines: [String]) {
            var headers: HTTPFields = ["Cache-Control": "max-age=3600", "ETag": "\"v1\""]
            for line in lines { headers.append(name: "Age", value: line) }
            let stored = PolicyFixtures.stored(headers: headers)
            let engine = PolicyFixtures.privateEngine
            let freshness = engine.freshness(of: stored, at: PolicyFixtures.t0)
            #expect(freshness.isFresh)
            #expect(freshness.lifetime == 3600)
            #expect(freshness.remainingLifetime == 3600)
            #expect(DecisionKind(engine.decision(for: PolicyFixtures.request(), storedResponses: [stored], at: PolicyFixtures.t0)) == .fresh)
        }

        @Test func anAgeHeaderMakesAFreshlyReceivedResponseStale() {
            let stored = PolicyFixtures.stored(headers: ["Cache-Control": "max-age=60", "Age": "60"])
            let freshness = PolicyFixtures.privateEngine.freshness(of: stored, at: PolicyFixtures.t0)
            #expect(freshness.currentAge == 60)
            #expect(!freshness.isFresh)
        }
    }
}

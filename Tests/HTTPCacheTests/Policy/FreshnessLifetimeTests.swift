import Foundation
import HTTPTypes
import Testing
@testable import HTTPCache

extension PolicyEngineTests {
    struct FreshnessLifetime {
        struct Case: Sendable, CustomTestStringConvertible {
            var name: String
            var status = 200
            var headers: HTTPFields
            var date: String? = PolicyFixtures.t0HTTP
            var responseTime: TimeInterval = 0
            var mode: CacheMode = .private
            var lifetime: TimeInterval
            var source: Freshness.Source
            var testDescription: String { name }
        }

        static let cases: [Case] = [
            Case(name: "max-age", headers: ["Cache-Control": "max-age=60"], lifetime: 60, source: .maxAge),
            Case(name: "s-maxage in a shared cache", headers: ["Cache-Control": "s-maxage=120, max-age=60"], mode: .shared,
                 lifetime: 120, source: .sharedMaxAge),
            Case(name: "s-maxage ignored in a private cache", headers: ["Cache-Control": "s-maxage=120, max-age=60"],
                 lifetime: 60, source: .maxAge),
            Case(name: "max-age over Expires",
                 headers: ["Cache-Control": "max-age=60", "Expires": "Sun, 06 Nov 1994 09:49:37 GMT"], lifetime: 60, source: .maxAge),
            Case(name: "Expires minus Date", headers: ["Expires": "Sun, 06 Nov 1994 09:49:37 GMT"], lifetime: 3600, source: .expires),
            Case(name: "Expires minus response time without Date", headers: ["Expires": "Sun, 06 Nov 1994 09:49:37 GMT"],
                 date: nil, responseTime: 100, lifetime: 3500, source: .expires),
            Case(name: "Expires minus response time with an invalid Date", headers: ["Expires": "Sun, 06 Nov 1994 09:49:37 GMT"],
                 date: "yesterday", responseTime: 100, lifetime: 3500, source: .expires),
            Case(name: "Expires minus response time with a Date in UTC", headers: ["Expires": "Sun, 06 Nov 1994 09:49:37 GMT"],
                 date: "Sun, 06 Nov 1994 08:49:37 UTC", responseTime: 100, lifetime: 3500, source: .expires),
            Case(name: "Expires before Date", headers: ["Expires": "Sun, 06 Nov 1994 08:47:57 GMT"], lifetime: 0, source: .expires),
            Case(name: "Expires: 0 is already expired", headers: ["Expires": "0"], lifetime: 0, source: .invalid),
            Case(name: "Expires in UTC is already expired", headers: ["Expires": "Sun, 06 Nov 1994 09:49:37 UTC"],
                 lifetime: 0, source: .invalid),
            Case(name: "Expires with doubled spaces is already expired", headers: ["Expires": "Sun, 06  Nov  1994 09:49:37 GMT"],
                 lifetime: 0, source: .invalid),
            Case(name: "Expires with a one-digit hour is already expired", headers: ["Expires": "Sun, 06 Nov 1994 9:49:37 GMT"],
                 lifetime: 0, source: .invalid),
            Case(name: "Expires in any case is a date", headers: ["Expires": "SUN, 06 NOV 1994 09:49:37 gmt"],
                 lifetime: 3600, source: .expires),
            Case(name: "Expires in asctime format", headers: ["Expires": "Sun Nov  6 09:49:37 1994"], lifetime: 3600, source: .expires),
            Case(name: "the first Expires line counts",
                 headers: ["Expires": "Sun, 06 Nov 1994 08:59:37 GMT", "expires": "Sun, 06 Nov 1994 09:49:37 GMT"],
                 lifetime: 600, source: .expires),
            Case(name: "invalid max-age is stale even with Expires",
                 headers: ["Cache-Control": "max-age=abc", "Expires": "Sun, 06 Nov 1994 09:49:37 GMT"], lifetime: 0, source: .invalid),
            Case(name: "negative max-age is stale", headers: ["Cache-Control": "max-age=-5"], lifetime: 0, source: .invalid),
            Case(name: "invalid s-maxage in a shared cache", headers: ["Cache-Control": "s-maxage=abc, max-age=60"], mode: .shared,
                 lifetime: 0, source: .invalid),
            Case(name: "invalid s-maxage ignored in a private cache", headers: ["Cache-Control": "s-maxage=abc, max-age=60"],
                 lifetime: 60, source: .maxAge),
            Case(name: "duplicate max-age: the first", headers: ["Cache-Control": "max-age=10, max-age=20"], lifetime: 10, source: .maxAge),
            Case(name: "heuristic: 10% of Date minus Last-Modified",
                 headers: ["Last-Modified": "Sun, 06 Nov 1994 06:02:57 GMT"], lifetime: 1000, source: .heuristic),
            Case(name: "heuristic capped at 24 hours",
                 headers: ["Last-Modified": "Thu, 27 Oct 1994 08:49:37 GMT"], lifetime: 86_400, source: .heuristic),
            Case(name: "heuristic uses the response time without Date",
                 headers: ["Last-Modified": "Sun, 06 Nov 1994 06:02:57 GMT"], date: nil, responseTime: 1000,
                 lifetime: 1100, source: .heuristic),
            Case(name: "no heuristic when Last-Modified is after Date",
                 headers: ["Last-Modified": "Sun, 06 Nov 1994 08:51:17 GMT"], lifetime: 0, source: .heuristic),
            Case(name: "no heuristic without Last-Modified", headers: [:], lifetime: 0, source: .none),
            Case(name: "no heuristic from an invalid Last-Modified",
                 headers: ["Last-Modified": "Sun, 06 Nov 1994 06:02:57 UTC"], lifetime: 0, source: .none),
            Case(name: "no heuristic for a status that is not heuristically cacheable", status: 302,
                 headers: ["Last-Modified": "Sun, 06 Nov 1994 06:02:57 GMT"], lifetime: 0, source: .none),
            Case(name: "heuristic for a public response of any status", status: 302,
                 headers: ["Cache-Control": "public", "Last-Modified": "Sun, 06 Nov 1994 06:02:57 GMT"],
                 lifetime: 1000, source: .heuristic),
            Case(name: "no heuristic when an explicit expiry exists",
                 headers: ["Cache-Control": "max-age=5", "Last-Modified": "Sun, 06 Nov 1994 06:02:57 GMT"], lifetime: 5, source: .maxAge),
        ]

        @Test(arguments: cases)
        func lifetimeFollowsRFC9111Section4_2_1(_ testCase: Case) {
            let stored = PolicyFixtures.stored(
                status: testCase.status,
                headers: testCase.headers,
                date: testCase.date,
                requestTime: PolicyFixtures.at(testCase.responseTime),
                responseTime: PolicyFixtures.at(testCase.responseTime)
            )
            let result = PolicyFixtures.engine(testCase.mode).freshnessLifetime(of: stored)
            #expect(result.lifetime == testCase.lifetime)
            #expect(result.source == testCase.source)
        }

        @Test func theHeuristicCapAndFractionAreSettings() {
            let stored = PolicyFixtures.stored(headers: ["Last-Modified": "Thu, 27 Oct 1994 08:49:37 GMT"])
            let capped = CachePolicyEngine(maximumHeuristicLifetime: 3600)
            #expect(capped.freshnessLifetime(of: stored).lifetime == 3600)
            let smallFraction = CachePolicyEngine(heuristicFraction: 0.01)
            #expect(smallFraction.freshnessLifetime(of: stored).lifetime == 8640)
        }

        @Test(arguments: [(59.0, true), (60.0, false), (61.0, false)])
        func aResponseIsFreshOnlyWhileItsLifetimeExceedsItsAge(elapsed: TimeInterval, fresh: Bool) {
            let stored = PolicyFixtures.stored(headers: ["Cache-Control": "max-age=60"])
            let freshness = PolicyFixtures.privateEngine.freshness(of: stored, at: PolicyFixtures.at(elapsed))
            #expect(freshness.isFresh == fresh)
            #expect(freshness.currentAge == elapsed)
            #expect(freshness.remainingLifetime == 60 - elapsed)
            #expect(freshness.staleness == max(0, elapsed - 60))
        }
    }
}

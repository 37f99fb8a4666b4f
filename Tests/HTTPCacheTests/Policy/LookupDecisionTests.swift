import Foundation
import HTTPTypes
import Testing
@testable import HTTPCache

extension PolicyEngineTests {
    struct LookupDecision {
        struct Case: Sendable, CustomTestStringConvertible {
            var name: String
            var response: String
            var request: HTTPFields = [:]
            var age: TimeInterval
            var mode: CacheMode = .private
            var expected: DecisionKind
            var testDescription: String { mode == .shared ? "\(name) [shared]" : name }
        }

        /// A stored response with `Date: t0`, `ETag: "v1"` and `Cache-Control: <response>`,
        /// received instantly at t0, judged `age` seconds later.
        static func decide(_ testCase: Case) -> CacheDecision {
            let stored = PolicyFixtures.stored(headers: ["Cache-Control": testCase.response, "ETag": "\"v1\""])
            return PolicyFixtures.engine(testCase.mode).decision(
                for: PolicyFixtures.request(headers: testCase.request),
                storedResponses: [stored],
                at: PolicyFixtures.at(testCase.age)
            )
        }

        static let bothModes: [Case] = [
            Case(name: "fresh by max-age", response: "max-age=60", age: 30, expected: .fresh),
            Case(name: "age equal to max-age is stale", response: "max-age=60", age: 60, expected: .revalidate),
            Case(name: "stale by max-age", response: "max-age=60", age: 90, expected: .revalidate),
            Case(name: "invalid max-age is stale", response: "max-age=abc", age: 0, expected: .revalidate),
            Case(name: "response no-cache", response: "no-cache, max-age=600", age: 0, expected: .revalidate),
            Case(name: "qualified response no-cache acts unqualified", response: "no-cache=\"Set-Cookie\", max-age=600", age: 0,
                 expected: .revalidate),
            Case(name: "request no-cache", response: "max-age=600", request: ["Cache-Control": "no-cache"], age: 10,
                 expected: .revalidate),
            Case(name: "Pragma: no-cache without Cache-Control", response: "max-age=600", request: ["Pragma": "no-cache"], age: 10,
                 expected: .revalidate),
            Case(name: "Pragma ignored when Cache-Control is present", response: "max-age=600",
                 request: ["Pragma": "no-cache", "Cache-Control": "max-stale"], age: 10, expected: .fresh),
            Case(name: "request max-age exceeded", response: "max-age=600", request: ["Cache-Control": "max-age=5"], age: 10,
                 expected: .revalidate),
            Case(name: "request max-age met", response: "max-age=600", request: ["Cache-Control": "max-age=10"], age: 10,
                 expected: .fresh),
            Case(name: "invalid request max-age reads as 0", response: "max-age=600", request: ["Cache-Control": "max-age=x"], age: 1,
                 expected: .revalidate),
            Case(name: "request min-fresh not met", response: "max-age=600", request: ["Cache-Control": "min-fresh=100"], age: 550,
                 expected: .revalidate),
            Case(name: "request min-fresh met", response: "max-age=600", request: ["Cache-Control": "min-fresh=100"], age: 500,
                 expected: .fresh),
            Case(name: "max-stale without value", response: "max-age=60", request: ["Cache-Control": "max-stale"], age: 100_000,
                 expected: .stale),
            Case(name: "max-stale=30 at 30 s stale", response: "max-age=60", request: ["Cache-Control": "max-stale=30"], age: 90,
                 expected: .stale),
            Case(name: "max-stale=30 at 31 s stale", response: "max-age=60", request: ["Cache-Control": "max-stale=30"], age: 91,
                 expected: .revalidate),
            Case(name: "max-stale with request max-age exceeded", response: "max-age=60",
                 request: ["Cache-Control": "max-stale, max-age=70"], age: 90, expected: .revalidate),
            Case(name: "max-stale with min-fresh", response: "max-age=60",
                 request: ["Cache-Control": "max-stale, min-fresh=1"], age: 90, expected: .revalidate),
            Case(name: "must-revalidate overrides max-stale", response: "max-age=60, must-revalidate",
                 request: ["Cache-Control": "max-stale"], age: 90, expected: .revalidate),
            Case(name: "stale-while-revalidate inside the window", response: "max-age=60, stale-while-revalidate=30", age: 80,
                 expected: .staleWhileRevalidate),
            Case(name: "stale-while-revalidate at the window's end", response: "max-age=60, stale-while-revalidate=30", age: 90,
                 expected: .staleWhileRevalidate),
            Case(name: "stale-while-revalidate past the window", response: "max-age=60, stale-while-revalidate=30", age: 91,
                 expected: .revalidate),
            Case(name: "stale-while-revalidate does not apply while fresh", response: "max-age=60, stale-while-revalidate=30", age: 59,
                 expected: .fresh),
            Case(name: "must-revalidate forbids stale-while-revalidate",
                 response: "max-age=60, stale-while-revalidate=30, must-revalidate", age: 80, expected: .revalidate),
            Case(name: "no-cache forbids stale-while-revalidate",
                 response: "no-cache, max-age=60, stale-while-revalidate=30", age: 80, expected: .revalidate),
            Case(name: "request max-age exceeded forbids stale-while-revalidate", response: "max-age=60, stale-while-revalidate=30",
                 request: ["Cache-Control": "max-age=70"], age: 80, expected: .revalidate),
            Case(name: "request min-fresh forbids stale-while-revalidate", response: "max-age=60, stale-while-revalidate=30",
                 request: ["Cache-Control": "min-fresh=1"], age: 80, expected: .revalidate),
            Case(name: "immutable ignores a reload's max-age=0", response: "max-age=600, immutable",
                 request: ["Cache-Control": "max-age=0"], age: 10, expected: .fresh),
            Case(name: "without immutable a reload's max-age=0 revalidates", response: "max-age=600",
                 request: ["Cache-Control": "max-age=0"], age: 10, expected: .revalidate),
            Case(name: "immutable does not survive a forced reload", response: "max-age=600, immutable",
                 request: ["Cache-Control": "no-cache"], age: 10, expected: .revalidate),
            Case(name: "immutable but stale", response: "max-age=600, immutable", age: 700, expected: .revalidate),
            Case(name: "only-if-cached with a fresh response", response: "max-age=60",
                 request: ["Cache-Control": "only-if-cached"], age: 10, expected: .fresh),
            Case(name: "only-if-cached with a stale response", response: "max-age=60",
                 request: ["Cache-Control": "only-if-cached"], age: 90, expected: .gatewayTimeout),
            Case(name: "only-if-cached with max-stale", response: "max-age=60",
                 request: ["Cache-Control": "only-if-cached, max-stale=60"], age: 90, expected: .stale),
            Case(name: "only-if-cached inside a stale-while-revalidate window", response: "max-age=60, stale-while-revalidate=30",
                 request: ["Cache-Control": "only-if-cached"], age: 80, expected: .stale),
            Case(name: "only-if-cached with no-cache", response: "no-cache",
                 request: ["Cache-Control": "only-if-cached"], age: 0, expected: .gatewayTimeout),
        ]

        static let modeDependent: [Case] = [
            Case(name: "s-maxage gives the lifetime", response: "s-maxage=120, max-age=60", age: 90, mode: .shared, expected: .fresh),
            Case(name: "s-maxage gives the lifetime", response: "s-maxage=120, max-age=60", age: 90, mode: .private,
                 expected: .revalidate),
            Case(name: "proxy-revalidate forbids max-stale", response: "max-age=60, proxy-revalidate",
                 request: ["Cache-Control": "max-stale"], age: 90, mode: .shared, expected: .revalidate),
            Case(name: "proxy-revalidate forbids max-stale", response: "max-age=60, proxy-revalidate",
                 request: ["Cache-Control": "max-stale"], age: 90, mode: .private, expected: .stale),
            Case(name: "s-maxage forbids max-stale", response: "s-maxage=60, max-age=60",
                 request: ["Cache-Control": "max-stale"], age: 90, mode: .shared, expected: .revalidate),
            Case(name: "s-maxage forbids max-stale", response: "s-maxage=60, max-age=60",
                 request: ["Cache-Control": "max-stale"], age: 90, mode: .private, expected: .stale),
            Case(name: "proxy-revalidate forbids stale-while-revalidate", response: "max-age=60, proxy-revalidate, stale-while-revalidate=60",
                 age: 90, mode: .shared, expected: .revalidate),
            Case(name: "proxy-revalidate forbids stale-while-revalidate", response: "max-age=60, proxy-revalidate, stale-while-revalidate=60",
                 age: 90, mode: .private, expected: .staleWhileRevalidate),
        ]

        @Test(arguments: bothModes, [CacheMode.private, .shared])
        func requestAndResponseDirectivesDecideInBothModes(_ testCase: Case, mode: CacheMode) {
            var testCase = testCase
            testCase.mode = mode
            #expect(DecisionKind(Self.decide(testCase)) == testCase.expected)
        }

        @Test(arguments: modeDependent)
        func sharedOnlyDirectivesApplyOnlyInASharedCache(_ testCase: Case) {
            #expect(DecisionKind(Self.decide(testCase)) == testCase.expected)
        }

        @Test func aFreshResponseIsServedAsStored() {
            let stored = PolicyFixtures.stored(headers: ["Cache-Control": "max-age=60"])
            let decision = PolicyFixtures.privateEngine.decision(
                for: PolicyFixtures.request(), storedResponses: [stored], at: PolicyFixtures.at(10))
            #expect(decision == .fresh(stored))
            #expect(!decision.requiresNetwork)
            #expect(decision.storedResponse == stored)
        }

        @Test func revalidationCarriesTheStoredValidators() {
            let stored = PolicyFixtures.stored(headers: [
                "Cache-Control": "max-age=60", "ETag": "\"v1\"", "Last-Modified": "Sun, 06 Nov 1994 06:02:57 GMT",
            ])
            let decision = PolicyFixtures.privateEngine.decision(
                for: PolicyFixtures.request(), storedResponses: [stored], at: PolicyFixtures.at(61))
            #expect(decision == .revalidate(stored, conditionalHeaders: [
                "If-None-Match": "\"v1\"", "If-Modified-Since": "Sun, 06 Nov 1994 06:02:57 GMT",
            ]))
            #expect(decision.requiresNetwork)
        }

        @Test func staleWhileRevalidateCarriesTheStoredValidators() {
            let stored = PolicyFixtures.stored(headers: ["Cache-Control": "max-age=60, stale-while-revalidate=30", "ETag": "W/\"v2\""])
            let decision = PolicyFixtures.privateEngine.decision(
                for: PolicyFixtures.request(), storedResponses: [stored], at: PolicyFixtures.at(70))
            #expect(decision == .staleWhileRevalidate(stored, conditionalHeaders: ["If-None-Match": "W/\"v2\""]))
            #expect(!decision.requiresNetwork)
        }

        @Test func aStaleResponseWithoutValidatorsIsFetchedAndKeptAsFallback() {
            let stored = PolicyFixtures.stored(headers: ["Cache-Control": "max-age=60"])
            let decision = PolicyFixtures.privateEngine.decision(
                for: PolicyFixtures.request(), storedResponses: [stored], at: PolicyFixtures.at(61))
            #expect(decision == .mustFetch(additionalHeaders: [:], fallback: stored))
        }

        @Test(arguments: [CacheMode.private, .shared])
        func nothingStoredMeansFetch(mode: CacheMode) {
            let decision = PolicyFixtures.engine(mode).decision(for: PolicyFixtures.request(), storedResponses: [], at: PolicyFixtures.t0)
            #expect(decision == .mustFetch(additionalHeaders: [:], fallback: nil))
        }

        @Test(arguments: [CacheMode.private, .shared])
        func onlyIfCachedWithNothingStoredIsAGatewayTimeout(mode: CacheMode) {
            let request = PolicyFixtures.request(headers: ["Cache-Control": "only-if-cached"])
            let decision = PolicyFixtures.engine(mode).decision(for: request, storedResponses: [], at: PolicyFixtures.t0)
            #expect(decision == .gatewayTimeout)
        }

        @Test func heuristicFreshnessServesUntilTenPercentOfTheModificationAge() {
            // Last-Modified 10 000 s before Date: heuristic lifetime 1 000 s.
            let stored = PolicyFixtures.stored(headers: ["Last-Modified": "Sun, 06 Nov 1994 06:02:57 GMT"])
            let engine = PolicyFixtures.privateEngine
            let request = PolicyFixtures.request()
            #expect(engine.decision(for: request, storedResponses: [stored], at: PolicyFixtures.at(999)) == .fresh(stored))
            #expect(DecisionKind(engine.decision(for: request, storedResponses: [stored], at: PolicyFixtures.at(1000))) == .revalidate)
        }

        @Test func expiresZeroIsStaleAtOnce() {
            let stored = PolicyFixtures.stored(headers: ["Expires": "0", "ETag": "\"v1\""])
            let decision = PolicyFixtures.privateEngine.decision(
                for: PolicyFixtures.request(), storedResponses: [stored], at: PolicyFixtures.t0)
            #expect(DecisionKind(decision) == .revalidate)
        }

        @Test func headRequestsAreAnsweredFromStoredGETResponses() {
            let stored = PolicyFixtures.stored(headers: ["Cache-Control": "max-age=60"])
            let decision = PolicyFixtures.privateEngine.decision(
                for: PolicyFixtures.request("HEAD"), storedResponses: [stored], at: PolicyFixtures.at(10))
            #expect(decision == .fresh(stored))
        }

        @Test func getRequestsAreNotAnsweredFromStoredHEADResponses() {
            let stored = PolicyFixtures.stored(method: "HEAD", headers: ["Cache-Control": "max-age=60"])
            let engine = PolicyFixtures.privateEngine
            #expect(engine.decision(for: PolicyFixtures.request(), storedResponses: [stored], at: PolicyFixtures.at(10))
                == .mustFetch(additionalHeaders: [:], fallback: nil))
            #expect(engine.decision(for: PolicyFixtures.request("HEAD"), storedResponses: [stored], at: PolicyFixtures.at(10))
                == .fresh(stored))
        }

        @Test(arguments: ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
        func otherMethodsAreNeverAnsweredFromTheCache(method: String) {
            let stored = PolicyFixtures.stored(headers: ["Cache-Control": "max-age=60"])
            let decision = PolicyFixtures.privateEngine.decision(
                for: PolicyFixtures.request(method), storedResponses: [stored], at: PolicyFixtures.at(10))
            #expect(decision == .mustFetch(additionalHeaders: [:], fallback: nil))
        }

        @Test func postResponsesAnswerPostRequestsOnlyWhenEnabled() {
            let stored = PolicyFixtures.stored(method: "POST", headers: ["Cache-Control": "max-age=60"])
            let request = PolicyFixtures.request("POST")
            let enabled = CachePolicyEngine(cachesPOSTResponses: true)
            #expect(enabled.decision(for: request, storedResponses: [stored], at: PolicyFixtures.at(10)) == .fresh(stored))
            #expect(enabled.decision(for: PolicyFixtures.request(), storedResponses: [stored], at: PolicyFixtures.at(10))
                == .mustFetch(additionalHeaders: [:], fallback: nil))
            #expect(PolicyFixtures.privateEngine.decision(for: request, storedResponses: [stored], at: PolicyFixtures.at(10))
                == .mustFetch(additionalHeaders: [:], fallback: nil))
        }
    }
}

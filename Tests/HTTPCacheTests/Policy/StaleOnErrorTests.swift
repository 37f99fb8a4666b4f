import Foundation
import HTTPTypes
import Testing
@testable import HTTPCache

extension PolicyEngineTests {
    struct StaleOnError {
        typealias Failure = CachePolicyEngine.FetchFailure

        struct Case: Sendable, CustomTestStringConvertible {
            var name: String
            var response: String
            var request: HTTPFields = [:]
            var age: TimeInterval = 100  // max-age=60 responses are 40 s stale
            var failure: Failure
            var mode: CacheMode = .private
            var expected: Bool
            var testDescription: String { mode == .shared ? "\(name) [shared]" : name }
        }

        static let cases: [Case] = [
            Case(name: "disconnected, no directive", response: "max-age=60", failure: .disconnected, expected: true),
            Case(name: "503, no directive", response: "max-age=60", failure: .errorStatus(503), expected: false),
            Case(name: "disconnected, must-revalidate", response: "max-age=60, must-revalidate", failure: .disconnected, expected: false),
            Case(name: "disconnected, no-cache", response: "no-cache, max-age=60", failure: .disconnected, expected: false),
            Case(name: "disconnected, proxy-revalidate, shared", response: "max-age=60, proxy-revalidate", failure: .disconnected,
                 mode: .shared, expected: false),
            Case(name: "disconnected, proxy-revalidate, private", response: "max-age=60, proxy-revalidate", failure: .disconnected,
                 expected: true),
            Case(name: "disconnected, s-maxage, shared", response: "s-maxage=60", failure: .disconnected, mode: .shared, expected: false),
            Case(name: "stale-if-error covers 500", response: "max-age=60, stale-if-error=60", failure: .errorStatus(500), expected: true),
            Case(name: "stale-if-error covers 502", response: "max-age=60, stale-if-error=60", failure: .errorStatus(502), expected: true),
            Case(name: "stale-if-error covers 503", response: "max-age=60, stale-if-error=60", failure: .errorStatus(503), expected: true),
            Case(name: "stale-if-error covers 504", response: "max-age=60, stale-if-error=60", failure: .errorStatus(504), expected: true),
            Case(name: "stale-if-error ignores 404", response: "max-age=60, stale-if-error=60", failure: .errorStatus(404), expected: false),
            Case(name: "stale-if-error ignores 501", response: "max-age=60, stale-if-error=60", failure: .errorStatus(501), expected: false),
            Case(name: "stale-if-error at its limit", response: "max-age=60, stale-if-error=40", failure: .errorStatus(503), expected: true),
            Case(name: "stale-if-error exceeded", response: "max-age=60, stale-if-error=39", failure: .errorStatus(503), expected: false),
            Case(name: "stale-if-error in the request", response: "max-age=60", request: ["Cache-Control": "stale-if-error=60"],
                 failure: .errorStatus(503), expected: true),
            Case(name: "request max-stale covers errors", response: "max-age=60", request: ["Cache-Control": "max-stale=50"],
                 failure: .errorStatus(503), expected: true),
            Case(name: "request max-stale exceeded", response: "max-age=60", request: ["Cache-Control": "max-stale=10"],
                 failure: .errorStatus(503), expected: false),
            Case(name: "must-revalidate beats stale-if-error", response: "max-age=60, must-revalidate, stale-if-error=60",
                 failure: .errorStatus(503), expected: false),
            Case(name: "fresh response after an error", response: "max-age=60", age: 30, failure: .errorStatus(503), expected: true),
            Case(name: "fresh must-revalidate response after an error", response: "max-age=60, must-revalidate", age: 30,
                 failure: .errorStatus(503), expected: true),
            Case(name: "fresh no-cache response after an error", response: "no-cache, max-age=60", age: 30,
                 failure: .errorStatus(503), expected: false),
        ]

        @Test(arguments: cases)
        func staleResponsesAnswerFailuresOnlyWhenAllowed(_ testCase: Case) {
            let stored = PolicyFixtures.stored(headers: ["Cache-Control": testCase.response])
            let engine = PolicyFixtures.engine(testCase.mode)
            let result = engine.canServeStale(
                stored, for: PolicyFixtures.request(headers: testCase.request), at: PolicyFixtures.at(testCase.age),
                after: testCase.failure)
            #expect(result == testCase.expected)
        }

        @Test func servingStaleWhenDisconnectedCanBeTurnedOff() {
            let stored = PolicyFixtures.stored(headers: ["Cache-Control": "max-age=60"])
            let engine = CachePolicyEngine(servesStaleWhenDisconnected: false)
            let request = PolicyFixtures.request()
            #expect(!engine.canServeStale(stored, for: request, at: PolicyFixtures.at(100), after: .disconnected))
            let withWindow = PolicyFixtures.stored(headers: ["Cache-Control": "max-age=60, stale-if-error=60"])
            #expect(engine.canServeStale(withWindow, for: request, at: PolicyFixtures.at(100), after: .disconnected))
        }
    }
}

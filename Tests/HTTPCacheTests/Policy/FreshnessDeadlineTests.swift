import Foundation
import HTTPTypes
import Testing
@testable import HTTPCache

extension PolicyEngineTests {
    /// `freshnessDeadline(of:url:at:)`: the instant until which a request without directives is
    /// answered fresh, checked against the decision itself on both sides of it.
    struct FreshnessDeadline {
        struct Case: Sendable, CustomTestStringConvertible {
            var name: String
            var headers: HTTPFields
            var mode: CacheMode = .shared
            /// Seconds after t0 the deadline is asked at; nil: there is none.
            var askedAt: TimeInterval = 10
            var expected: TimeInterval?
            var testDescription: String { name }
        }

        static let cases: [Case] = [
            Case(name: "max-age", headers: ["Cache-Control": "max-age=60"], expected: 60),
            Case(name: "an Age from upstream counts", headers: ["Cache-Control": "max-age=60", "Age": "15"], expected: 45),
            Case(name: "s-maxage in a shared cache", headers: ["Cache-Control": "max-age=60, s-maxage=30"], expected: 30),
            Case(name: "max-age in a private cache", headers: ["Cache-Control": "max-age=60, s-maxage=30"], mode: .private, expected: 60),
            Case(name: "Expires", headers: ["Expires": "Sun, 06 Nov 1994 08:50:37 GMT"], expected: 60),
            Case(name: "immutable", headers: ["Cache-Control": "max-age=60, immutable"], expected: 60),
            Case(name: "stale now", headers: ["Cache-Control": "max-age=5"], expected: nil),
            Case(name: "response no-cache", headers: ["Cache-Control": "no-cache, max-age=60"], expected: nil),
            Case(name: "Vary", headers: ["Cache-Control": "max-age=60", "Vary": "Accept-Encoding"], expected: nil),
            Case(name: "an invalid Age is ignored", headers: ["Cache-Control": "max-age=60", "Age": "x"], expected: 60),
            Case(name: "an Age list counts by its first member", headers: ["Cache-Control": "max-age=60", "Age": "15, 50"], expected: 45),
        ]

        @Test(arguments: cases)
        func theDecisionIsFreshUntilTheDeadlineAndNotAfter(_ testCase: Case) {
            let engine = PolicyFixtures.engine(testCase.mode)
            let stored = PolicyFixtures.stored(headers: testCase.headers)
            let now = PolicyFixtures.at(testCase.askedAt)
            let deadline = engine.freshnessDeadline(of: stored, url: PolicyFixtures.url, at: now)
            #expect(deadline.map { $0.timeIntervalSince(PolicyFixtures.t0) } == testCase.expected)
            guard let deadline else { return }
            let request = PolicyFixtures.request(headers: ["Accept": "*/*", "User-Agent": "test"])
            func kind(at date: Date) -> DecisionKind {
                DecisionKind(engine.decision(for: request, storedResponses: [stored], at: date))
            }
            #expect(kind(at: now) == .fresh)
            #expect(kind(at: deadline.addingTimeInterval(-0.001)) == .fresh)
            #expect(kind(at: deadline) != .fresh)
        }

        /// A HEAD may be answered from a stored GET, and its deadline is the GET's.
        @Test func aStoredHEADsDeadlineIsForHEADs() {
            let engine = PolicyFixtures.sharedEngine
            let stored = PolicyFixtures.stored(method: "HEAD", headers: ["Cache-Control": "max-age=60"])
            let deadline = engine.freshnessDeadline(of: stored, url: PolicyFixtures.url, at: PolicyFixtures.at(1))
            #expect(deadline == PolicyFixtures.at(60))
            let head = engine.decision(for: PolicyFixtures.request("HEAD"), storedResponses: [stored], at: PolicyFixtures.at(59))
            #expect(DecisionKind(head) == .fresh)
        }
    }
}

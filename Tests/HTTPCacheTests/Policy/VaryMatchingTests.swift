import Foundation
import HTTPTypes
import Testing
@testable import HTTPCache

extension PolicyEngineTests {
    struct VaryMatching {
        static func stored(vary: HTTPFields, captured: HTTPFields) -> StoredResponse {
            var headers: HTTPFields = ["Cache-Control": "max-age=60"]
            headers.append(contentsOf: vary)
            return PolicyFixtures.stored(headers: headers, varying: captured)
        }

        @Test(arguments: [
            ("gzip, deflate", true),
            ("gzip,deflate", true),
            ("  gzip ,\tdeflate  ", true),
            ("GZIP, deflate", false),  // values are compared as written, case included
            ("deflate, gzip", false),  // order is significant
            ("gzip", false),
        ])
        func nominatedValuesMatchAfterWhitespaceNormalisation(requestValue: String, matches: Bool) {
            let stored = Self.stored(vary: ["Vary": "Accept-Encoding"], captured: ["Accept-Encoding": "gzip, deflate"])
            let request = PolicyFixtures.request(headers: ["Accept-Encoding": requestValue])
            #expect(CachePolicyEngine.varyMatches(stored, request: request) == matches)
        }

        @Test func multipleFieldLinesAreCombinedBeforeComparing() {
            let stored = Self.stored(vary: ["Vary": "Accept-Encoding"], captured: ["Accept-Encoding": "gzip, deflate"])
            let request = PolicyFixtures.request(headers: ["Accept-Encoding": "gzip", "accept-encoding": "deflate"])
            #expect(CachePolicyEngine.varyMatches(stored, request: request))
        }

        @Test func fieldNamesMatchCaseInsensitively() {
            let stored = Self.stored(vary: ["vary": "accept-encoding"], captured: ["Accept-Encoding": "br"])
            #expect(CachePolicyEngine.varyMatches(stored, request: PolicyFixtures.request(headers: ["ACCEPT-ENCODING": "br"])))
        }

        @Test func absenceMatchesOnlyAbsence() {
            let storedWithout = Self.stored(vary: ["Vary": "Accept-Language"], captured: [:])
            let storedWith = Self.stored(vary: ["Vary": "Accept-Language"], captured: ["Accept-Language": "fr"])
            let requestWithout = PolicyFixtures.request()
            let requestWith = PolicyFixtures.request(headers: ["Accept-Language": "fr"])
            #expect(CachePolicyEngine.varyMatches(storedWithout, request: requestWithout))
            #expect(!CachePolicyEngine.varyMatches(storedWithout, request: requestWith))
            #expect(!CachePolicyEngine.varyMatches(storedWith, request: requestWithout))
            #expect(CachePolicyEngine.varyMatches(storedWith, request: requestWith))
        }

        @Test func everyNominatedFieldAcrossVaryLinesMustMatch() {
            let stored = Self.stored(
                vary: ["Vary": "Accept-Encoding", "Vary": "Accept-Language"],
                captured: ["Accept-Encoding": "gzip", "Accept-Language": "en"]
            )
            #expect(CachePolicyEngine.varyMatches(stored, request: PolicyFixtures.request(headers: ["Accept-Encoding": "gzip", "Accept-Language": "en"])))
            #expect(!CachePolicyEngine.varyMatches(stored, request: PolicyFixtures.request(headers: ["Accept-Encoding": "gzip", "Accept-Language": "de"])))
        }

        @Test func varyAsteriskNeverMatches() {
            let stored = Self.stored(vary: ["Vary": "*"], captured: [:])
            #expect(!CachePolicyEngine.varyMatches(stored, request: PolicyFixtures.request()))
            let decision = PolicyFixtures.privateEngine.decision(
                for: PolicyFixtures.request(), storedResponses: [stored], at: PolicyFixtures.at(1))
            #expect(decision == .mustFetch(additionalHeaders: [:], fallback: nil))
        }

        @Test func storingCapturesOnlyTheNominatedRequestFields() {
            let request = PolicyFixtures.request(headers: [
                "Accept-Encoding": "gzip", "User-Agent": "test", "Cookie": "a=1", "cookie": "b=2",
            ])
            let stored = StoredResponse(
                request: request,
                status: 200,
                headers: ["Vary": "accept-encoding, COOKIE"],
                requestTime: PolicyFixtures.t0,
                responseTime: PolicyFixtures.t0
            )
            #expect(stored.varyingRequestHeaders == ["Accept-Encoding": "gzip", "Cookie": "a=1", "cookie": "b=2"])
            #expect(stored.requestMethod == "GET")
        }

        @Test func theMatchingVariantIsChosen() {
            let english = Self.stored(vary: ["Vary": "Accept-Language"], captured: ["Accept-Language": "en"])
            let french = Self.stored(vary: ["Vary": "Accept-Language"], captured: ["Accept-Language": "fr"])
            let request = PolicyFixtures.request(headers: ["Accept-Language": "fr"])
            let decision = PolicyFixtures.privateEngine.decision(for: request, storedResponses: [english, french], at: PolicyFixtures.at(1))
            #expect(decision == .fresh(french))
        }

        @Test func theMostRecentMatchingResponseByDateIsChosen() {
            let older = PolicyFixtures.stored(headers: ["Cache-Control": "max-age=600", "ETag": "\"old\""],
                                              date: PolicyFixtures.t0HTTP, responseTime: PolicyFixtures.at(50))
            let newer = PolicyFixtures.stored(headers: ["Cache-Control": "max-age=600", "ETag": "\"new\""],
                                              date: "Sun, 06 Nov 1994 08:51:17 GMT", responseTime: PolicyFixtures.at(10))
            let selected = PolicyFixtures.privateEngine.selectStoredResponse(for: PolicyFixtures.request(), among: [newer, older])
            #expect(selected == newer)
            let reversed = PolicyFixtures.privateEngine.selectStoredResponse(for: PolicyFixtures.request(), among: [older, newer])
            #expect(reversed == newer)
        }

        @Test func equalDatesAreBrokenByResponseTime() {
            let first = PolicyFixtures.stored(headers: ["ETag": "\"a\""], responseTime: PolicyFixtures.at(1))
            let second = PolicyFixtures.stored(headers: ["ETag": "\"b\""], responseTime: PolicyFixtures.at(2))
            #expect(PolicyFixtures.privateEngine.selectStoredResponse(for: PolicyFixtures.request(), among: [second, first]) == second)
        }
    }
}

import HTTPTypes
import Testing
@testable import HTTPCache

extension PolicyEngineTests {
    struct StorabilityRules {
        struct Case: Sendable, CustomTestStringConvertible {
            var name: String
            var method = "GET"
            var status = 200
            var response: HTTPFields = [:]
            var request: HTTPFields = [:]
            var mode: CacheMode = .private
            var cachesPOST = false
            var expected: Storability
            var testDescription: String { name }
        }

        static let cases: [Case] = [
            Case(name: "GET 200 without directives (heuristically cacheable)", expected: .storable),
            Case(name: "GET 200 max-age", response: ["Cache-Control": "max-age=60"], expected: .storable),
            Case(name: "HEAD 200", method: "HEAD", expected: .storable),
            Case(name: "POST without opt-in", method: "POST", response: ["Cache-Control": "max-age=60"],
                 expected: .notStorable(.methodNotCacheable)),
            Case(name: "PUT", method: "PUT", response: ["Cache-Control": "max-age=60"], expected: .notStorable(.methodNotCacheable)),
            Case(name: "lowercase get is another method", method: "get", expected: .notStorable(.methodNotCacheable)),
            Case(name: "1xx is not final", status: 103, response: ["Cache-Control": "max-age=60"], expected: .notStorable(.statusNotFinal)),
            Case(name: "206 is never stored", status: 206, response: ["Cache-Control": "max-age=60"],
                 expected: .notStorable(.statusNotUnderstood)),
            Case(name: "304 is never stored", status: 304, response: ["Cache-Control": "max-age=60"],
                 expected: .notStorable(.statusNotUnderstood)),
            Case(name: "must-understand with an unknown status", status: 299, response: ["Cache-Control": "max-age=60, must-understand, no-store"],
                 expected: .notStorable(.statusNotUnderstood)),
            Case(name: "must-understand lifts no-store for an understood status",
                 response: ["Cache-Control": "max-age=60, must-understand, no-store"], expected: .storable),
            Case(name: "request no-store", request: ["Cache-Control": "no-store"], expected: .notStorable(.noStoreInRequest)),
            Case(name: "response no-store", response: ["Cache-Control": "max-age=60, no-store"], expected: .notStorable(.noStoreInResponse)),
            Case(name: "public does not override no-store", response: ["Cache-Control": "public, no-store"],
                 expected: .notStorable(.noStoreInResponse)),
            Case(name: "private in a shared cache", response: ["Cache-Control": "private, max-age=60"], mode: .shared,
                 expected: .notStorable(.privateResponseInSharedCache)),
            Case(name: "qualified private in a shared cache", response: ["Cache-Control": "private=\"Set-Cookie\", max-age=60"],
                 mode: .shared, expected: .notStorable(.privateResponseInSharedCache)),
            Case(name: "private in a private cache", response: ["Cache-Control": "private, max-age=60"], expected: .storable),
            Case(name: "Authorization in a shared cache", response: ["Cache-Control": "max-age=60"],
                 request: ["Authorization": "Bearer x"], mode: .shared, expected: .notStorable(.authorizationInSharedCache)),
            Case(name: "Authorization in a shared cache with public", response: ["Cache-Control": "public, max-age=60"],
                 request: ["Authorization": "Bearer x"], mode: .shared, expected: .storable),
            Case(name: "Authorization in a shared cache with s-maxage", response: ["Cache-Control": "s-maxage=60"],
                 request: ["Authorization": "Bearer x"], mode: .shared, expected: .storable),
            Case(name: "Authorization in a shared cache with must-revalidate", response: ["Cache-Control": "must-revalidate, max-age=60"],
                 request: ["Authorization": "Bearer x"], mode: .shared, expected: .storable),
            Case(name: "Authorization in a private cache", response: ["Cache-Control": "max-age=60"],
                 request: ["Authorization": "Bearer x"], expected: .storable),
            Case(name: "Vary: *", response: ["Cache-Control": "max-age=60", "Vary": "*"], expected: .notStorable(.varyAsterisk)),
            Case(name: "Vary with * among names", response: ["Vary": "Accept-Encoding, *"], expected: .notStorable(.varyAsterisk)),
            Case(name: "302 without freshness", status: 302, expected: .notStorable(.noFreshnessInformation)),
            Case(name: "302 with max-age", status: 302, response: ["Cache-Control": "max-age=60"], expected: .storable),
            Case(name: "302 with Expires", status: 302, response: ["Expires": "Sun, 06 Nov 1994 09:49:37 GMT"], expected: .storable),
            Case(name: "302 with an invalid Expires is still explicit", status: 302, response: ["Expires": "0"], expected: .storable),
            Case(name: "500 with s-maxage in a shared cache", status: 500, response: ["Cache-Control": "s-maxage=60"],
                 mode: .shared, expected: .storable),
            Case(name: "500 with s-maxage in a private cache", status: 500, response: ["Cache-Control": "s-maxage=60"],
                 expected: .notStorable(.noFreshnessInformation)),
            Case(name: "201 with public", status: 201, response: ["Cache-Control": "public"], expected: .storable),
            Case(name: "307 with private in a private cache", status: 307, response: ["Cache-Control": "private"], expected: .storable),
            Case(name: "no-cache responses are storable", response: ["Cache-Control": "no-cache"], expected: .storable),
            Case(name: "POST opted in with max-age", method: "POST", response: ["Cache-Control": "max-age=60"],
                 cachesPOST: true, expected: .storable),
            Case(name: "POST opted in with Expires", method: "POST", response: ["Expires": "Sun, 06 Nov 1994 09:49:37 GMT"],
                 cachesPOST: true, expected: .storable),
            Case(name: "POST opted in without explicit freshness", method: "POST", cachesPOST: true,
                 expected: .notStorable(.noFreshnessInformation)),
            Case(name: "POST opted in with only public", method: "POST", response: ["Cache-Control": "public"], cachesPOST: true,
                 expected: .notStorable(.noFreshnessInformation)),
        ]

        @Test(arguments: cases)
        func storabilityFollowsRFC9111Section3(_ testCase: Case) {
            let engine = CachePolicyEngine(mode: testCase.mode, cachesPOSTResponses: testCase.cachesPOST)
            let request = PolicyFixtures.request(testCase.method, headers: testCase.request)
            let verdict = engine.storability(ofStatus: testCase.status, headers: testCase.response, for: request)
            #expect(verdict == testCase.expected)
            #expect(verdict.isStorable == (testCase.expected == .storable))
        }

        @Test(arguments: [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501], [CacheMode.private, .shared])
        func heuristicallyCacheableStatusesNeedNoFreshnessInformation(status: Int, mode: CacheMode) {
            let verdict = PolicyFixtures.engine(mode).storability(ofStatus: status, headers: [:], for: PolicyFixtures.request())
            #expect(verdict == .storable)
        }

        @Test(arguments: [201, 202, 302, 303, 307, 400, 403, 500, 502, 503, 504], [CacheMode.private, .shared])
        func otherStatusesNeedExplicitFreshness(status: Int, mode: CacheMode) {
            let engine = PolicyFixtures.engine(mode)
            let request = PolicyFixtures.request()
            #expect(engine.storability(ofStatus: status, headers: [:], for: request) == .notStorable(.noFreshnessInformation))
            #expect(engine.storability(ofStatus: status, headers: ["Cache-Control": "max-age=1"], for: request) == .storable)
        }
    }
}

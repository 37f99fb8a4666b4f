import Foundation
import HTTPTypes
import Testing
@testable import HTTPCache
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension PolicyEngineTests {
    struct CachePolicies {
        enum Stored: String, Sendable, CaseIterable {
            case nothing, fresh, staleWithValidator, staleWithoutValidator, staleMustRevalidate
        }

        static func storedResponses(_ stored: Stored) -> [StoredResponse] {
            switch stored {
            case .nothing: []
            case .fresh: [PolicyFixtures.stored(headers: ["Cache-Control": "max-age=600", "ETag": "\"v1\""])]
            case .staleWithValidator: [PolicyFixtures.stored(headers: ["Cache-Control": "max-age=10", "ETag": "\"v1\""])]
            case .staleWithoutValidator: [PolicyFixtures.stored(headers: ["Cache-Control": "max-age=10"])]
            case .staleMustRevalidate: [PolicyFixtures.stored(headers: ["Cache-Control": "max-age=10, must-revalidate", "ETag": "\"v1\""])]
            }
        }

        static let table: [(RequestCachePolicy, Stored, DecisionKind)] = [
            (.useProtocolCachePolicy, .nothing, .mustFetch),
            (.useProtocolCachePolicy, .fresh, .fresh),
            (.useProtocolCachePolicy, .staleWithValidator, .revalidate),
            (.useProtocolCachePolicy, .staleWithoutValidator, .mustFetch),
            (.useProtocolCachePolicy, .staleMustRevalidate, .revalidate),
            (.reloadIgnoringLocalCacheData, .nothing, .mustFetch),
            (.reloadIgnoringLocalCacheData, .fresh, .mustFetch),
            (.reloadIgnoringLocalCacheData, .staleWithValidator, .mustFetch),
            (.reloadIgnoringLocalAndRemoteCacheData, .nothing, .mustFetch),
            (.reloadIgnoringLocalAndRemoteCacheData, .fresh, .mustFetch),
            (.reloadRevalidatingCacheData, .nothing, .mustFetch),
            (.reloadRevalidatingCacheData, .fresh, .revalidate),
            (.reloadRevalidatingCacheData, .staleWithValidator, .revalidate),
            (.reloadRevalidatingCacheData, .staleWithoutValidator, .mustFetch),
            (.returnCacheDataElseLoad, .nothing, .mustFetch),
            (.returnCacheDataElseLoad, .fresh, .fresh),
            (.returnCacheDataElseLoad, .staleWithValidator, .stale),
            (.returnCacheDataElseLoad, .staleWithoutValidator, .stale),
            (.returnCacheDataElseLoad, .staleMustRevalidate, .stale),
            (.returnCacheDataDontLoad, .nothing, .unavailableOffline),
            (.returnCacheDataDontLoad, .fresh, .fresh),
            (.returnCacheDataDontLoad, .staleWithValidator, .stale),
            (.returnCacheDataDontLoad, .staleMustRevalidate, .stale),
        ]

        @Test(arguments: table)
        func eachPolicyDecidesAsItsTableSays(policy: RequestCachePolicy, stored: Stored, expected: DecisionKind) {
            let decision = PolicyFixtures.privateEngine.decision(
                for: PolicyFixtures.request(), storedResponses: Self.storedResponses(stored), at: PolicyFixtures.at(100), policy: policy)
            #expect(DecisionKind(decision) == expected)
        }

        @Test func reloadIgnoringLocalCacheDataNeitherReadsNorKeepsAFallback() {
            let decision = PolicyFixtures.privateEngine.decision(
                for: PolicyFixtures.request(), storedResponses: Self.storedResponses(.staleWithoutValidator),
                at: PolicyFixtures.at(100), policy: .reloadIgnoringLocalCacheData)
            #expect(decision == .mustFetch(additionalHeaders: [:], fallback: nil))
        }

        @Test func reloadIgnoringLocalAndRemoteCacheDataAsksIntermediariesNotToAnswerFromCache() {
            let decision = PolicyFixtures.privateEngine.decision(
                for: PolicyFixtures.request(), storedResponses: Self.storedResponses(.fresh),
                at: PolicyFixtures.at(100), policy: .reloadIgnoringLocalAndRemoteCacheData)
            #expect(decision == .mustFetch(additionalHeaders: ["Cache-Control": "no-cache", "Pragma": "no-cache"], fallback: nil))
        }

        @Test func reloadRevalidatingCacheDataRevalidatesEvenAFreshImmutableResponse() {
            let stored = PolicyFixtures.stored(headers: ["Cache-Control": "max-age=600, immutable", "ETag": "\"v1\""])
            let decision = PolicyFixtures.privateEngine.decision(
                for: PolicyFixtures.request(), storedResponses: [stored], at: PolicyFixtures.at(1),
                policy: .reloadRevalidatingCacheData)
            #expect(decision == .revalidate(stored, conditionalHeaders: ["If-None-Match": "\"v1\""]))
        }

        @Test(arguments: [RequestCachePolicy.returnCacheDataElseLoad, .returnCacheDataDontLoad])
        func returnCacheDataPoliciesStillRespectVary(policy: RequestCachePolicy) {
            let stored = PolicyFixtures.stored(
                headers: ["Cache-Control": "max-age=600", "Vary": "Accept-Language"], varying: ["Accept-Language": "en"])
            let request = PolicyFixtures.request(headers: ["Accept-Language": "fr"])
            let decision = PolicyFixtures.privateEngine.decision(
                for: request, storedResponses: [stored], at: PolicyFixtures.at(1), policy: policy)
            #expect(decision == (policy == .returnCacheDataDontLoad
                ? .unavailableOffline : .mustFetch(additionalHeaders: [:], fallback: nil)))
        }

        @Test(arguments: [
            (URLRequest.CachePolicy.useProtocolCachePolicy, RequestCachePolicy.useProtocolCachePolicy),
            (.reloadIgnoringLocalCacheData, .reloadIgnoringLocalCacheData),
            (.reloadIgnoringLocalAndRemoteCacheData, .reloadIgnoringLocalAndRemoteCacheData),
            (.reloadRevalidatingCacheData, .reloadRevalidatingCacheData),
            (.returnCacheDataElseLoad, .returnCacheDataElseLoad),
            (.returnCacheDataDontLoad, .returnCacheDataDontLoad),
        ])
        func everyURLRequestCachePolicyMapsToItsCounterpart(foundation: URLRequest.CachePolicy, expected: RequestCachePolicy) {
            #expect(RequestCachePolicy(foundation) == expected)
        }

        @Test func aURLRequestBecomesACacheRequest() throws {
            var urlRequest = URLRequest(url: URL(string: "https://example.com/a#b")!)
            urlRequest.httpMethod = "HEAD"
            urlRequest.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
            let request = try #require(CacheRequest(urlRequest))
            #expect(request.method == "HEAD")
            #expect(request.url.absoluteString == "https://example.com/a#b")
            #expect(request.headers["cache-control"] == "no-cache")
            #expect(request.cacheControl.noCache)
        }
    }
}

import Foundation
import HTTPTypes
import Testing
@testable import HTTPCache

extension PolicyEngineTests {
    struct ConditionalRequests {
        static let cases: [(response: HTTPFields, expected: HTTPFields)] = [
            (["ETag": "\"v1\""], ["If-None-Match": "\"v1\""]),
            (["ETag": "W/\"v1\""], ["If-None-Match": "W/\"v1\""]),
            (["Last-Modified": "Sun, 06 Nov 1994 06:02:57 GMT"], ["If-Modified-Since": "Sun, 06 Nov 1994 06:02:57 GMT"]),
            (["Last-Modified": "Sun, 06 Nov 1994 06:02:57 GMT", "ETag": "\"v1\""],
             ["If-None-Match": "\"v1\"", "If-Modified-Since": "Sun, 06 Nov 1994 06:02:57 GMT"]),
            (["Last-Modified": "yesterday"], [:]),
            ([:], [:]),  // Date alone is never used as a validator
        ]

        @Test(arguments: cases)
        func validatorsBecomeConditionalHeaderFields(response: HTTPFields, expected: HTTPFields) {
            let stored = PolicyFixtures.stored(headers: response)
            #expect(CachePolicyEngine.conditionalHeaders(for: stored) == expected)
        }
    }

    struct NotModifiedSelection {
        static func stored(_ headers: HTTPFields, date: String = PolicyFixtures.t0HTTP) -> StoredResponse {
            PolicyFixtures.stored(headers: headers, date: date)
        }

        @Test func aStrongETagSelectsEveryStoredResponseWithIt() {
            let candidates = [
                Self.stored(["ETag": "\"a\""]),
                Self.stored(["ETag": "\"b\""]),
                Self.stored(["ETag": "\"a\""], date: "Sun, 06 Nov 1994 08:51:17 GMT"),
                Self.stored(["ETag": "W/\"a\""]),
            ]
            #expect(CachePolicyEngine.storedResponsesToUpdate(by: ["ETag": "\"a\""], among: candidates) == [0, 2])
        }

        @Test func aStrongETagMatchingNothingUpdatesNothing() {
            let candidates = [Self.stored(["ETag": "\"a\""]), Self.stored(["Last-Modified": "Sun, 06 Nov 1994 06:02:57 GMT"])]
            #expect(CachePolicyEngine.storedResponsesToUpdate(by: ["ETag": "\"z\"", "Last-Modified": "Sun, 06 Nov 1994 06:02:57 GMT"],
                                                              among: candidates) == [])
        }

        @Test func aWeakETagSelectsTheMostRecentWeakMatch() {
            let candidates = [
                Self.stored(["ETag": "\"a\""], date: "Sun, 06 Nov 1994 08:51:17 GMT"),
                Self.stored(["ETag": "W/\"a\""], date: "Sun, 06 Nov 1994 08:59:37 GMT"),
                Self.stored(["ETag": "W/\"a\""]),
                Self.stored(["ETag": "W/\"b\""], date: "Sun, 06 Nov 1994 09:49:37 GMT"),
            ]
            #expect(CachePolicyEngine.storedResponsesToUpdate(by: ["ETag": "W/\"a\""], among: candidates) == [1])
        }

        @Test func lastModifiedAloneSelectsTheMostRecentResponseWithTheSameDate() {
            let candidates = [
                Self.stored(["Last-Modified": "Sun, 06 Nov 1994 06:02:57 GMT"]),
                Self.stored(["Last-Modified": "Sun, 06 Nov 1994 06:02:57 GMT"], date: "Sun, 06 Nov 1994 08:51:17 GMT"),
                Self.stored(["Last-Modified": "Thu, 27 Oct 1994 08:49:37 GMT"], date: "Sun, 06 Nov 1994 09:49:37 GMT"),
            ]
            #expect(CachePolicyEngine.storedResponsesToUpdate(by: ["Last-Modified": "Sun, 06 Nov 1994 06:02:57 GMT"],
                                                              among: candidates) == [1])
        }

        @Test func withoutValidatorsOnlyASingleUnvalidatedResponseIsSelected() {
            let plain = Self.stored(["Cache-Control": "max-age=60"])
            let tagged = Self.stored(["ETag": "\"a\""])
            let update: HTTPFields = ["Cache-Control": "max-age=120"]
            #expect(CachePolicyEngine.storedResponsesToUpdate(by: update, among: [plain]) == [0])
            #expect(CachePolicyEngine.storedResponsesToUpdate(by: update, among: [plain, plain]) == [])
            #expect(CachePolicyEngine.storedResponsesToUpdate(by: update, among: [tagged]) == [])
            #expect(CachePolicyEngine.storedResponsesToUpdate(by: update, among: []) == [])
        }
    }

    struct NotModifiedMerge {
        static let stored = StoredResponse(
            status: 200,
            headers: [
                "Date": PolicyFixtures.t0HTTP,
                "Cache-Control": "max-age=60",
                "ETag": "\"v1\"",
                "Content-Length": "1234",
                "Content-Type": "text/html",
                "Content-Encoding": "gzip",
                "Link": "</a>; rel=preload",
                "Link": "</b>; rel=preload",
                "X-Old": "kept",
                "Age": "30",
            ],
            requestTime: PolicyFixtures.t0,
            responseTime: PolicyFixtures.t0,
            varyingRequestHeaders: ["Accept-Encoding": "gzip"]
        )

        @Test func headerFieldsOfThe304ReplaceStoredOnesExceptTheProtectedOnes() {
            let notModified: HTTPFields = [
                "Date": "Sun, 06 Nov 1994 09:06:17 GMT",
                "Cache-Control": "max-age=120",
                "ETag": "\"v1\"",
                "Content-Length": "0",
                "Content-Encoding": "identity",
                "Content-Range": "bytes 0-9/10",
                "Transfer-Encoding": "chunked",
                "Connection": "keep-alive, X-Hop",
                "Keep-Alive": "timeout=5",
                "X-Hop": "1",
                "Link": "</c>; rel=preload",
                "X-New": "added",
            ]
            let updated = CachePolicyEngine.updating(
                Self.stored, with: notModified, requestTime: PolicyFixtures.at(999), responseTime: PolicyFixtures.at(1000))
            #expect(Array(updated.headers) == Array(HTTPFields([
                ("Date", "Sun, 06 Nov 1994 09:06:17 GMT"),
                ("Cache-Control", "max-age=120"),
                ("ETag", "\"v1\""),
                ("Content-Length", "1234"),
                ("Content-Type", "text/html"),
                ("Content-Encoding", "gzip"),
                ("Link", "</c>; rel=preload"),
                ("X-Old", "kept"),
                ("X-New", "added"),
            ])))
            #expect(updated.status == 200)
            #expect(updated.requestMethod == "GET")
            #expect(updated.varyingRequestHeaders == ["Accept-Encoding": "gzip"])
            #expect(updated.requestTime == PolicyFixtures.at(999))
            #expect(updated.responseTime == PolicyFixtures.at(1000))
        }

        @Test func theMergedResponseIsFreshAgainForItsNewLifetime() {
            let updated = CachePolicyEngine.updating(
                Self.stored, with: ["Date": "Sun, 06 Nov 1994 09:06:17 GMT", "Cache-Control": "max-age=120"],
                requestTime: PolicyFixtures.at(999), responseTime: PolicyFixtures.at(1000))
            let freshness = PolicyFixtures.privateEngine.freshness(of: updated, at: PolicyFixtures.at(1100))
            #expect(freshness.lifetime == 120)
            #expect(freshness.currentAge == 101)  // 1 s response delay + 100 s resident
            #expect(freshness.isFresh)
        }

        @Test func a304WithAgeReplacesTheStoredAge() {
            let updated = CachePolicyEngine.updating(
                Self.stored, with: ["Date": "Sun, 06 Nov 1994 09:06:17 GMT", "Age": "7"],
                requestTime: PolicyFixtures.at(1000), responseTime: PolicyFixtures.at(1000))
            #expect(updated.headers[values: "Age"] == ["7"])
            #expect(ResponseAge(of: updated, at: PolicyFixtures.at(1000)).currentAge == 7)
        }

        @Test func a304WithoutDateGetsTheResponseTimeAsDate() {
            let updated = CachePolicyEngine.updating(
                Self.stored, with: ["ETag": "\"v1\""], requestTime: PolicyFixtures.at(999), responseTime: PolicyFixtures.at(1000))
            #expect(updated.headers[values: "Date"] == ["Sun, 06 Nov 1994 09:06:17 GMT"])
            #expect(!updated.headers.contains("Age"))
            #expect(updated.headers["Cache-Control"] == "max-age=60")
            let freshness = PolicyFixtures.privateEngine.freshness(of: updated, at: PolicyFixtures.at(1000))
            #expect(freshness.currentAge == 1)
            #expect(freshness.isFresh)
        }
    }
}

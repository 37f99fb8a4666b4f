import Foundation
import HTTPTypes
import Testing
@testable import HTTPCache

extension PolicyEngineTests {
    struct Invalidation {
        static let target = URL(string: "https://example.com/items")!

        static func invalidated(_ method: String, status: Int, headers: HTTPFields = [:], url: URL = target) -> [String] {
            CachePolicyEngine.urlsToInvalidate(
                after: PolicyFixtures.request(method, url: url), status: status, headers: headers
            ).map(\.absoluteString)
        }

        @Test(arguments: ["POST", "PUT", "DELETE", "PATCH", "PURGE", "post"])
        func unsafeAndUnknownMethodsInvalidateTheTarget(method: String) {
            #expect(Self.invalidated(method, status: 200) == ["https://example.com/items"])
        }

        @Test(arguments: ["GET", "HEAD", "OPTIONS", "TRACE"])
        func safeMethodsInvalidateNothing(method: String) {
            #expect(Self.invalidated(method, status: 200, headers: ["Location": "/items/1"]) == [])
        }

        @Test(arguments: [(200, true), (201, true), (204, true), (302, true), (399, true), (400, false), (404, false),
                          (500, false), (503, false), (100, false)])
        func onlyNonErrorStatusesInvalidate(status: Int, invalidates: Bool) {
            #expect(Self.invalidated("DELETE", status: status) == (invalidates ? ["https://example.com/items"] : []))
        }

        @Test func sameOriginLocationAndContentLocationAreInvalidatedToo() {
            let urls = Self.invalidated("POST", status: 201, headers: [
                "Location": "/items/42",
                "Content-Location": "https://example.com/items/42?view=full",
            ])
            #expect(urls == ["https://example.com/items", "https://example.com/items/42", "https://example.com/items/42?view=full"])
        }

        @Test(arguments: [
            ("https://other.example/items/1", false),
            ("http://example.com/items/1", false),  // another scheme
            ("https://example.com:8443/items/1", false),  // another port
            ("https://example.com:443/items/1", true),  // the default port, written out
            ("https://EXAMPLE.com/items/1", true),  // host names are case-insensitive
        ])
        func otherOriginsAreNeverInvalidated(location: String, invalidated: Bool) {
            let urls = Self.invalidated("POST", status: 201, headers: ["Location": location])
            #expect(urls == (invalidated ? ["https://example.com/items", location] : ["https://example.com/items"]))
        }

        @Test func relativeReferencesResolveAgainstTheTarget() {
            let urls = Self.invalidated("PUT", status: 200, headers: ["Content-Location": "../other?x=1"],
                                        url: URL(string: "https://example.com/a/b")!)
            #expect(urls == ["https://example.com/a/b", "https://example.com/other?x=1"])
        }

        @Test func fragmentsAreRemovedAndDuplicatesListedOnce() {
            let urls = Self.invalidated("POST", status: 200, headers: ["Location": "/items#top", "Content-Location": "/items"],
                                        url: URL(string: "https://example.com/items#frag")!)
            #expect(urls == ["https://example.com/items"])
        }
    }

    struct CacheKeys {
        @Test(arguments: [
            ("GET", "https://example.com/a?b=1#frag", "GET https://example.com/a?b=1"),
            ("HEAD", "https://example.com/a?b=1", "GET https://example.com/a?b=1"),
            ("POST", "https://example.com/a", "POST https://example.com/a"),
            ("GET", "https://example.com/", "GET https://example.com/"),
        ])
        func thePrimaryKeyIsMethodAndURIWithoutFragment(method: String, url: String, key: String) {
            let request = PolicyFixtures.request(method, url: URL(string: url)!)
            #expect(CachePolicyEngine.primaryKey(for: request) == key)
        }
    }
}

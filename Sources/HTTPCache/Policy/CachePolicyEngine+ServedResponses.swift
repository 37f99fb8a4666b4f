package import Foundation
package import HTTPTypes

// What a cache that answers clients itself (the server, the Hummingbird middleware) does with a
// stored response it sends: its `Age`, and a 304 when the client's own conditions hold for it.
// Package access: part of no library's API.
extension CachePolicyEngine {
    /// The conditional fields of a client's request (RFC 9110 §13.1). A cache that revalidates a
    /// stored response for the request sends its own validators in their place.
    package static let conditionalRequestFields: [HTTPField.Name] = [.ifNoneMatch, .ifModifiedSince, .ifMatch, .ifUnmodifiedSince, .ifRange]

    /// Whether a client's `If-None-Match` / `If-Modified-Since` (RFC 9110 §13.1.2, §13.1.3) hold
    /// for `stored`: then a GET or HEAD is answered 304 from it.
    ///
    /// - Parameters:
    ///   - request: the client's request fields. `If-None-Match` holds with a member `*`, or an
    ///     entity tag that matches the stored `ETag` weakly. `If-Modified-Since` (its first
    ///     line) is read only without `If-None-Match` (§13.2.2); it holds when the stored
    ///     `Last-Modified` (else its `Date`) is not later.
    ///   - stored: the stored response the request would be answered with.
    package static func answersNotModified(_ request: HTTPFields, stored: StoredResponse) -> Bool {
        let ifNoneMatch = request.listElements(for: .ifNoneMatch)
        if !ifNoneMatch.isEmpty {
            guard let tag = stored.entityTag else { return false }
            return ifNoneMatch.contains { value in
                value == "*" || EntityTag(value).map { $0.matchesWeakly(tag) } ?? false
            }
        }
        guard let since = request[values: .ifModifiedSince].first.flatMap({ HTTPDate.parse($0) }) else { return false }
        guard let modified = stored.lastModified ?? stored.date else { return false }
        return modified <= since
    }

    /// The fields that describe one connection (RFC 9110 §7.6.1): a cache never stores them
    /// (RFC 9111 §3.1) and a proxy never forwards them.
    package static let connectionFields: [HTTPField.Name] = [
        .connection, .keepAlive, .proxyConnection, .te, .transferEncoding, .upgrade,
        .trailer, .proxyAuthenticate, .proxyAuthorization,
    ]

    /// `fields` without ``connectionFields`` and the fields their `Connection` names: what a
    /// cache stores of a response.
    package static func endToEndFields(_ fields: HTTPFields) -> HTTPFields {
        var result = fields
        for name in connectionFields + fields.listElements(for: .connection).compactMap({ HTTPField.Name($0) }) { result[name] = nil }
        return result
    }

    /// The fields a 304 carries (RFC 9110 §15.4.5): those a 200 would have had (`fields`), but
    /// the body's.
    package static func notModifiedFields(_ fields: HTTPFields) -> HTTPFields {
        var result = fields
        for name: HTTPField.Name in [.contentLength, .contentType, .contentEncoding, .contentRange] { result[name] = nil }
        return result
    }

    /// The `Age` field's value (RFC 9111 §5.1) for a current age of `age` seconds: whole
    /// seconds, at most 2^31.
    package static func ageFieldValue(_ age: TimeInterval) -> String {
        String(age.isNaN ? 0 : Int(min(max(age.rounded(.down), 0), 2_147_483_648)))
    }
}

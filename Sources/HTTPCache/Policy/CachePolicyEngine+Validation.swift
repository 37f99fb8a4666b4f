public import Foundation
public import HTTPTypes

extension CachePolicyEngine {
    // MARK: Conditional requests (RFC 9111 §4.3.1)

    /// The header fields that make a request conditional on `stored` still being current:
    /// `If-None-Match` with its `ETag` (weak or strong: If-None-Match uses weak comparison) and
    /// `If-Modified-Since` with its `Last-Modified`, each when present. Both are sent when both
    /// exist; a server evaluates `If-None-Match` first (RFC 9110 §13.2.2).
    ///
    /// `If-Modified-Since` is only ever built from `Last-Modified`, never from `Date`: RFC 9111
    /// §4.3.1 names `Last-Modified` as its source, and a `Date` says when the response was
    /// generated, not when the resource changed. A `Last-Modified` that is not a valid date is
    /// not sent. Empty when the response has no validator.
    public static func conditionalHeaders(for stored: StoredResponse) -> HTTPFields {
        var headers = HTTPFields()
        if let entityTag = stored.entityTag {
            headers.append(HTTPField(name: .ifNoneMatch, value: entityTag.fieldValue))
        }
        if let lastModified = stored.headers[values: .lastModified].first,
           HTTPDate.parse(lastModified, relativeTo: stored.responseTime) != nil {
            headers.append(HTTPField(name: .ifModifiedSince, value: lastModified))
        }
        return headers
    }

    // MARK: Handling 304 Not Modified (RFC 9111 §4.3.3, §4.3.4)

    /// The indices in `storedResponses` of the responses a 304 with `notModifiedHeaders`
    /// updates (RFC 9111 §4.3.4):
    /// - the 304 has a strong `ETag`: every stored response with the same strong `ETag`; none
    ///   when no stored response has it;
    /// - otherwise, it has a weak `ETag` or a `Last-Modified`: the most recent stored response
    ///   whose `ETag` matches weakly (when both have one) or whose `Last-Modified` is the same
    ///   instant (when both have one and the `ETag`s did not decide);
    /// - it has no validator: the only stored response, if there is exactly one and it has no
    ///   validator either.
    public static func storedResponsesToUpdate(
        by notModifiedHeaders: HTTPFields,
        among storedResponses: [StoredResponse]
    ) -> [Int] {
        let newTag = notModifiedHeaders[values: .eTag].first.flatMap(EntityTag.init)
        let newLastModified = notModifiedHeaders[values: .lastModified].first.flatMap { HTTPDate.parse($0) }

        if let newTag, !newTag.isWeak {
            return storedResponses.indices.filter { index in
                storedResponses[index].entityTag.map(newTag.matchesStrongly) ?? false
            }
        }
        if newTag != nil || newLastModified != nil {
            let matching = storedResponses.indices.filter { index in
                let stored = storedResponses[index]
                if let newTag, let storedTag = stored.entityTag {
                    return newTag.matchesWeakly(storedTag)
                }
                if let newLastModified, let storedLastModified = stored.lastModified {
                    return newLastModified == storedLastModified
                }
                return false
            }
            let mostRecent = matching.max { lhs, rhs in
                let (a, b) = (storedResponses[lhs], storedResponses[rhs])
                return (a.dateValue, a.responseTime) < (b.dateValue, b.responseTime)
            }
            return mostRecent.map { [$0] } ?? []
        }
        if storedResponses.count == 1, storedResponses[0].entityTag == nil,
           !storedResponses[0].headers.contains(.lastModified) {
            return [0]
        }
        return []
    }

    /// Header fields a 304 never changes in a stored response (RFC 9111 §3.2).
    ///
    /// - hop-by-hop fields, which are not stored at all (§3.1): `Connection`, `Keep-Alive`,
    ///   `Proxy-Connection`, `TE`, `Transfer-Encoding`, `Upgrade`, `Trailer`,
    ///   `Proxy-Authenticate`, and any field the 304's `Connection` names;
    /// - `Content-Length`, which §3.2 excepts by name: the stored body keeps its length;
    /// - `Content-Range`, which §3.2 allows a cache to ignore;
    /// - `Content-Encoding`: the stored body may have been decoded when received, and §3.2 lets
    ///   a cache keep fields that would make the stored metadata contradict the stored body.
    public static let fieldsNotUpdatedByNotModified: [HTTPField.Name] = [
        .connection, .keepAlive, .proxyConnection, .te, .transferEncoding, .upgrade, .trailer,
        .proxyAuthenticate, .contentLength, .contentRange, .contentEncoding,
    ]

    /// `stored` freshened by a 304 (Not Modified) response (RFC 9111 §3.2, §4.3.4).
    ///
    /// Each header field of the 304 replaces all field lines of the same name in the stored
    /// response (at the position of the first one, or appended), except
    /// ``fieldsNotUpdatedByNotModified`` and the fields the 304's `Connection` nominates. The
    /// status, the request method and the captured `Vary` request fields stay as they were; the
    /// request and response times become those of the exchange that brought the 304.
    ///
    /// Two fields are handled so that the age computation describes the new exchange:
    /// - `Age`: the stored value described the old exchange, so it is dropped when the 304
    ///   carries none;
    /// - `Date`: when the 304 has none, `Date` is set to `responseTime` (as RFC 9110 §6.6.1 has
    ///   a recipient add a missing `Date`), so the old date does not make the refreshed
    ///   response look as old as the original.
    public static func updating(
        _ stored: StoredResponse,
        with notModifiedHeaders: HTTPFields,
        requestTime: Date,
        responseTime: Date
    ) -> StoredResponse {
        var excluded = fieldsNotUpdatedByNotModified
        excluded += notModifiedHeaders.listElements(for: .connection).compactMap { HTTPField.Name($0) }

        var headers = stored.headers
        var seen: [HTTPField.Name] = []
        for field in notModifiedHeaders {
            let name = field.name
            guard !excluded.contains(name), !seen.contains(name) else { continue }
            seen.append(name)
            headers.replaceLines(named: name, with: notModifiedHeaders[fields: name])
        }
        if !notModifiedHeaders.contains(.age) {
            headers[.age] = nil
        }
        if !notModifiedHeaders.contains(.date) {
            headers[.date] = HTTPDate.string(from: responseTime)
        }

        var updated = stored
        updated.headers = headers
        updated.requestTime = requestTime
        updated.responseTime = responseTime
        return updated
    }
}

extension HTTPFields {
    /// Replaces all lines named `name` with `lines`, where the first old line was.
    fileprivate mutating func replaceLines(named name: HTTPField.Name, with lines: [HTTPField]) {
        var result = HTTPFields()
        var inserted = false
        for field in self {
            if field.name == name {
                if !inserted {
                    result.append(contentsOf: lines)
                    inserted = true
                }
            } else {
                result.append(field)
            }
        }
        if !inserted {
            result.append(contentsOf: lines)
        }
        self = result
    }
}

import Foundation
import HTTPCache
import NIOHTTP1
import RawStructuredFieldValues
import HTTPTypes

/// Header-field rules of a proxy (RFC 9110 §7.6.1, RFC 9111 §3.1).
enum Fields {
    /// Fields that describe one connection, never forwarded or stored.
    static let hopByHop = CachePolicyEngine.connectionFields.map(\.rawName)

    /// `headers` without hop-by-hop fields and those their `Connection` field names.
    static func endToEnd(_ headers: HTTPHeaders) -> HTTPHeaders {
        var result = headers
        let named = headers[canonicalForm: "Connection"].map(String.init)
        for name in hopByHop + named { result.remove(name: name) }
        return result
    }

    /// The conditional fields of a client's request.
    static let conditional = CachePolicyEngine.conditionalRequestFields.map(\.rawName)

    /// NIO's fields as the policy engine's; a name that is not a token (which NIO's parser does
    /// not let in) is dropped.
    static func fields(_ headers: HTTPHeaders) -> HTTPFields {
        var fields = HTTPFields()
        fields.reserveCapacity(headers.count)
        for (name, value) in headers { fields.append(name: name, value: value) }
        return fields
    }

    static func headers(_ fields: HTTPFields) -> HTTPHeaders {
        HTTPHeaders(fields.map { ($0.name.rawName, $0.value) })
    }

    /// Whether a client's `If-None-Match` / `If-Modified-Since` (RFC 9110 §13.1.2, §13.1.3)
    /// hold for `stored`: then a GET or HEAD is answered 304.
    static func notModified(_ request: HTTPHeaders, stored: StoredResponse) -> Bool {
        CachePolicyEngine.answersNotModified(ifNoneMatch: request[canonicalForm: "If-None-Match"].map(String.init),
                                             ifModifiedSince: request.first(name: "If-Modified-Since"), stored: stored)
    }

    /// The fields a 304 carries (RFC 9110 §15.4.5): those a 200 would have had, but the body's.
    static func notModifiedHeaders(_ stored: HTTPHeaders) -> HTTPHeaders {
        var result = stored
        for name in CachePolicyEngine.fieldsOmittedFromNotModified { result.remove(name: name.rawName) }
        return result
    }

    // MARK: - CDN-Cache-Control (RFC 9213)

    /// Where a response's own `Cache-Control` and `Expires` are kept while its
    /// `CDN-Cache-Control` stands in for them in the stored response.
    static let savedCacheControl = "DiskCache-Server-Cache-Control"
    static let savedExpires = "DiskCache-Server-Expires"
    /// Marks a stored response whose `Cache-Control` is its `CDN-Cache-Control`.
    static let targetedMarker = "DiskCache-Server-Targeted"

    /// The fields a CDN decides by (RFC 9213 §2.2): with a valid `CDN-Cache-Control`, its
    /// directives in place of `Cache-Control`, and no `Expires`; the replaced fields are kept
    /// under other names, for ``clientView(_:)``. A `CDN-Cache-Control` that is not a valid
    /// structured field is ignored whole (see ``cdnDirectives(_:)``).
    static func targeted(_ fields: HTTPFields) -> HTTPFields {
        guard let cdn = cdnDirectives(fields[values: .cdnCacheControl]) else { return fields }
        var result = fields
        result[.cacheControl] = nil
        result[.expires] = nil
        for value in fields[values: .cacheControl] { result.append(name: savedCacheControl, value: value) }
        for value in fields[values: .expires] { result.append(name: savedExpires, value: value) }
        result.append(HTTPField(name: .cacheControl, value: cdn))
        result.append(name: targetedMarker, value: "1")
        return result
    }

    /// The directives of `CDN-Cache-Control` field lines as a `Cache-Control` value; nil when
    /// there are none or the field must be ignored. The field is a structured-field Dictionary
    /// (RFC 9213 §2.1, RFC 8941 §3.2), read strictly: lines that do not parse as one, or a
    /// directive whose value has the wrong type (`max-age="10"`: the delta-seconds directives
    /// take a non-negative Integer), make the whole field ignored, as §2.1 asks. Other
    /// directives keep an Integer or Token argument; one with a String argument (a qualified
    /// `private` or `no-cache`) counts as the directive alone, which is stricter.
    static func cdnDirectives(_ lines: [String]) -> String? {
        let value = lines.joined(separator: ", ")
        guard !value.allSatisfy({ $0 == " " || $0 == "\t" }) else { return nil }
        var parser = StructuredFieldValueParser(Array(value.utf8))
        guard let dictionary = try? parser.parseDictionaryFieldValue(), !dictionary.isEmpty else { return nil }
        var directives: [String] = []
        for (name, member) in dictionary {
            guard case .item(let item) = member else { return nil }
            switch (name, item.rfc9651BareItem) {
            case ("max-age", .integer(let seconds)), ("s-maxage", .integer(let seconds)),
                 ("stale-while-revalidate", .integer(let seconds)), ("stale-if-error", .integer(let seconds)):
                guard seconds >= 0 else { return nil }
                directives.append("\(name)=\(seconds)")
            case ("max-age", _), ("s-maxage", _), ("stale-while-revalidate", _), ("stale-if-error", _):
                return nil
            case (_, .integer(let number)): directives.append("\(name)=\(number)")
            case (_, .token(let token)): directives.append("\(name)=\(token)")
            default: directives.append(name)
            }
        }
        return directives.joined(separator: ", ")
    }

    /// A stored response's fields as the origin sent them: what ``targeted(_:)`` replaced, back.
    static func clientView(_ headers: HTTPHeaders) -> HTTPHeaders {
        guard headers.contains(name: targetedMarker) else { return headers }
        var result = headers
        result.remove(name: "Cache-Control")
        result.remove(name: "Expires")
        for value in headers[canonicalForm: savedCacheControl] { result.add(name: "Cache-Control", value: String(value)) }
        for value in headers[savedExpires] { result.add(name: "Expires", value: value) }
        result.remove(name: savedCacheControl)
        result.remove(name: savedExpires)
        result.remove(name: targetedMarker)
        return result
    }
}

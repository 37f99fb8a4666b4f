#if Server
import Foundation
import HTTPCache
import NIOHTTP1
import RawStructuredFieldValues
import HTTPTypes

/// Header-field rules of a proxy (RFC 9110 §7.6.1, RFC 9111 §3.1), and the one place where
/// the server's vocabulary meets NIO's.
///
/// Inside the server a request is an `HTTPRequest` and fields are `HTTPFields` (swift-http-types,
/// as in HTTPCache's policy engine and stored responses). NIO's HTTP/1 types stay at the wire
/// only: the channel handlers that read and frame requests, and the parts written to a client
/// or an origin. Not NIOHTTPTypesHTTP1's codecs: their response parts carry a body as a
/// `ByteBuffer` only, where a stored body goes out as a `FileRegion` (`sendfile`), and their
/// `HTTPRequest` keeps no protocol version, which `Via` names.
enum Fields {
    /// The request a client's head asks, its fields as sent (`Host` among them); nil when its
    /// method is not a token (NIO's parser lets none in).
    static func request(_ head: HTTPRequestHead) -> HTTPRequest? {
        // NIO names `M-SEARCH` `.MSEARCH`, whose raw value has no hyphen.
        guard let method = HTTPRequest.Method(head.method == .MSEARCH ? "M-SEARCH" : head.method.rawValue) else { return nil }
        return HTTPRequest(method: method, scheme: nil, authority: nil, path: head.uri, headerFields: fields(head.headers))
    }

    /// The head that asks an origin for `target` with `method` and `fields`.
    static func originHead(_ method: HTTPRequest.Method, target: String, _ fields: HTTPFields) -> HTTPRequestHead {
        HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: method.rawValue), uri: target, headers: headers(fields))
    }

    /// A response head of HTTP/1.1 with `status` and `fields`, as NIO writes it.
    static func responseHead(_ status: HTTPResponse.Status, _ fields: HTTPFields) -> HTTPResponseHead {
        HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: status.code, reasonPhrase: status.reasonPhrase),
                         headers: headers(fields))
    }

    /// The status of a response head NIO read.
    static func status(_ head: HTTPResponseHead) -> HTTPResponse.Status {
        HTTPResponse.Status(code: Int(head.status.code), reasonPhrase: head.status.reasonPhrase)
    }

    /// NIO's fields as the server's; a name that is not a token (which NIO's parser does not
    /// let in) is dropped.
    static func fields(_ headers: HTTPHeaders) -> HTTPFields {
        var fields = HTTPFields()
        fields.reserveCapacity(headers.count)
        for (name, value) in headers { fields.append(name: name, value: value) }
        return fields
    }

    /// The server's fields as NIO writes them.
    static func headers(_ fields: HTTPFields) -> HTTPHeaders {
        HTTPHeaders(fields.map { ($0.name.rawName, $0.value) })
    }

    /// How a response was answered (HIT, MISS, REVALIDATED, STALE, BYPASS), as nginx's and
    /// Varnish's configurations commonly say it.
    static let xCache = HTTPField.Name("X-Cache")!
    /// `Host` (RFC 9110 §7.2), which swift-http-types keeps as a request's authority instead.
    static let host = HTTPField.Name("Host")!

    // MARK: - CDN-Cache-Control (RFC 9213)

    /// Where a response's own `Cache-Control` and `Expires` are kept while its
    /// `CDN-Cache-Control` stands in for them in the stored response.
    static let savedCacheControl = HTTPField.Name("DiskCache-Server-Cache-Control")!
    static let savedExpires = HTTPField.Name("DiskCache-Server-Expires")!
    /// Marks a stored response whose `Cache-Control` is its `CDN-Cache-Control`.
    static let targetedMarker = HTTPField.Name("DiskCache-Server-Targeted")!

    /// The fields a CDN decides by (RFC 9213 §2.2): with a valid `CDN-Cache-Control`, its
    /// directives in place of `Cache-Control`, and no `Expires`; the replaced fields are kept
    /// under other names, for ``clientView(_:)``. A `CDN-Cache-Control` that is not a valid
    /// structured field is ignored whole (see ``cdnDirectives(_:)``).
    static func targeted(_ fields: HTTPFields) -> HTTPFields {
        guard let cdn = cdnDirectives(fields[values: .cdnCacheControl]) else { return fields }
        var result = fields
        result[.cacheControl] = nil
        result[.expires] = nil
        for value in fields[values: .cacheControl] { result.append(HTTPField(name: savedCacheControl, value: value)) }
        for value in fields[values: .expires] { result.append(HTTPField(name: savedExpires, value: value)) }
        result.append(HTTPField(name: .cacheControl, value: cdn))
        result.append(HTTPField(name: targetedMarker, value: "1"))
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
    static func clientView(_ fields: HTTPFields) -> HTTPFields {
        guard fields[targetedMarker] != nil else { return fields }
        var result = fields
        result[.cacheControl] = nil
        result[.expires] = nil
        for value in fields[values: savedCacheControl] { result.append(HTTPField(name: .cacheControl, value: value)) }
        for value in fields[values: savedExpires] { result.append(HTTPField(name: .expires, value: value)) }
        result[savedCacheControl] = nil
        result[savedExpires] = nil
        result[targetedMarker] = nil
        return result
    }
}

extension HTTPFields {
    /// Sets `name` to `value` as one field at the end, in place of any fields of that name (as
    /// NIO's `replaceOrAdd` does; the subscript's setter would keep the first one's place).
    mutating func replaceOrAppend(_ name: HTTPField.Name, _ value: String) {
        self[name] = nil
        append(HTTPField(name: name, value: value))
    }
}
#endif

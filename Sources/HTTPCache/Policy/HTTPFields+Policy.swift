public import HTTPTypes

// The policy engine speaks swift-http-types' `HTTPFields`: ordered field lines, names compared
// case-insensitively (RFC 9110 §5.1) with their spelling kept, values read combined with ", "
// through `fields[name]` (RFC 9110 §5.3) or line by line through `fields[values: name]` (which
// is how `Set-Cookie` must be read). What the engine needs beyond that is here.

extension HTTPFields {
    /// The list elements of a list-based field (RFC 9110 §5.6.1) across all of its lines:
    /// split at commas that are not inside quoted strings, trimmed, empty elements dropped.
    ///
    /// `Vary: Accept-Encoding` and `vary: accept-language, Cookie` give
    /// `["Accept-Encoding", "accept-language", "Cookie"]`.
    public func listElements(for name: HTTPField.Name) -> [String] {
        self[values: name].flatMap(_FieldSyntax.listElements)
    }

    /// Appends a field line from a name and value another library holds as strings (Foundation,
    /// NIO), the value trimmed of surrounding whitespace (RFC 9110 §5.5). A name that is not a
    /// token (RFC 9110 §5.6.2) is not a field and is dropped, as swift-http-types' own
    /// conversions drop it.
    package mutating func append(name: String, value: String) {
        guard let name = HTTPField.Name(name) else { return }
        append(HTTPField(name: name, value: value._trimmingOWS))
    }
}

extension HTTPField.Name {
    /// `Pragma` (RFC 9111 §5.4, deprecated), read in requests for HTTP/1.0's `no-cache`.
    package static let pragma = HTTPField.Name("Pragma")!
    /// `Keep-Alive` and `Proxy-Connection`: connection fields of HTTP/1.0 and old proxies.
    package static let keepAlive = HTTPField.Name("Keep-Alive")!
    package static let proxyConnection = HTTPField.Name("Proxy-Connection")!
    /// `CDN-Cache-Control` (RFC 9213).
    package static let cdnCacheControl = HTTPField.Name("CDN-Cache-Control")!
}

extension HTTPField {
    /// Whether `byte` may stand in a token (RFC 9110 §5.6.2's `tchar`): a field name, a
    /// directive's name or unquoted argument, a method: letters, digits and ! # $ % & ' * + - . ^ _ ` | ~.
    package static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}

public import HTTPTypes

/// The directives of a `Cache-Control` field (RFC 9111 §5.2), parsed once and queried by name.
///
/// The same type reads request and response directives; the properties say which side each
/// directive belongs to. Parsing never fails: what cannot be read is skipped, and a directive
/// whose argument is malformed is kept so that the engine can apply the "invalid freshness
/// information means stale" rule of RFC 9111 §4.2.1.
///
/// Parsing rules:
/// - Directive names are case-insensitive tokens; arguments may be tokens or quoted strings,
///   and both forms are accepted for every directive (RFC 9111 §5.2: "recipients ought to
///   accept both forms"), so `max-age="5"` reads as 5.
/// - Commas inside quoted strings do not end a directive: `no-cache="a, b", max-age=3` has two.
/// - Multiple field lines are read as one list, in order.
/// - When a directive occurs more than once, the first occurrence is the one that counts
///   (RFC 9111 §4.2.1: "either the first occurrence should be used or the response should be
///   considered stale").
/// - `delta-seconds` arguments larger than 2^31 are clamped to 2^31 (RFC 9111 §1.2.2).
public struct CacheControl: Sendable, Hashable {
    /// One directive as written: the name lowercased, and the argument with any quoting removed.
    public struct Directive: Sendable, Hashable {
        /// The directive name, lowercased (`max-age`).
        public var name: String
        /// The argument without quotes and escapes, or `nil` when there is none.
        public var argument: String?

        public init(name: String, argument: String? = nil) {
            self.name = name._asciiLowercased
            self.argument = argument
        }
    }

    /// The directives in the order they appear, duplicates included.
    public var directives: [Directive]

    /// Parses the value of one `Cache-Control` field line.
    public init(_ fieldValue: String) {
        directives = Self.parse(fieldValue)
    }

    /// Parses every `Cache-Control` field line of `headers`, in order.
    public init(_ headers: HTTPFields) {
        directives = headers[values: .cacheControl].flatMap(Self.parse)
    }

    /// Creates a value from already parsed directives.
    public init(directives: [Directive] = []) {
        self.directives = directives
    }

    // MARK: Generic access

    /// Whether the directive `name` is present (case-insensitively), with or without an argument.
    public func contains(_ name: String) -> Bool {
        let lower = name._asciiLowercased
        return directives.contains { $0.name == lower }
    }

    /// The argument of the first occurrence of `name`; `.some(nil)` when that occurrence has no
    /// argument, `nil` when the directive is absent.
    public func argument(of name: String) -> String?? {
        let lower = name._asciiLowercased
        guard let directive = directives.first(where: { $0.name == lower }) else { return nil }
        return .some(directive.argument)
    }

    /// The `delta-seconds` argument of the first occurrence of `name`.
    ///
    /// - Returns: `nil` when the directive is absent, `.invalid` when its first occurrence has
    ///   no argument or one that is not a non-negative integer (`max-age=abc`, `max-age=-1`).
    public func seconds(_ name: String) -> DeltaSeconds? {
        guard let argument = argument(of: name) else { return nil }
        guard let text = argument, let value = _FieldSyntax.deltaSeconds(text) else { return .invalid }
        return .seconds(value)
    }

    /// A `delta-seconds` directive argument (RFC 9111 §1.2.2) as read from the field.
    public enum DeltaSeconds: Sendable, Hashable {
        /// A valid argument, clamped to 2^31.
        case seconds(Int)
        /// Missing or not a non-negative integer.
        case invalid

        /// The value when valid, otherwise `nil`.
        public var value: Int? {
            if case .seconds(let value) = self { value } else { nil }
        }
    }

    // MARK: Response directives (RFC 9111 §5.2.2, RFC 5861, RFC 8246)

    /// `max-age` (§5.2.2.1). Valid value of the first occurrence; see ``seconds(_:)`` for invalid ones.
    public var maxAge: Int? { seconds("max-age")?.value }

    /// `s-maxage` (§5.2.2.10), for shared caches only.
    public var sharedMaxAge: Int? { seconds("s-maxage")?.value }

    /// `no-cache` (§5.2.2.4 in responses, §5.2.1.4 in requests), with or without field names.
    public var noCache: Bool { contains("no-cache") }

    /// The field names of a qualified `no-cache="..."`, or `nil` when unqualified or absent.
    public var noCacheFieldNames: [String]? { fieldNames(of: "no-cache") }

    /// `no-store` (§5.2.2.5 in responses, §5.2.1.5 in requests).
    public var noStore: Bool { contains("no-store") }

    /// `must-revalidate` (§5.2.2.2).
    public var mustRevalidate: Bool { contains("must-revalidate") }

    /// `proxy-revalidate` (§5.2.2.8), for shared caches only.
    public var proxyRevalidate: Bool { contains("proxy-revalidate") }

    /// `must-understand` (§5.2.2.3).
    public var mustUnderstand: Bool { contains("must-understand") }

    /// `public` (§5.2.2.9).
    public var isPublic: Bool { contains("public") }

    /// `private` (§5.2.2.7), with or without field names.
    public var isPrivate: Bool { contains("private") }

    /// The field names of a qualified `private="..."`, or `nil` when unqualified or absent.
    public var privateFieldNames: [String]? { fieldNames(of: "private") }

    /// `no-transform` (§5.2.2.6 / §5.2.1.6). The engine does not transform content; exposed for completeness.
    public var noTransform: Bool { contains("no-transform") }

    /// `immutable` (RFC 8246).
    public var isImmutable: Bool { contains("immutable") }

    /// `stale-while-revalidate=N` (RFC 5861 §3). `nil` when absent or invalid.
    public var staleWhileRevalidate: Int? { seconds("stale-while-revalidate")?.value }

    /// `stale-if-error=N` (RFC 5861 §4), valid in requests and responses. `nil` when absent or invalid.
    public var staleIfError: Int? { seconds("stale-if-error")?.value }

    // MARK: Request directives (RFC 9111 §5.2.1)

    /// `max-stale` (§5.2.1.2): `.any` without an argument, `.seconds(N)` with one, `nil` when
    /// absent. An invalid argument (`max-stale=abc`) reads as absent, so it never widens what
    /// the client accepts.
    public var maxStale: MaxStale? {
        guard let argument = argument(of: "max-stale") else { return nil }
        guard let text = argument else { return .any }
        return _FieldSyntax.deltaSeconds(text).map(MaxStale.seconds)
    }

    /// How stale a response the client accepts.
    public enum MaxStale: Sendable, Hashable {
        /// `max-stale` without a value: any staleness.
        case any
        /// `max-stale=N`: stale by at most N seconds.
        case seconds(Int)
    }

    /// `min-fresh` (§5.2.1.3). `nil` when absent or invalid.
    public var minFresh: Int? { seconds("min-fresh")?.value }

    /// `only-if-cached` (§5.2.1.7).
    public var onlyIfCached: Bool { contains("only-if-cached") }

    // MARK: Parsing

    private func fieldNames(of name: String) -> [String]? {
        guard let argument = argument(of: name), let text = argument else { return nil }
        return _FieldSyntax.listElements(text)
    }

    private static func parse(_ value: String) -> [Directive] {
        let bytes = Array(value.utf8)
        var directives: [Directive] = []
        var index = 0
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
        func isDelimiter(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: ",") || byte == UInt8(ascii: "=") || byte == UInt8(ascii: ";")
                || byte == UInt8(ascii: "\"") || isSpace(byte)
        }
        while index < bytes.count {
            while index < bytes.count, isSpace(bytes[index]) || bytes[index] == UInt8(ascii: ",") { index += 1 }
            let nameStart = index
            while index < bytes.count, !isDelimiter(bytes[index]) { index += 1 }
            let name = String(decoding: bytes[nameStart..<index], as: UTF8.self)
            while index < bytes.count, isSpace(bytes[index]) { index += 1 }
            var argument: String?
            if index < bytes.count, bytes[index] == UInt8(ascii: "=") {
                index += 1
                while index < bytes.count, isSpace(bytes[index]) { index += 1 }
                if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
                    index += 1
                    var unquoted: [UInt8] = []
                    while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                        if bytes[index] == UInt8(ascii: "\\"), index + 1 < bytes.count { index += 1 }
                        unquoted.append(bytes[index])
                        index += 1
                    }
                    index += 1  // the closing quote, or past the end of an unterminated string
                    argument = String(decoding: unquoted, as: UTF8.self)
                } else {
                    let argumentStart = index
                    while index < bytes.count, bytes[index] != UInt8(ascii: ","), !isSpace(bytes[index]) { index += 1 }
                    argument = String(decoding: bytes[argumentStart..<min(index, bytes.count)], as: UTF8.self)
                }
            }
            // Anything else up to the next comma is not part of the grammar; skip it.
            while index < bytes.count, bytes[index] != UInt8(ascii: ",") { index += 1 }
            if !name.isEmpty {
                directives.append(Directive(name: name, argument: argument))
            }
        }
        return directives
    }
}

extension CacheControl: CustomStringConvertible {
    /// The directives written back as a field value, quoting arguments that need it.
    public var description: String {
        directives.map { directive in
            guard let argument = directive.argument else { return directive.name }
            let isToken = !argument.isEmpty && argument.utf8.allSatisfy(HTTPField.isTokenByte)
            if isToken { return "\(directive.name)=\(argument)" }
            let escaped = argument.replacingOccurrencesOfQuotesAndBackslashes()
            return "\(directive.name)=\"\(escaped)\""
        }.joined(separator: ", ")
    }
}

extension String {
    fileprivate func replacingOccurrencesOfQuotesAndBackslashes() -> String {
        // Scalars, not Characters: a quote followed by a combining mark is one Character that
        // is not equal to "\"", and would be written unescaped.
        var result = String.UnicodeScalarView()
        for scalar in unicodeScalars {
            if scalar == "\"" || scalar == "\\" { result.append("\\") }
            result.append(scalar)
        }
        return String(result)
    }
}

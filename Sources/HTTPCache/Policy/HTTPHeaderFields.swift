/// An ordered, multi-valued collection of HTTP header fields with case-insensitive names.
///
/// This is the header representation the cache policy engine works on. It does not depend
/// on Foundation's URL loading types, so every rule can be exercised with literal values.
///
/// - Field names compare case-insensitively (RFC 9110 §5.1) but keep the spelling they were
///   added with.
/// - Each field line is kept separately and in order, so a response can be written back
///   exactly as it was received.
/// - Reading a field through ``subscript(_:)`` combines all of its field lines into one value,
///   separated by `", "`, as RFC 9110 §5.3 allows for list-based fields. `Set-Cookie` is the
///   well-known field for which that combination is not meaningful; read it with
///   ``values(for:)``.
///
/// Equality is order-sensitive for the field lines and case-insensitive for the names.
public struct HTTPHeaderFields: Sendable {
    /// One field line: a name and its value as received (surrounding whitespace removed).
    public struct Field: Sendable, Hashable, Codable {
        public var name: String
        public var value: String

        public init(name: String, value: String) {
            self.name = name
            self.value = value._trimmingOWS
        }
    }

    /// The field lines, in the order they were added.
    public private(set) var fields: [Field]

    /// Creates an empty collection.
    public init() {
        fields = []
    }

    /// Creates a collection from name/value pairs, keeping duplicates and their order.
    public init(_ pairs: some Sequence<(String, String)>) {
        fields = pairs.map { Field(name: $0.0, value: $0.1) }
    }

    /// Creates a collection from field lines.
    public init(fields: [Field]) {
        self.fields = fields.map { Field(name: $0.name, value: $0.value) }
    }

    // MARK: Reading

    /// The combined value of every field line named `name` (case-insensitively), joined with
    /// `", "` (RFC 9110 §5.3), or `nil` when there is none.
    ///
    /// Setting a value replaces every line of that name with a single line at the position of
    /// the first one (or at the end); setting `nil` removes them all.
    ///
    /// - Complexity: O(*n*), where *n* is the number of field lines.
    public subscript(name: String) -> String? {
        get {
            let lines = values(for: name)
            return lines.isEmpty ? nil : lines.joined(separator: ", ")
        }
        set {
            if let newValue {
                replaceValues(for: name, with: newValue)
            } else {
                removeAll(named: name)
            }
        }
    }

    /// The values of the field lines named `name`, each as received, in order.
    ///
    /// - Complexity: O(*n*), where *n* is the number of field lines.
    public func values(for name: String) -> [String] {
        fields.filter { $0.name._asciiCaseInsensitiveEquals(name) }.map(\.value)
    }

    /// The list elements of a list-based field (RFC 9110 §5.6.1) across all of its lines:
    /// split at commas that are not inside quoted strings, trimmed, empty elements dropped.
    ///
    /// `Vary: Accept-Encoding` and `vary: accept-language, Cookie` give
    /// `["Accept-Encoding", "accept-language", "Cookie"]`.
    public func listElements(for name: String) -> [String] {
        values(for: name).flatMap(_FieldSyntax.listElements)
    }

    /// Whether at least one field line is named `name` (case-insensitively).
    public func contains(_ name: String) -> Bool {
        fields.contains { $0.name._asciiCaseInsensitiveEquals(name) }
    }

    /// Whether the collection has no field lines.
    public var isEmpty: Bool { fields.isEmpty }

    /// The number of field lines.
    public var count: Int { fields.count }

    // MARK: Writing

    /// Appends a field line, keeping any existing lines of the same name.
    public mutating func add(name: String, value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// Replaces every line named `name` with one line holding `value`, at the position of the
    /// first such line, or at the end when there was none.
    public mutating func replaceValues(for name: String, with value: String) {
        let field = Field(name: name, value: value)
        if let first = fields.firstIndex(where: { $0.name._asciiCaseInsensitiveEquals(name) }) {
            fields[first] = field
            var index = fields.index(after: first)
            while index < fields.endIndex {
                if fields[index].name._asciiCaseInsensitiveEquals(name) {
                    fields.remove(at: index)
                } else {
                    index += 1
                }
            }
        } else {
            fields.append(field)
        }
    }

    /// Removes every field line named `name` (case-insensitively).
    public mutating func removeAll(named name: String) {
        fields.removeAll { $0.name._asciiCaseInsensitiveEquals(name) }
    }

    /// Appends all field lines of `other`, keeping the existing ones.
    public mutating func append(contentsOf other: HTTPHeaderFields) {
        fields.append(contentsOf: other.fields)
    }
}

// MARK: - Protocol conformances

extension HTTPHeaderFields: Sequence {
    public func makeIterator() -> IndexingIterator<[Field]> {
        fields.makeIterator()
    }
}

extension HTTPHeaderFields: ExpressibleByDictionaryLiteral {
    /// Creates a collection from a literal; repeated names are kept as separate lines.
    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }
}

extension HTTPHeaderFields: Equatable {
    public static func == (lhs: HTTPHeaderFields, rhs: HTTPHeaderFields) -> Bool {
        lhs.fields.count == rhs.fields.count
            && zip(lhs.fields, rhs.fields).allSatisfy {
                $0.name._asciiCaseInsensitiveEquals($1.name) && $0.value == $1.value
            }
    }
}

extension HTTPHeaderFields: Hashable {
    public func hash(into hasher: inout Hasher) {
        hasher.combine(fields.count)
        for field in fields {
            hasher.combine(field.name._asciiLowercased)
            hasher.combine(field.value)
        }
    }
}

extension HTTPHeaderFields: Codable {
    /// Encodes as an array of field lines, so order and duplicates survive a round trip.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        self.init(fields: try container.decode([Field].self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(fields)
    }
}

extension HTTPHeaderFields: CustomStringConvertible {
    public var description: String {
        fields.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
    }
}

extension HTTPHeaderFields {
    /// Whether `byte` may stand in a token (RFC 9110 §5.6.2's `tchar`): a field name, a
    /// directive's name or unquoted argument, a method: letters, digits and ! # $ % & ' * + - . ^ _ ` | ~.
    package static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}

import HTTPTypes

/// Header fields as a stored response keeps them: an array of `{"name", "value"}` objects with
/// the value as UTF-8 text. (swift-http-types' own `Codable` form writes a value's bytes as ISO
/// Latin-1 text, which would misread every response stored with a non-ASCII value.) A line whose
/// name is not a token is dropped on reading, as ``HTTPFields/append(name:value:)`` drops it.
struct StoredFields: Codable {
    var fields: HTTPFields

    private struct Line: Codable {
        var name: String
        var value: String
    }

    init(fields: HTTPFields) {
        self.fields = fields
    }

    init(from decoder: any Decoder) throws {
        fields = HTTPFields()
        for line in try decoder.singleValueContainer().decode([Line].self) {
            fields.append(name: line.name, value: line.value)
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(fields.map { Line(name: $0.name.rawName, value: $0.value) })
    }
}

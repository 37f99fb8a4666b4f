public import Foundation
import DiskCacheLocking
import HTTPTypes

/// A response as the HTTP cache stores it: the response (URL, status, header fields, MIME type,
/// text encoding), its body, the `userInfo` of `CachedURLResponse`, the storage policy, the
/// request and response times (for the age computation), and the request header fields that
/// `Vary` names.
///
/// This is the value the ``HTTPURLCache/WillStoreHandler`` hook sees and may edit before it is
/// stored.
public struct CachedHTTPResponse: Sendable, Hashable {
    /// The response's URL.
    public var url: URL
    /// Status, header fields, request method, request/response times and the captured `Vary`
    /// request fields, as the policy engine judges them.
    public var response: StoredResponse
    /// The body, exactly as received (after any transfer decoding the transport did).
    public var body: Data
    /// The MIME type, such as `application/json`; `nil` when unknown.
    public var mimeType: String?
    /// The text encoding name, such as `utf-8`; `nil` when unknown.
    public var textEncodingName: String?
    /// Where the entry may live. `.notAllowed` entries are never stored.
    public var storagePolicy: HTTPStoragePolicy
    /// `CachedURLResponse.userInfo`, as a binary property list; `nil` when there is none.
    /// Only property-list values (strings, numbers, dates, data, arrays and dictionaries with
    /// string keys) survive storage.
    public var userInfo: Data?
    /// Whether the response was an HTTP response. A plain `URLResponse` stored through
    /// ``HTTPURLCache`` keeps `false` here, and its `status` (200) is not meaningful.
    public var isHTTP: Bool

    public init(
        url: URL,
        response: StoredResponse,
        body: Data,
        mimeType: String? = nil,
        textEncodingName: String? = nil,
        storagePolicy: HTTPStoragePolicy = .allowed,
        userInfo: Data? = nil,
        isHTTP: Bool = true
    ) {
        self.url = url
        self.response = response
        self.body = body
        self.mimeType = mimeType
        self.textEncodingName = textEncodingName
        self.storagePolicy = storagePolicy
        self.userInfo = userInfo
        self.isHTTP = isHTTP
    }

    /// The identity of this variant among the responses stored under one key: the request method
    /// and the normalised values of the request fields its `Vary` names. A new response with the
    /// same identity replaces the stored one.
    var variantID: String {
        var id = response.requestMethod
        let names = response.varyFieldNames.map(\._asciiLowercased).sorted()
        for name in names where name != "*" {
            id += "\n" + name
            if let field = HTTPField.Name(name), response.varyingRequestHeaders.contains(field) {
                id += "=" + response.varyingRequestHeaders.listElements(for: field).joined(separator: ",")
            }
        }
        return id
    }
}

extension CachedHTTPResponse {
    /// Everything but the body, as it is kept in the record's metadata (JSON, one field).
    struct Metadata: Codable, Equatable {
        var version = 1
        var url: URL
        var response: StoredResponse
        var mimeType: String?
        var textEncodingName: String?
        var storagePolicy: HTTPStoragePolicy
        var userInfo: Data?
        var isHTTP: Bool
    }

    static let metadataField = "http-response"

    func encodedMetadata() throws -> [String: String] {
        let metadata = Metadata(
            url: url, response: response, mimeType: mimeType, textEncodingName: textEncodingName,
            storagePolicy: storagePolicy, userInfo: userInfo, isHTTP: isHTTP
        )
        let json = try metadata.json() ?? String(decoding: JSONEncoder().encode(metadata), as: UTF8.self)
        return [Self.metadataField: json]
    }

    /// Decodes a stored record; `nil` for a record that is not a response or is damaged.
    init?(body: Data, metadata: [String: String]) {
        guard let text = metadata[Self.metadataField], let decoded = Self.decodedMetadata(text), decoded.version == 1
        else { return nil }
        self.init(
            url: decoded.url, response: decoded.response, body: body, mimeType: decoded.mimeType,
            textEncodingName: decoded.textEncodingName, storagePolicy: decoded.storagePolicy,
            userInfo: decoded.userInfo, isHTTP: decoded.isHTTP
        )
    }

    /// The metadata JSON decoded, from a memo of the texts decoded lately: the text alone
    /// decides the result, and decoding is most of the CPU time of a lookup (reads of one
    /// response decode the same text again and again).
    private static func decodedMetadata(_ text: String) -> Metadata? {
        if let known = decodedTexts.withLock({ $0[text] }) { return known }
        guard let decoded = try? JSONDecoder().decode(Metadata.self, from: Data(text.utf8)) else { return nil }
        decodedTexts.withLock { memo in
            // Bounded: emptied when full (refilled by the texts still read).
            if memo.count >= 4096 { memo.removeAll(keepingCapacity: true) }
            memo[text] = decoded
        }
        return decoded
    }

    private static let decodedTexts = PthreadMutex([String: Metadata]())
}

extension CachedHTTPResponse.Metadata {
    /// The JSON `JSONEncoder` would write for this value, in a form `JSONDecoder` reads back
    /// as the same value (a test checks it against `JSONEncoder`'s), written directly: on
    /// every store the generic encoder cost about 9 % of a proxy's CPU for a 1 KB miss. Keys
    /// in declaration order, absent optionals left out, the URL as its `absoluteString`, dates
    /// as seconds since 2001 (`Double`), `userInfo` in base64: what `JSONEncoder`'s defaults
    /// do. Nil for a date that is not finite (which `JSONEncoder` refuses with an error).
    func json() -> String? {
        guard response.requestTime.timeIntervalSinceReferenceDate.isFinite,
              response.responseTime.timeIntervalSinceReferenceDate.isFinite else { return nil }
        var out = "{\"version\":\(version),\"url\":"
        out.reserveCapacity(256 + 64 * (response.headers.count + response.varyingRequestHeaders.count))
        Self.appendString(url.absoluteString, to: &out)
        out += ",\"response\":{\"requestMethod\":"
        Self.appendString(response.requestMethod, to: &out)
        out += ",\"status\":\(response.status),\"headers\":"
        Self.appendFields(response.headers, to: &out)
        out += ",\"requestTime\":\(response.requestTime.timeIntervalSinceReferenceDate)"
        out += ",\"responseTime\":\(response.responseTime.timeIntervalSinceReferenceDate),\"varyingRequestHeaders\":"
        Self.appendFields(response.varyingRequestHeaders, to: &out)
        out += "}"
        if let mimeType {
            out += ",\"mimeType\":"
            Self.appendString(mimeType, to: &out)
        }
        if let textEncodingName {
            out += ",\"textEncodingName\":"
            Self.appendString(textEncodingName, to: &out)
        }
        out += ",\"storagePolicy\":"
        Self.appendString(storagePolicy.rawValue, to: &out)
        if let userInfo { out += ",\"userInfo\":\"\(userInfo.base64EncodedString())\"" }
        out += ",\"isHTTP\":\(isHTTP)}"
        return out
    }

    private static func appendFields(_ fields: HTTPFields, to out: inout String) {
        out += "["
        for (index, field) in fields.enumerated() {
            out += index == 0 ? "{\"name\":" : ",{\"name\":"
            appendString(field.name.rawName, to: &out)
            out += ",\"value\":"
            appendString(field.value, to: &out)
            out += "}"
        }
        out += "]"
    }

    /// `text` as a JSON string: quotes, backslashes and control characters escaped (RFC 8259 §7).
    private static func appendString(_ text: String, to out: inout String) {
        out += "\""
        if !text.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            out += text
        } else {
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                case _ where scalar.value < 0x20:
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                default: out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }
}

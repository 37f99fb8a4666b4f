public import Foundation
public import HTTPTypes

/// A response as the cache keeps it, with everything the policy engine needs to judge it later.
///
/// The body is not part of this value; the store keeps it beside the metadata. The value is
/// `Codable` so that the store can persist it as is.
///
/// The two times are the ones RFC 9111 §4.2.3 calls `request_time` and `response_time`: the
/// local clock when the request that produced this response was sent, and when the response
/// was received. They are required because the age of a response cannot be computed without
/// them.
public struct StoredResponse: Sendable, Hashable, Codable {
    /// The method of the request that produced the response (`GET`, `HEAD`, or `POST` when
    /// POST caching is enabled).
    public var requestMethod: String
    /// The status code, such as 200.
    public var status: Int
    /// The response header fields.
    public var headers: HTTPFields
    /// The local time at which the request was sent (`request_time`).
    public var requestTime: Date
    /// The local time at which the response was received (`response_time`).
    public var responseTime: Date
    /// The request's header fields named by the response's `Vary` field, captured when the
    /// response was stored, for matching later requests (RFC 9111 §4.1). A nominated field the
    /// request did not have is simply absent.
    public var varyingRequestHeaders: HTTPFields

    /// Creates a stored response from its parts.
    public init(
        requestMethod: String = "GET",
        status: Int,
        headers: HTTPFields,
        requestTime: Date,
        responseTime: Date,
        varyingRequestHeaders: HTTPFields = [:]
    ) {
        self.requestMethod = requestMethod
        self.status = status
        self.headers = headers
        self.requestTime = requestTime
        self.responseTime = responseTime
        self.varyingRequestHeaders = varyingRequestHeaders
    }

    /// Creates a stored response for `request`, capturing the request header fields that the
    /// response's `Vary` field nominates.
    public init(
        request: CacheRequest,
        status: Int,
        headers: HTTPFields,
        requestTime: Date,
        responseTime: Date
    ) {
        var captured = HTTPFields()
        let nominated = headers.listElements(for: .vary).filter { $0 != "*" }
        for field in request.headers where nominated.contains(where: { $0._asciiCaseInsensitiveEquals(field.name.rawName) }) {
            captured.append(field)
        }
        self.init(
            requestMethod: request.method,
            status: status,
            headers: headers,
            requestTime: requestTime,
            responseTime: responseTime,
            varyingRequestHeaders: captured
        )
    }

    // MARK: Derived fields

    /// The response's cache directives.
    public var cacheControl: CacheControl { CacheControl(headers) }

    /// The `Date` field, parsed; `nil` when absent or invalid.
    public var date: Date? { firstDate(of: .date) }

    /// The `Date` field when it is valid, otherwise the response time, as RFC 9110 §6.6.1 has a
    /// recipient assume for a message without a date.
    public var dateValue: Date { date ?? responseTime }

    /// The `Last-Modified` field, parsed; `nil` when absent or invalid.
    public var lastModified: Date? { firstDate(of: .lastModified) }

    /// The `ETag` field; `nil` when absent or empty.
    public var entityTag: EntityTag? { headers[values: .eTag].first.flatMap(EntityTag.init) }

    /// The field names listed in `Vary`, as written (may include `*`).
    public var varyFieldNames: [String] { headers.listElements(for: .vary) }

    /// The first line of a date-valued field, parsed. HTTP dates contain a comma, so the combined
    /// value of several lines is not a date; the first line is used (RFC 9111 §4.2.1).
    func firstDate(of name: HTTPField.Name) -> Date? {
        headers[values: name].first.flatMap { HTTPDate.parseRemembering($0, relativeTo: responseTime) }
    }
}

extension StoredResponse {
    private enum CodingKeys: String, CodingKey {
        case requestMethod, status, headers, requestTime, responseTime, varyingRequestHeaders
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        // A status of other than three digits (RFC 9110 §15) is no response: the record is damaged.
        let status = try container.decode(Int.self, forKey: .status)
        guard (100...999).contains(status) else {
            throw DecodingError.dataCorruptedError(forKey: .status, in: container, debugDescription: "\(status) is not a status code")
        }
        self.init(
            requestMethod: try container.decode(String.self, forKey: .requestMethod),
            status: status,
            headers: try container.decode(StoredFields.self, forKey: .headers).fields,
            requestTime: try container.decode(Date.self, forKey: .requestTime),
            responseTime: try container.decode(Date.self, forKey: .responseTime),
            varyingRequestHeaders: try container.decode(StoredFields.self, forKey: .varyingRequestHeaders).fields
        )
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(requestMethod, forKey: .requestMethod)
        try container.encode(status, forKey: .status)
        try container.encode(StoredFields(fields: headers), forKey: .headers)
        try container.encode(requestTime, forKey: .requestTime)
        try container.encode(responseTime, forKey: .responseTime)
        try container.encode(StoredFields(fields: varyingRequestHeaders), forKey: .varyingRequestHeaders)
    }
}

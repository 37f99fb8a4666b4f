import Foundation
public import HTTPTypes
import Testing
@testable import HTTPCache

// The policy engine's header fields are swift-http-types' `HTTPFields`. These pin what the
// engine relies on them for, and the little it adds (list elements, lines from name/value pairs).
extension PolicyEngineTests {
    struct HeaderFields {
        @Test func namesCompareCaseInsensitivelyAndKeepTheirSpelling() {
            let headers: HTTPFields = ["Content-Type": "text/html"]
            #expect(headers["content-type"] == "text/html")
            #expect(headers["CONTENT-TYPE"] == "text/html")
            #expect(headers.contains("content-TYPE"))
            #expect(headers.map(\.name.rawName) == ["Content-Type"])
        }

        @Test func repeatedLinesAreKeptInOrderAndCombinedWithCommas() {
            var headers = HTTPFields()
            headers.append(name: "Cache-Control", value: "max-age=60")
            headers.append(name: "X-Other", value: "1")
            headers.append(name: "cache-control", value: "public")
            #expect(headers[values: "Cache-Control"] == ["max-age=60", "public"])
            #expect(headers["CACHE-CONTROL"] == "max-age=60, public")
            #expect(headers.count == 3)
        }

        @Test func linesFromPairsAreTrimmedAndNonTokenNamesDropped() {
            var headers = HTTPFields()
            headers.append(name: "ETag", value: " \t\"v1\"  ")
            headers.append(name: "Bad Name", value: "1")
            headers.append(name: "", value: "2")
            #expect(headers["ETag"] == "\"v1\"")
            #expect(headers.count == 1)
        }

        @Test func listElementsSplitAtCommasOutsideQuotesAcrossLines() {
            let headers: HTTPFields = [
                "Vary": "Accept-Encoding",
                "vary": "accept-language ,Cookie,, ",
                "Cache-Control": "no-cache=\"a, b\", max-age=5",
            ]
            #expect(headers.listElements(for: "Vary") == ["Accept-Encoding", "accept-language", "Cookie"])
            #expect(headers.listElements(for: "Cache-Control") == ["no-cache=\"a, b\"", "max-age=5"])
            #expect(headers.listElements(for: "Missing") == [])
        }

        /// A stored response keeps its fields as an array of `{"name", "value"}` objects, values
        /// as UTF-8 text, as it did before the engine spoke `HTTPFields` (whose own `Codable`
        /// form would write "é" as ISO Latin-1): duplicates, order and non-ASCII values survive,
        /// and a record written in that form reads back.
        @Test func theStoredFormKeepsDuplicatesOrderAndUTF8Values() throws {
            let headers = HTTPFields([("Set-Cookie", "a=1"), ("Date", PolicyFixtures.t0HTTP), ("set-cookie", "b=2"), ("X-Name", "Zoë 🔑")])
            let response = StoredResponse(status: 200, headers: headers, requestTime: PolicyFixtures.t0, responseTime: PolicyFixtures.t0)
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys  // a stable order of keys to look for
            let data = try encoder.encode(response)
            #expect(String(decoding: data, as: UTF8.self).contains(#"{"name":"X-Name","value":"Zoë 🔑"}"#))
            let decoded = try JSONDecoder().decode(StoredResponse.self, from: data)
            #expect(Array(decoded.headers) == Array(headers))
            #expect(decoded.headers[values: "Set-Cookie"] == ["a=1", "b=2"])
            let written = #"{"requestMethod":"GET","status":200,"headers":[{"name":"X-Name","value":"Zoë 🔑"},{"name":"bad name","value":"1"}],"# +
                #""requestTime":0,"responseTime":0,"varyingRequestHeaders":[]}"#
            let read = try JSONDecoder().decode(StoredResponse.self, from: Data(written.utf8))
            #expect(Array(read.headers) == Array(HTTPFields([("X-Name", "Zoë 🔑")])))
        }

        /// A stored status of other than three digits is damage, never a response to send
        /// (swift-http-types' `HTTPResponse.Status` traps on one).
        @Test func aStoredStatusOfOtherThanThreeDigitsIsDamage() throws {
            for status in [-1, 0, 99, 1000, 70_000] {
                let written = #"{"requestMethod":"GET","status":\#(status),"headers":[],"# +
                    #""requestTime":0,"responseTime":0,"varyingRequestHeaders":[]}"#
                #expect(throws: DecodingError.self, "\(status)") {
                    try JSONDecoder().decode(StoredResponse.self, from: Data(written.utf8))
                }
            }
            let written = #"{"requestMethod":"GET","status":599,"headers":[],"requestTime":0,"responseTime":0,"varyingRequestHeaders":[]}"#
            #expect(try JSONDecoder().decode(StoredResponse.self, from: Data(written.utf8)).status == 599)
        }
    }
}

/// Field names from string literals, in tests only (`["Cache-Control": "max-age=60"]`).
extension HTTPField.Name: @retroactive ExpressibleByStringLiteral {
    public init(stringLiteral value: String) {
        self.init(value)!
    }
}

extension HTTPFields {
    /// Fields from name/value pairs, in order (tests only).
    init(_ pairs: [(String, String)]) {
        self.init()
        for (name, value) in pairs { append(name: name, value: value) }
    }
}

import Foundation
import Testing
@testable import HTTPCache

extension PolicyEngineTests {
    struct HeaderFields {
        @Test func namesCompareCaseInsensitivelyAndKeepTheirSpelling() {
            let headers: HTTPHeaderFields = ["Content-Type": "text/html"]
            #expect(headers["content-type"] == "text/html")
            #expect(headers["CONTENT-TYPE"] == "text/html")
            #expect(headers.contains("content-TYPE"))
            #expect(headers.fields.map(\.name) == ["Content-Type"])
        }

        @Test func repeatedLinesAreKeptInOrderAndCombinedWithCommas() {
            var headers = HTTPHeaderFields()
            headers.add(name: "Cache-Control", value: "max-age=60")
            headers.add(name: "X-Other", value: "1")
            headers.add(name: "cache-control", value: "public")
            #expect(headers.values(for: "Cache-Control") == ["max-age=60", "public"])
            #expect(headers["CACHE-CONTROL"] == "max-age=60, public")
            #expect(headers.count == 3)
        }

        @Test func valuesAreTrimmedOfSurroundingWhitespace() {
            var headers = HTTPHeaderFields()
            headers.add(name: "ETag", value: " \t\"v1\"  ")
            #expect(headers["ETag"] == "\"v1\"")
        }

        @Test func settingAValueReplacesEveryLineAtThePositionOfTheFirst() {
            var headers: HTTPHeaderFields = ["A": "1", "B": "2", "a": "3"]
            headers["a"] = "9"
            #expect(headers.fields == [.init(name: "a", value: "9"), .init(name: "B", value: "2")])
            headers["C"] = "4"
            #expect(headers.fields.map(\.name) == ["a", "B", "C"])
        }

        @Test func settingNilRemovesEveryLine() {
            var headers: HTTPHeaderFields = ["Vary": "Accept", "X": "1", "vary": "Cookie"]
            headers["VARY"] = nil
            #expect(headers == ["X": "1"])
        }

        @Test func listElementsSplitAtCommasOutsideQuotesAcrossLines() {
            let headers: HTTPHeaderFields = [
                "Vary": "Accept-Encoding",
                "vary": " accept-language ,Cookie,, ",
                "Cache-Control": "no-cache=\"a, b\", max-age=5",
            ]
            #expect(headers.listElements(for: "Vary") == ["Accept-Encoding", "accept-language", "Cookie"])
            #expect(headers.listElements(for: "Cache-Control") == ["no-cache=\"a, b\"", "max-age=5"])
            #expect(headers.listElements(for: "Missing") == [])
        }

        @Test func equalityIsOrderSensitiveAndNameCaseInsensitive() {
            let lhs: HTTPHeaderFields = ["A": "1", "B": "2"]
            #expect(lhs == ["a": "1", "b": "2"])
            #expect(lhs != ["B": "2", "A": "1"])
            #expect(lhs != ["A": "1", "B": "3"])
            #expect(Set([lhs, ["a": "1", "b": "2"]]).count == 1)
        }

        @Test func codableRoundTripKeepsDuplicatesAndOrder() throws {
            let headers: HTTPHeaderFields = ["Set-Cookie": "a=1", "Date": PolicyFixtures.t0HTTP, "set-cookie": "b=2"]
            let data = try JSONEncoder().encode(headers)
            let decoded = try JSONDecoder().decode(HTTPHeaderFields.self, from: data)
            #expect(decoded.fields == headers.fields)
            #expect(decoded.values(for: "Set-Cookie") == ["a=1", "b=2"])
        }
    }
}

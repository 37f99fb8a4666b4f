import Foundation
import HTTPTypes
import Testing
@testable import HTTPCache

/// A stored response's metadata is written as JSON by a writer of its own; `JSONDecoder` must
/// read from it exactly what it reads from `JSONEncoder`'s output for the same value.
struct MetadataJSONTests {
    static let awkward = "quote \" backslash \\ slash / tab \t newline \n return \r nul \u{0} bell \u{7} del \u{7F} é 🔑 \u{2028}"

    static let samples: [CachedHTTPResponse.Metadata] = [
        .init(url: URL(string: "http://127.0.0.1:18080/1k/1.bin?u=a-1-2")!,
              response: StoredResponse(status: 200, headers: HTTPFields([("Cache-Control", "max-age=3600"), ("Content-Length", "1024")]),
                                       requestTime: Date(timeIntervalSinceReferenceDate: 785_000_000.123456),
                                       responseTime: Date(timeIntervalSinceReferenceDate: 785_000_000.5)),
              mimeType: "application/octet-stream", textEncodingName: nil, storagePolicy: .allowed, userInfo: nil, isHTTP: true),
        .init(url: URL(string: "https://example.com/päth%20with%20spaces?q=%E2%9C%93#fragment")!,
              response: StoredResponse(requestMethod: "HEAD", status: 304,
                                       headers: HTTPFields([("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"), ("X-Odd", awkward)]),
                                       requestTime: Date(timeIntervalSinceReferenceDate: -1e9), responseTime: Date(timeIntervalSinceReferenceDate: 0),
                                       varyingRequestHeaders: HTTPFields([("Accept-Language", "de, en;q=0.5"), (awkward, awkward)])),
              mimeType: awkward, textEncodingName: "utf-8", storagePolicy: .allowedInMemoryOnly,
              userInfo: Data((0..<300).map { UInt8($0 & 0xFF) }), isHTTP: false),
        .init(url: URL(string: "page?x=1", relativeTo: URL(string: "https://example.com/dir/")!)!,
              response: StoredResponse(status: 599, headers: HTTPFields(),
                                       requestTime: Date(timeIntervalSinceReferenceDate: 1e16), responseTime: Date(timeIntervalSinceReferenceDate: .leastNonzeroMagnitude)),
              mimeType: nil, textEncodingName: nil, storagePolicy: .notAllowed, userInfo: Data(), isHTTP: true),
    ]

    @Test(arguments: 0..<samples.count)
    func theWriterReadsBackAsJSONEncodersOutputDoes(index: Int) throws {
        let metadata = Self.samples[index]
        let written = try #require(metadata.json())
        let decoder = JSONDecoder()
        let fromWriter = try decoder.decode(CachedHTTPResponse.Metadata.self, from: Data(written.utf8))
        let fromEncoder = try decoder.decode(CachedHTTPResponse.Metadata.self, from: JSONEncoder().encode(metadata))
        #expect(fromWriter == fromEncoder)
        #expect(fromWriter.url.absoluteString == metadata.url.absoluteString)
        #expect(Array(fromWriter.response.headers) == Array(metadata.response.headers))
        #expect(fromWriter.response.requestTime == metadata.response.requestTime)
        // And it is JSON a strict parser takes.
        #expect(try JSONSerialization.jsonObject(with: Data(written.utf8)) is [String: Any])
    }

    @Test func aDateThatIsNotFiniteFallsBackToJSONEncoder() {
        var metadata = Self.samples[0]
        metadata.response.requestTime = Date(timeIntervalSinceReferenceDate: .infinity)
        #expect(metadata.json() == nil)
    }
}

// Fuzzes the reading of `Vary` (list elements across field lines, RFC 9110 §5.6.1) and the
// matching of requests against stored responses by it (RFC 9111 §4.1).
//
// Input: the response's `Vary` field lines, an empty line, then the request's header field
// lines as `name: value` (lines without a colon are skipped).
//
// Invariants:
// - list elements are non-empty and have no spaces or tabs around them;
// - a response stored for a request matches that request, and any request carrying the same
//   values of the fields it nominates, unless `Vary` lists `*` (which never matches);
// - responses that match the same requests get the same variant identity in the store.
import Foundation
import FuzzSupport
@testable import HTTPCache
import HTTPTypes

/// Made once: parsing a URL costs more than everything the target checks.
private let url = URL(string: "https://example.com/")!

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzVary(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = lines(text(data, size))
    let split = input.firstIndex(of: "") ?? input.endIndex
    var responseHeaders = HTTPFields()
    for line in input[..<split] { responseHeaders.append(HTTPField(name: .vary, value: line)) }
    var requestHeaders = HTTPFields()
    for line in input[split...] {
        guard let colon = line.firstIndex(of: ":"), let name = HTTPField.Name(String(line[..<colon])) else { continue }
        requestHeaders.append(HTTPField(name: name, value: String(line[line.index(after: colon)...])))
    }

    let names = responseHeaders.listElements(for: .vary)
    for name in names {
        require(!name.isEmpty && name.trimmingSpacesAndTabs == name, "list element \(name.debugDescription)")
    }
    let request = CacheRequest(method: "GET", url: url, headers: requestHeaders)
    let stored = StoredResponse(request: request, status: 200, headers: responseHeaders, requestTime: .distantPast, responseTime: .distantPast)
    let matches = CachePolicyEngine.varyMatches(stored, request: request)
    require(matches == !names.contains("*"), "a response stored for a request does not match it (Vary: \(names))")

    // A request with only the nominated fields, in the order the response captured them.
    let minimal = CacheRequest(method: "GET", url: url, headers: stored.varyingRequestHeaders)
    require(CachePolicyEngine.varyMatches(stored, request: minimal) == matches,
            "the captured fields alone do not select the response (Vary: \(names))")
    let storedForMinimal = StoredResponse(request: minimal, status: 200, headers: responseHeaders, requestTime: .distantPast, responseTime: .distantPast)
    let entry = { (response: StoredResponse) in
        CachedHTTPResponse(url: url, response: response, body: Data())
    }
    require(entry(stored).variantID == entry(storedForMinimal).variantID,
            "two responses that select the same requests have different variant identities")
    return 0
}

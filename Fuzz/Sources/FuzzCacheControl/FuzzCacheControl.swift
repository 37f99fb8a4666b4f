// Fuzzes the `Cache-Control` parser (`CacheControl`), request and response directives alike.
// Each line of the input is one field line.
//
// Invariants:
// - directive names are non-empty, lower-case, and hold none of the bytes that end a name;
// - the directives of several field lines are those of each (trimmed) line, in order;
// - the field value the parsed directives write (`description`) parses to the same directives;
// - every accessor answers, and a delta-seconds argument reads as its decimal value clamped
//   to 2^31 when it is all digits, and as invalid otherwise (RFC 9111 §1.2.2).
import FuzzSupport
import HTTPCache
import HTTPTypes

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCacheControl(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var headers = HTTPFields()
    // Trimmed as a receiver trims them (the whitespace around a value is not part of it, and it
    // does matter inside an unterminated quoted string).
    for line in lines(text(data, size)) { headers.append(HTTPField(name: .cacheControl, value: line.trimmingSpacesAndTabs)) }
    let parsed = CacheControl(headers)
    // The lines as a field holds them (swift-http-types turns a control character into a space).
    let fieldLines = headers[values: .cacheControl]
    let perLine = fieldLines.flatMap { CacheControl($0).directives }
    require(parsed.directives == perLine, "lines \(fieldLines) give \(parsed.directives), one by one \(perLine)")

    for directive in parsed.directives {
        require(!directive.name.isEmpty, "an empty directive name")
        require(!directive.name.utf8.contains { (0x41...0x5A).contains($0) || ",=;\" \t".utf8.contains($0) },
                "directive name \(directive.name.debugDescription)")
    }
    let written = parsed.description
    require(CacheControl(written).directives == parsed.directives,
            "\(parsed.directives) is written as \(written.debugDescription), which parses to \(CacheControl(written).directives)")

    for name in ["max-age", "s-maxage", "min-fresh", "stale-while-revalidate", "stale-if-error", "max-stale"] {
        guard case .some(let argument) = parsed.argument(of: name) else {
            require(parsed.seconds(name) == nil, "\(name) is absent but has seconds")
            continue
        }
        let expected = argument.flatMap(deltaSeconds)
        let seconds = parsed.seconds(name)
        require(seconds == expected.map { .seconds($0) } ?? .invalid, "\(name)=\(String(describing: argument)) reads as \(String(describing: seconds))")
    }
    _ = (parsed.maxAge, parsed.sharedMaxAge, parsed.noCache, parsed.noCacheFieldNames, parsed.noStore,
         parsed.mustRevalidate, parsed.proxyRevalidate, parsed.mustUnderstand, parsed.isPublic, parsed.isPrivate,
         parsed.privateFieldNames, parsed.noTransform, parsed.isImmutable, parsed.staleWhileRevalidate,
         parsed.staleIfError, parsed.maxStale, parsed.minFresh, parsed.onlyIfCached)
    return 0
}

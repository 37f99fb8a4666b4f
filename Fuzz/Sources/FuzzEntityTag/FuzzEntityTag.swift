// Fuzzes the `ETag` parser (`EntityTag`) and what the engine builds from it: the
// `If-None-Match` of a revalidation and the choice of stored responses a 304 updates.
//
// Invariants:
// - a tag's field value parses back to the same tag;
// - a tag matches itself weakly, and strongly exactly when it is not weak (RFC 9110 §8.8.3.2);
// - a stale stored response with that `ETag` is revalidated with `If-None-Match` holding it;
// - a 304 with the same `ETag` updates that stored response.
import Foundation
import FuzzSupport
import HTTPCache
import HTTPTypes

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEntityTag(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let value = text(data, size)
    guard let tag = EntityTag(value) else { return 0 }
    require(EntityTag(tag.fieldValue) == tag, "\(value.debugDescription) is written as \(tag.fieldValue.debugDescription), which parses otherwise")
    require(tag.matchesWeakly(tag), "\(tag) does not match itself weakly")
    require(tag.matchesStrongly(tag) == !tag.isWeak, "\(tag) matches itself strongly: \(tag.matchesStrongly(tag))")

    // A value no field line can hold (a control character, a space at either end) is not a
    // header's: swift-http-types makes it another.
    let field = HTTPField(name: .eTag, value: value)
    guard field.value == value else { return 0 }
    let headers = HTTPFields([field])
    let stored = StoredResponse(status: 200, headers: headers, requestTime: .distantPast, responseTime: .distantPast)
    guard let storedTag = stored.entityTag else {
        require(false, "\(value.debugDescription) parses alone but not as a field line")
        return 0
    }
    require(storedTag == tag, "as a field line \(value.debugDescription) is \(storedTag), alone \(tag)")
    let conditional = CachePolicyEngine.conditionalHeaders(for: stored)
    require(conditional[values: .ifNoneMatch] == [tag.fieldValue], "revalidation sends \(conditional)")
    let updated = CachePolicyEngine.storedResponsesToUpdate(by: headers, among: [stored])
    require(updated == [0], "a 304 with the stored response's own ETag updates \(updated)")
    return 0
}

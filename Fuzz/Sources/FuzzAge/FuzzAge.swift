// Fuzzes the reading of `Age` (RFC 9111 §5.1) and the age and freshness computed from it
// (§4.2.3, §4.2). Each line of the input is one `Age` field line of a response with
// `max-age=3600`.
//
// Invariants:
// - the field lines make one list whose first member counts: `Age` is valid exactly when that
//   member is all digits (spaces and tabs around it aside); its value is then the decimal value
//   clamped to 2^31 (§1.2.2), and otherwise 0 (the field is ignored);
// - freshness follows the age alone: fresh exactly while the current age is under 3600;
// - the age quantities are finite and add up as §4.2.3 writes them.
import Foundation
import FuzzSupport
import HTTPCache
import HTTPTypes

private let responseTime = Date(timeIntervalSince1970: 1_748_736_000)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAge(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var headers: HTTPFields = [.cacheControl: "max-age=3600"]
    for line in lines(text(data, size)) { headers.append(HTTPField(name: .age, value: line)) }
    // The lines as a field holds them (swift-http-types turns a control character into a space).
    let fieldLines = headers[values: .age]
    let stored = StoredResponse(status: 200, headers: headers, requestTime: responseTime, responseTime: responseTime)
    let now = responseTime.addingTimeInterval(10)
    let age = ResponseAge(of: stored, at: now)

    let firstMember = fieldLines.first.map { String($0.prefix { $0 != "," }) }
    let expected: Int? = fieldLines.isEmpty ? 0 : firstMember.flatMap { deltaSeconds($0.trimmingSpacesAndTabs) }
    require(age.hasInvalidAge == (expected == nil), "Age lines \(fieldLines) read as \(age.hasInvalidAge ? "invalid" : "valid")")
    require(age.ageValue == TimeInterval(expected ?? 0), "Age lines \(fieldLines) read as \(age.ageValue)")
    require(age.currentAge.isFinite && age.currentAge == max(age.apparentAge, age.ageValue) + 10,
            "current age \(age.currentAge) for age value \(age.ageValue)")

    let freshness = CachePolicyEngine(mode: .private).freshness(of: stored, at: now)
    require(freshness.lifetime == 3600, "max-age=3600 gives lifetime \(freshness.lifetime)")
    require(freshness.isFresh == (age.currentAge < 3600), "fresh: \(freshness.isFresh) at age \(age.currentAge)")
    return 0
}

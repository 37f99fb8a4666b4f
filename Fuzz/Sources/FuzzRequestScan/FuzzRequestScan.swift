// Fuzzes `RequestScan`, the server's second HTTP/1.1 head parser (the one `RawHitResponder`
// answers prepared hits from), against the parser every other request goes to: NIO's
// `HTTPRequestDecoder`, set up as the server sets it up.
//
// Input: the bytes a client sends on one connection, as they are (a pipeline of requests, in
// any framing).
//
// Invariants: those of `requestScanDisagreement(_:)` (RequestScanAgreement.swift, shared with the
// unit test that runs this target's seed corpus): for every request the scan answers itself,
// NIO's decoder reads a request ending at the same byte, without a body, with the same method,
// target, version and field lines; what the scan holds as incomplete is no whole head for NIO.
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestScan(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let disagreement = requestScanDisagreement(input)
    require(disagreement == nil, disagreement ?? "")
    return 0
}

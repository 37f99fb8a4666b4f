// Fuzzes the readers of `.meta` files: the binary property list decoder
// (`BinaryPropertyList.decode`), the full entry decoder the rebuild scan, `verify` and the
// inspector use (`EntryMetadata.decode`), and the in-place view every read uses
// (`EntryMetadata.ReadView.parse`).
//
// Invariants:
// - a property list decodes to a value that encodes to a property list decoding to the same
//   value, and whose strings and data hold no more bytes than the file does (times the
//   sharing a file may do): a small file must not decode into a huge value;
// - an entry the full decoder accepts (it decodes what the read path's view found), the read
//   path accepts too, and both read the same key
//   (when it is written the way this library writes strings; otherwise a read defers to the
//   full decoder), size, checksum, expiry and inline body: a rebuild and a read must agree on
//   what a file says;
// - an entry encodes to a file that decodes to the same entry, whole or written in the two
//   parts around its body, and the read path reads that file the same way.
@testable import DiskCache
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMetadata(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    if let value = BinaryPropertyList.decode(bytes) {
        checkPropertyList(value, decodedFrom: bytes)
    }
    let entry = EntryMetadata.decode(bytes)
    let view = EntryMetadata.ReadView.parse(bytes)
    if let entry {
        guard let view else {
            require(false, "the read path rejects an entry the full decoder accepts: \(entry)")
            return 0
        }
        checkAgreement(entry, view, in: bytes)
        checkRoundTrip(entry)
    }
    return 0
}

private func checkPropertyList(_ value: BinaryPropertyList.Value, decodedFrom bytes: UnsafeRawBufferPointer) {
    // The decoder copies at most four times the file; a UTF-16 string takes up to 3/2 as many
    // bytes in UTF-8 (a lone surrogate becomes U+FFFD, three bytes for two).
    let payload = payloadBytes(value)
    require(payload <= 6 * bytes.count, "\(bytes.count) bytes decoded into \(payload) bytes of strings and data")
    // A decoded value holds no external data object: the two parts are the whole encoding.
    let (head, tail) = BinaryPropertyList.encodeSplit(value)
    let encoded = head + tail
    guard let again = encoded.withUnsafeBytes({ BinaryPropertyList.decode($0) }) else {
        require(false, "the encoding of a decoded value does not decode: \(value)")
        return
    }
    require(same(again, value), "decode(encode(value)) differs: \(value) became \(again)")
}

/// The bytes of every string (as UTF-8) and data object in `value`, counting shared objects
/// each time they are reached.
private func payloadBytes(_ value: BinaryPropertyList.Value) -> Int {
    switch value {
    case .data(let bytes): bytes.count
    case .string(let string): string.utf8.count
    case .array(let values): values.reduce(0) { $0 + payloadBytes($1) }
    case .dictionary(let pairs): pairs.reduce(0) { $0 + $1.0.utf8.count + payloadBytes($1.1) }
    default: 0
    }
}

/// Equality that also holds for reals and dates with the same NaN or signed-zero bits.
private func same(_ a: BinaryPropertyList.Value, _ b: BinaryPropertyList.Value) -> Bool {
    switch (a, b) {
    case let (.real(x), .real(y)), let (.date(x), .date(y)): x.bitPattern == y.bitPattern || x == y
    case let (.array(x), .array(y)): x.count == y.count && zip(x, y).allSatisfy(same)
    case let (.dictionary(x), .dictionary(y)): x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && same($0.1, $1.1) }
    default: a == b
    }
}

private func checkAgreement(_ entry: EntryMetadata, _ view: EntryMetadata.ReadView, in bytes: UnsafeRawBufferPointer) {
    // The read path compares the key's bytes with the one encoding this library writes; a key
    // written another way (a longer count, UTF-16 for ASCII) does not match there, and the read
    // falls back to the full decoder. Another key must never match.
    if Array(bytes[view.keyObject]) == BinaryPropertyList.encodeString(entry.key) {
        require(view.hasKey(entry.key, in: bytes), "the read path sees another key than \(entry.key.debugDescription)")
    }
    require(!view.hasKey(entry.key + "\u{0}", in: bytes), "the read path takes \(entry.key.debugDescription) for another key")
    require(view.size == entry.size, "size: the read path says \(view.size), the decoder \(entry.size)")
    require(view.checksum == entry.checksum, "checksum: the read path says \(view.checksum), the decoder \(entry.checksum)")
    require(view.expires == entry.expires, "expiry: the read path says \(String(describing: view.expires)), the decoder \(String(describing: entry.expires))")
    let viewBody = view.inlineBody.map { Array(bytes[$0]) }
    require(viewBody == entry.inlineBody, "the read path and the decoder see different inline bodies")
}

private func checkRoundTrip(_ entry: EntryMetadata) {
    let encoded = entry.encoded()
    let decoded = encoded.withUnsafeBytes { EntryMetadata.decode($0) }
    require(decoded == entry, "decode(encode(entry)) differs: \(entry) became \(String(describing: decoded))")
    if let body = entry.inlineBody {
        let (head, tail) = entry.encodedParts(inlineBodyCount: body.count)
        require(head + body + tail == encoded, "the two parts around the body are not the whole file")
    }
    encoded.withUnsafeBytes { buffer in
        guard let view = EntryMetadata.ReadView.parse(buffer) else {
            require(false, "the read path rejects an encoded entry: \(entry)")
            return
        }
        checkAgreement(entry, view, in: buffer)
    }
}

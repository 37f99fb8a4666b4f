#if Server
import Foundation
import HTTPCache
import NIOCore
import HTTPTypes

/// A client's `Range` (RFC 9110 §14.2) against a body of known size: one byte range, served as
/// a 206; several, or a field this server does not parse, are ignored (the whole body, a 200, as
/// the RFC allows).
enum ByteRange: Equatable {
    case whole
    case range(first: Int64, last: Int64)
    case unsatisfiable

    init(_ field: String?, size: Int64) {
        guard let field else { self = .whole; return }
        let text = field.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes="), !text.contains(",") else { self = .whole; return }
        let spec = text.dropFirst(6).trimmingCharacters(in: .whitespaces)
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2, parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }) else { self = .whole; return }
        if parts[0].isEmpty {
            // A suffix: the last n bytes.
            guard let suffix = Int64(parts[1]) else { self = .whole; return }
            guard suffix > 0, size > 0 else { self = .unsatisfiable; return }
            self = .range(first: max(0, size - suffix), last: size - 1)
            return
        }
        guard let first = Int64(parts[0]) else { self = .whole; return }
        let last = parts[1].isEmpty ? Int64.max : (Int64(parts[1]) ?? Int64.max)
        guard last >= first else { self = .whole; return }  // invalid: ignored
        guard first < size else { self = .unsatisfiable; return }
        self = .range(first: first, last: min(last, size - 1))
    }

    /// The range a client asked of a response with these fields: none (the whole body) when
    /// the request has an `If-Range` that does not hold for it (RFC 9110 §13.1.5: a strong
    /// entity-tag match, or a date equal to its `Last-Modified`).
    init(request: HTTPFields, response: HTTPFields, size: Int64) {
        if let ifRange = request[values: .ifRange].first {
            let holds: Bool
            if ifRange.hasPrefix("\"") || ifRange.hasPrefix("W/") {
                let stored = response[.eTag].flatMap(EntityTag.init)
                holds = EntityTag(ifRange).map { tag in stored.map { tag.matchesStrongly($0) } ?? false } ?? false
            } else {
                holds = response[.lastModified].flatMap({ HTTPDate.parse($0) }) == HTTPDate.parse(ifRange) && HTTPDate.parse(ifRange) != nil
            }
            guard holds else { self = .whole; return }
        }
        self.init(request[values: .range].first, size: size)
    }

    /// The part of `buffer`, which starts at `offset` of the body, that lies in the range.
    func slice(_ buffer: ByteBuffer, at offset: Int64) -> ByteBuffer? {
        guard case .range(let first, let last) = self else { return buffer }
        let start = max(first, offset), end = min(last + 1, offset + Int64(buffer.readableBytes))
        guard start < end else { return nil }
        return buffer.getSlice(at: buffer.readerIndex + Int(start - offset), length: Int(end - start))
    }

    /// The bytes of a body of `size` bytes to send; nil when none are.
    func bounds(size: Int64) -> Range<Int64>? {
        switch self {
        case .whole: return 0..<size
        case .range(let first, let last): return first..<(last + 1)
        case .unsatisfiable: return nil
        }
    }

    /// The status, and the fields to set, for a body of `size` bytes.
    func apply(to fields: inout HTTPFields, status: HTTPResponse.Status, size: Int64) -> HTTPResponse.Status {
        fields[.transferEncoding] = nil
        switch self {
        case .whole:
            fields.replaceOrAppend(.contentLength, String(size))
            return status
        case .range(let first, let last):
            fields.replaceOrAppend(.contentRange, "bytes \(first)-\(last)/\(size)")
            fields.replaceOrAppend(.contentLength, String(last - first + 1))
            return .partialContent
        case .unsatisfiable:
            fields.replaceOrAppend(.contentRange, "bytes */\(size)")
            fields.replaceOrAppend(.contentLength, "0")
            return .rangeNotSatisfiable
        }
    }
}
#endif

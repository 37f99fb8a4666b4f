#if Server
import HTTPCache
import NIOCore
import NIOHTTP1
import HTTPTypes

extension PreparedHits {
    /// A response head in HTTP/1.1's wire form, as NIO's `HTTPResponseEncoder` writes it (status
    /// line, each field as `name: value` and CRLF, an empty line), cut around the `Age` field's
    /// value, which is the only part that changes from one answer to the next.
    struct WireHead: Sendable {
        /// The status line and the fields up to `Age: `.
        let beforeAge: ByteBuffer
        /// CRLF ending `Age`, the fields after it and the empty line.
        let afterAge: ByteBuffer

        /// No field can split the response: `HTTPFields` holds only names that are tokens and
        /// values without a CR, LF or other control character but tab (swift-http-types makes
        /// any other a space), which is what NIO's header validator checks on the full path.
        /// Nil where NIO's encoder would change the fields' framing: a status without a body (it
        /// drops `Content-Length`), no `Content-Length` (it adds chunked coding), or a
        /// `Transfer-Encoding` beside one (it drops that).
        init?(status: HTTPResponse.Status, beforeAge: HTTPFields, afterAge: HTTPFields) {
            let fields = Array(beforeAge) + Array(afterAge)
            let head = Fields.responseHead(status, [:])
            guard head.status.mayHaveResponseBody,
                  fields.contains(where: { $0.name == .contentLength }),
                  !fields.contains(where: { $0.name == .transferEncoding })
            else { return nil }
            var before = ByteBuffer(string: "HTTP/1.1 \(head.status.code) \(head.status.reasonPhrase)\r\n")
            for field in beforeAge { before.writeString("\(field.name.rawName): \(field.value)\r\n") }
            before.writeString("Age: ")
            var after = ByteBuffer(string: "\r\n")
            for field in afterAge { after.writeString("\(field.name.rawName): \(field.value)\r\n") }
            after.writeString("\r\n")
            self.beforeAge = before
            self.afterAge = after
        }

        /// The head with `age` as the `Age` value, with room for `extra` more bytes after it.
        func head(age: String, reserving extra: Int = 0) -> ByteBuffer {
            var head = ByteBuffer()
            head.reserveCapacity(beforeAge.readableBytes + age.utf8.count + afterAge.readableBytes + extra)
            head.writeImmutableBuffer(beforeAge)
            head.writeString(age)
            head.writeImmutableBuffer(afterAge)
            return head
        }
    }
}
#endif

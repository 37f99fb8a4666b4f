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

        /// Nil when a field's name is not a token or its value holds a control character (a CR
        /// or LF would split the response): NIO's header validator refuses those on the full
        /// path, and here nothing would. Nil too where NIO's encoder would change the fields'
        /// framing: a status without a body (it drops `Content-Length`), no `Content-Length` (it
        /// adds chunked coding), or a `Transfer-Encoding` beside one (it drops that).
        init?(status: HTTPResponseStatus, beforeAge: HTTPHeaders, afterAge: HTTPHeaders) {
            let fields = beforeAge.map { $0 } + afterAge.map { $0 }
            guard fields.allSatisfy({ Self.isToken($0.name) && Self.isFieldValue($0.value) }), Self.isFieldValue(status.reasonPhrase),
                  status.mayHaveResponseBody,
                  fields.contains(where: { $0.name.lowercased() == "content-length" }),
                  !fields.contains(where: { $0.name.lowercased() == "transfer-encoding" })
            else { return nil }
            var before = ByteBuffer(string: "HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\n")
            for (name, value) in beforeAge { before.writeString("\(name): \(value)\r\n") }
            before.writeString("Age: ")
            var after = ByteBuffer(string: "\r\n")
            for (name, value) in afterAge { after.writeString("\(name): \(value)\r\n") }
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

        /// RFC 9110's token: what a field name is made of.
        static func isToken(_ text: String) -> Bool {
            !text.isEmpty && text.utf8.allSatisfy(HTTPField.isTokenByte)
        }

        /// A field value (or reason phrase) with no control character but tab.
        static func isFieldValue(_ text: String) -> Bool {
            text.utf8.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }
        }
    }
}

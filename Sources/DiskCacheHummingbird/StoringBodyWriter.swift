#if Hummingbird
import HTTPTypes
import Hummingbird
import NIOCore

/// Passes a response's body on as the app writes it and collects it, up to `limit` bytes; a
/// body collected whole is handed to `store`, which commits it, before its last part goes on.
///
/// A client has the whole response when it has the last byte of the body its `Content-Length`
/// announced, or, without one, the end of the chunked body. So with a `length`, the write that
/// completes the body waits for `store` before it is passed on; without one, ``finish(_:)``
/// does. A process killed as soon as the client has the response has stored it. A body that
/// does not come to its announced length (shorter or longer) is not stored.
struct StoringBodyWriter: ResponseBodyWriter {
    var parent: any ResponseBodyWriter
    let limit: Int
    /// The body's length, when the response announces it.
    let length: Int?
    let store: @Sendable (ByteBuffer) async -> Void
    /// What was written so far; nil once it passed `limit` (or the announced length).
    private var collected: ByteBuffer? = ByteBuffer()
    /// Bytes written so far.
    private var written = 0
    /// Whether `store` was called.
    private var stored = false

    init(parent: any ResponseBodyWriter, limit: Int, length: Int?, store: @escaping @Sendable (ByteBuffer) async -> Void) {
        self.parent = parent
        self.limit = limit
        self.length = length
        self.store = store
    }

    mutating func write(_ buffer: ByteBuffer) async throws {
        written += buffer.readableBytes
        if let size = collected?.readableBytes {
            if size + buffer.readableBytes > limit || length.map({ written > $0 }) == true {
                collected = nil
            } else {
                collected!.writeImmutableBuffer(buffer)
            }
        }
        // This part completes the body: the client will have the whole response once it goes.
        if written == length, !stored, let collected {
            stored = true
            await store(collected)
        }
        try await parent.write(buffer)
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
        if !stored, length == nil || written == length, let collected {
            stored = true
            await store(collected)
        }
        try await parent.finish(trailingHeaders)
    }
}
#endif

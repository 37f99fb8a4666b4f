#if Hummingbird
import HTTPTypes
import Hummingbird
import NIOCore

/// Passes a response's body on as the app writes it and collects it, up to `limit` bytes; at
/// its end, a body collected whole is handed to `store` before the end goes on.
struct StoringBodyWriter: ResponseBodyWriter {
    var parent: any ResponseBodyWriter
    let limit: Int
    let store: @Sendable (ByteBuffer) async -> Void
    /// What was written so far; nil once it passed `limit`.
    private var collected: ByteBuffer? = ByteBuffer()

    init(parent: any ResponseBodyWriter, limit: Int, store: @escaping @Sendable (ByteBuffer) async -> Void) {
        self.parent = parent
        self.limit = limit
        self.store = store
    }

    mutating func write(_ buffer: ByteBuffer) async throws {
        if let size = collected?.readableBytes {
            if size + buffer.readableBytes > limit {
                collected = nil
            } else {
                collected!.writeImmutableBuffer(buffer)
            }
        }
        try await parent.write(buffer)
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
        if let collected { await store(collected) }
        try await parent.finish(trailingHeaders)
    }
}
#endif

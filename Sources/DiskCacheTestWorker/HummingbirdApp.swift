#if Hummingbird
import DiskCacheHummingbird
import Foundation
import HTTPCache
import Hummingbird
import NIOCore

// MARK: - An app behind the response cache, to be killed

/// The body of `/item/<name>`: `size` bytes that say which item and which process made them.
func cachedAppBody(_ name: String, size: Int) -> ByteBuffer {
    let prefix = Array("\(name) from \(getpid()) ".utf8)
    var bytes = [UInt8](repeating: UInt8(ascii: "."), count: size)
    for i in 0..<min(size, prefix.count) { bytes[i] = prefix[i] }
    return ByteBuffer(bytes: bytes)
}

/// Serves `GET /item/<name>` on a loopback port behind an `HTTPCachingMiddleware` over
/// `directory` until killed, printing "LISTENING <port>" once it listens. Each answer is
/// `size` bytes marked `max-age=600`, written in parts of 4 KiB, with a `Content-Length` unless
/// `chunked` (then the body ends with its last chunk).
func serveCachedApp(_ directory: URL, size: Int, chunked: Bool) async throws {
    let router = Router()
    router.add(middleware: try HTTPCachingMiddleware<BasicRequestContext>(directory: directory, bodySizeLimit: max(size, 1)))
    router.get("/item/:name") { _, context in
        let body = cachedAppBody(context.parameters.get("name") ?? "-", size: size)
        return Response(status: .ok, headers: [.cacheControl: "max-age=600"],
                        body: ResponseBody(contentLength: chunked ? nil : size) { writer in
                            var rest = body
                            while let part = rest.readSlice(length: min(4096, rest.readableBytes)), part.readableBytes > 0 {
                                try await writer.write(part)
                            }
                            try await writer.finish(nil)
                        })
    }
    let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                          onServerRunning: { channel in say("LISTENING \(channel.localAddress?.port ?? 0)") })
    try await app.run()
}
#endif

public import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// An origin on 127.0.0.1 that answers `GET /bytes/<count>` with `count` bytes of a fixed
/// pattern (byte i is `i % 251`), written as the connection can take them: a body of any size
/// in bounded memory. Every response is `Cache-Control: max-age=600`. `GET /early/<count>` sends
/// a `103 Early Hints` (with a `Link` field) first.
public final class StreamingOrigin: Sendable {
    private let channel: any Channel
    public let port: Int

    public init() async throws {
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { child in
                child.pipeline.configureHTTPServerPipeline().flatMapThrowing {
                    try child.pipeline.syncOperations.addHandler(StreamingHandler())
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        port = channel.localAddress!.port!
    }

    /// The byte at `offset` of every body.
    public static func byte(at offset: Int) -> UInt8 { UInt8(offset % 251) }

    /// The `count` bytes of every body from `offset` (`count` at most 1 MiB).
    public static func bytes(at offset: Int, count: Int) -> ArraySlice<UInt8> {
        let start = offset % 251
        return pattern[start..<start + count]
    }

    private static let pattern: [UInt8] = (0..<(1 << 20) + 251).map { UInt8($0 % 251) }

    public func stop() async throws { try await channel.close() }
}

private final class StreamingHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private var remaining = 0
    private var offset = 0
    private var isWriting = false
    private var isEarly = false
    private static let pieceSize = 64 << 10

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = unwrapInboundIn(data) else {
            if case .head(let head) = unwrapInboundIn(data) {
                remaining = Int(head.uri.split(separator: "/").last ?? "") ?? 0
                offset = 0
                isEarly = head.uri.hasPrefix("/early/")
            }
            return
        }
        if isEarly {
            // `/early/<count>`: a 103 Early Hints before the answer.
            let hints: HTTPHeaders = ["Link": "</style.css>; rel=preload; as=style"]
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .custom(code: 103, reasonPhrase: "Early Hints"),
                                                                 headers: hints))), promise: nil)
            context.flush()
        }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Length", value: String(remaining))
        headers.add(name: "Cache-Control", value: "max-age=600")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
        isWriting = true
        writeMore(context: context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if isWriting, context.channel.isWritable { writeMore(context: context) }
        context.fireChannelWritabilityChanged()
    }

    private func writeMore(context: ChannelHandlerContext) {
        while remaining > 0, context.channel.isWritable {
            let count = min(Self.pieceSize, remaining)
            var buffer = context.channel.allocator.buffer(capacity: count)
            buffer.writeBytes(StreamingOrigin.bytes(at: offset, count: count))
            offset += count
            remaining -= count
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
            context.flush()
        }
        if remaining == 0, isWriting {
            isWriting = false
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}

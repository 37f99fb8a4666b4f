#if Server
import NIOCore

/// The whole pipeline of a connection accepted past ``ServerConfiguration/maximumConnections``:
/// a 503 with `Retry-After`, then the close; nothing it sends is read.
final class ConnectionRefusal: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private static let answer = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
        + "Content-Length: 26\r\nRetry-After: 1\r\nConnection: close\r\n\r\nToo many open connections\n"

    func channelActive(context: ChannelHandlerContext) {
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(channel.allocator.buffer(string: Self.answer))).whenComplete { _ in
            channel.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}
#endif

#if Server
import DiskCacheLocking
import Foundation
import NIOCore
import NIOPosix

/// An origin on loopback that reads requests as bytes, the way a plain static server does:
/// it answers each request as soon as its head has come (with its request line as the body, so
/// that an answer says which request it answers), then skips the `Content-Length` bytes of a
/// body, on kept-alive connections. It records each head as it read it, so tests see exactly
/// what reached the origin (a method NIO would rename, a `Content-Length` sent without its body).
final class RawOrigin: Sendable {
    /// A request head as the origin read it.
    struct Head: Sendable {
        var method: String
        var target: String
        var lines: [String]
        func field(_ name: String) -> String? {
            lines.first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
                .map { String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces) }
        }
    }

    private let channel: any Channel
    private let recorded = PthreadMutex([Head]())
    let port: Int

    /// `fields` are sent with every answer (after `Content-Length`), e.g. a `Cache-Control`;
    /// `padding` bytes of `x` follow the request line in each body; `status` is every answer's
    /// (`413 Content Too Large`, say). With `readsBodies` false the origin reads nothing more
    /// of a connection once it has answered its first request: the body of a request it
    /// answers before reading it stays unread, as the kernel's buffers fill.
    init(status: String = "200 OK", readsBodies: Bool = true, padding: Int = 0,
         fields: @escaping @Sendable (Head) -> [(String, String)] = { _ in [("Cache-Control", "max-age=3600")] }) async throws {
        let recorded = self.recorded
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Handler(recorded: recorded, fields: fields, padding: padding,
                                                                           status: status, readsBodies: readsBodies))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        port = channel.localAddress!.port!
    }

    var heads: [Head] { recorded.withLock { $0 } }

    func stop() async throws { try await channel.close() }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let recorded: PthreadMutex<[Head]>
        let fields: @Sendable (Head) -> [(String, String)]
        var received: [UInt8] = []
        /// Body bytes still to skip.
        var skipping = 0
        let padding: Int
        let status: String
        let readsBodies: Bool
        /// Nothing more is read (`readsBodies` false, and a request was answered).
        var deaf = false

        init(recorded: PthreadMutex<[Head]>, fields: @escaping @Sendable (Head) -> [(String, String)], padding: Int,
             status: String, readsBodies: Bool) {
            self.recorded = recorded
            self.fields = fields
            self.padding = padding
            self.status = status
            self.readsBodies = readsBodies
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard !deaf else { return }
            var buffer = unwrapInboundIn(data)
            received += buffer.readBytes(length: buffer.readableBytes) ?? []
            while true {
                if skipping > 0 {
                    let skipped = min(skipping, received.count)
                    received.removeFirst(skipped)
                    skipping -= skipped
                    if skipping > 0 { return }
                }
                guard let end = Self.headEnd(received) else { return }
                let text = String(decoding: received[..<end], as: UTF8.self)
                received.removeFirst(end + 4)
                let lines = text.components(separatedBy: "\r\n")
                let words = lines[0].split(separator: " ", maxSplits: 2).map(String.init)
                let head = Head(method: words.first ?? "", target: words.count > 1 ? words[1] : "", lines: Array(lines.dropFirst()))
                recorded.withLock { $0.append(head) }
                let body = lines[0] + String(repeating: "x", count: padding)
                var answer = "HTTP/1.1 \(status)\r\nContent-Length: \(body.utf8.count)\r\n"
                for (name, value) in fields(head) { answer += "\(name): \(value)\r\n" }
                answer += "\r\n" + (head.method == "HEAD" ? "" : body)
                context.writeAndFlush(NIOAny(context.channel.allocator.buffer(string: answer)), promise: nil)
                if !readsBodies {
                    deaf = true
                    context.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
                    return
                }
                skipping = head.field("Content-Length").flatMap { Int($0) } ?? 0
            }
        }

        private static func headEnd(_ bytes: [UInt8]) -> Int? {
            guard bytes.count >= 4 else { return nil }
            for index in 0...(bytes.count - 4) where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
                return index
            }
            return nil
        }
    }
}
#endif

import DiskCacheLocking
import NIOCore
import NIOHTTP1

/// What a request's task writes its response with: the connection's writer, and the files of
/// bodies it sends with `sendfile` (``SentFiles``).
struct ClientWriter: Sendable {
    let outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>
    let sentFiles: SentFiles

    func write(_ part: HTTPServerResponsePart) async throws {
        try await outbound.write(part)
    }

    func write(contentsOf parts: [HTTPServerResponsePart]) async throws {
        try await outbound.write(contentsOf: parts)
    }
}

/// The files of one connection's bodies sent with `sendfile` (a `FileRegion` written to the
/// channel). A file must stay open until its write is done, which the request's task cannot
/// see: ``SentFileCloser`` closes it then, and whatever a closing connection never wrote (a
/// write NIO dropped with the channel) is closed with ``closeAll()`` when the connection ends.
/// `NIOFileHandle` refuses a second close and a use after close, so the two may meet.
final class SentFiles: Sendable {
    private let open = PthreadMutex([ObjectIdentifier: NIOFileHandle]())
    /// The server's count of files open for sending, over all connections.
    private let serverCount: PthreadMutex<Int>

    init(counting serverCount: PthreadMutex<Int>) { self.serverCount = serverCount }

    /// Takes `descriptor` (now owned here) as a handle for a `FileRegion`.
    func adopt(_ descriptor: Int32) -> NIOFileHandle {
        let handle = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: descriptor)
        open.withLock { $0[ObjectIdentifier(handle)] = handle }
        serverCount.withLock { $0 += 1 }
        return handle
    }

    func close(_ handle: NIOFileHandle) {
        guard open.withLock({ $0.removeValue(forKey: ObjectIdentifier(handle)) }) != nil else { return }
        serverCount.withLock { $0 -= 1 }
        try? handle.close()
    }

    func closeAll() {
        for handle in open.withLock({ Array($0.values) }) { close(handle) }
    }
}

/// Closes the file of a body sent as a `FileRegion` once its write is done or failed.
final class SentFileCloser: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let files: SentFiles

    init(_ files: SentFiles) { self.files = files }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .body(.fileRegion(let region)) = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        let written = context.eventLoop.makePromise(of: Void.self)
        let files = self.files
        written.futureResult.whenComplete { result in
            files.close(region.fileHandle)
            promise?.completeWith(result)
        }
        context.write(data, promise: written)
    }
}

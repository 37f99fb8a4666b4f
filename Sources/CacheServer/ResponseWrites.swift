#if Server
import NIOCore
import NIOHTTP1

/// Sees every response part on its way to the socket: closes the file of a body sent as a
/// `FileRegion` once its write is done or failed, counts a response out of the connection's
/// ``InFlightCount`` once its `.end` is, and counts each `.end` into ``HandedOn`` as it
/// passes (on its way, not yet written: an answer ``RawHitResponder`` writes after it follows it).
final class ResponseWrites: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let files: SentFiles
    private let activity: InFlightCount
    private let handedOn: HandedOn
    private let clock: ClientTimeouts.Clock

    init(files: SentFiles, activity: InFlightCount, handedOn: HandedOn, clock: ClientTimeouts.Clock) {
        self.files = files
        self.activity = activity
        self.handedOn = handedOn
        self.clock = clock
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let done: @Sendable () -> Void
        switch unwrapOutboundIn(data) {
        case .body(.fileRegion(let region)):
            let files = self.files
            done = { files.close(region.fileHandle) }
        case .end:
            handedOn.ends += 1
            clock.answerEnded()
            let activity = self.activity
            done = { activity.end() }
        default:
            context.write(data, promise: promise)
            return
        }
        let written = context.eventLoop.makePromise(of: Void.self)
        written.futureResult.whenComplete { result in
            done()
            promise?.completeWith(result)
        }
        context.write(data, promise: written)
    }
}
#endif

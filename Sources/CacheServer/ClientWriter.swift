#if Server
import NIOCore
import NIOHTTP1

/// What a request's task writes its response with: the connection's writer, the files of
/// bodies it sends with `sendfile` (``SentFiles``), and the count of responses not yet written
/// to the socket (``InFlightCount``), which a response's `.end` enters here.
struct ClientWriter: Sendable {
    let outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>
    let sentFiles: SentFiles
    let activity: InFlightCount

    func write(_ part: HTTPServerResponsePart) async throws {
        try await write(contentsOf: [part])
    }

    func write(contentsOf parts: [HTTPServerResponsePart]) async throws {
        // Counted before the parts go (``ResponseWrites`` counts it out once written); a write
        // that throws handed nothing to the channel.
        let ends = parts.contains { if case .end = $0 { true } else { false } }
        if ends { activity.begin() }
        do {
            try await outbound.write(contentsOf: parts)
        } catch {
            if ends { activity.end() }
            throw error
        }
    }
}
#endif

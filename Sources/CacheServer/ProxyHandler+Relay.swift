#if Server
import Foundation
import HTTPCache
import Logging
import NIOCore
import NIOHTTP1
import HTTPTypes

// The origin's response passed on to the client as it arrives, spooled into the cache when it
// may be stored.
extension ProxyHandler {
    /// Sends the origin's response on to the client as it arrives, and into the cache when
    /// `storing` is set (the body spooled to a file in the cache's `tmp/`, then stored whole).
    /// `originFields` are the fields of `responseHead` (read once by the caller). `closing`: it
    /// goes with `Connection: close` (the connection closes after it). `declined`: it could
    /// have been stored, but ``ServerConfiguration/minimumUses`` says not yet (a `MISS`, not a
    /// `BYPASS`).
    func relay(_ responseHead: HTTPResponseHead, _ originFields: HTTPFields, _ body: inout OriginClient.ResponseBody, _ exchange: Exchange,
               storing: StoredResponse?, declined: Bool = false, closing: Bool = false, writer: ClientWriter) async throws -> Outcome {
        let cacheStatus = storing != nil || declined ? "MISS" : "BYPASS"
        var fields = CachePolicyEngine.endToEndFields(originFields)
        if closing { fields.append(HTTPField(name: .connection, value: "close")) }
        fields.append(HTTPField(name: .via, value: "\(responseHead.version.major).\(responseHead.version.minor) \(configuration.viaName)"))
        fields.replaceOrAppend(Fields.xCache, cacheStatus)
        // A client's range of a whole body the origin sends (the range was not forwarded, so that
        // the whole body could be stored) is cut out as the body passes.
        var range = ByteRange.whole
        var status = Fields.status(responseHead)
        if exchange.method == .get, status.code == 200, exchange.fields.contains(.range),
           let length = fields[values: .contentLength].first.flatMap({ Int64($0) }) {
            range = ByteRange(request: exchange.fields, response: fields, size: length)
            status = range.apply(to: &fields, status: status, size: length)
        }
        var spool: BodySpool?
        if storing != nil { spool = BodySpool(for: cache) }
        var sent: Int64 = 0
        do {
            try await send(.head(Fields.responseHead(status, fields)), writer)
            // Each piece goes to the client when the next has come, the last only after the
            // store: a client that has the whole body finds it in the cache.
            var held: ByteBuffer?
            var offset: Int64 = 0
            while let buffer = try await body.next() {
                if !exchange.isHEAD, range != .unsatisfiable, let piece = range.slice(buffer, at: offset), piece.readableBytes > 0 {
                    if let previous = held { try await send(.body(.byteBuffer(previous)), writer) }
                    held = piece
                    sent += Int64(piece.readableBytes)
                }
                offset += Int64(buffer.readableBytes)
                if let current = spool {
                    do { try await current.append(buffer) } catch {
                        logger.warning("Cannot spool a response into the cache", metadata: ["error": "\(error)"])
                        await current.remove()
                        spool = nil
                    }
                }
            }
            if let spool, let storing {
                await store(storing, exchange, spool: spool)
            }
            try await send(held.map { [.body(.byteBuffer($0)), .end(nil)] } ?? [.end(nil)], writer)
        } catch {
            await spool?.remove()
            throw error
        }
        note(.bytesServed(sent))
        return Outcome(status: UInt(status.code), bytes: sent, cacheStatus: cacheStatus)
    }

    /// Writes to the client; a failure is the client's going (``ClientGone``), not the origin's.
    func send(_ part: HTTPServerResponsePart, _ writer: ClientWriter) async throws {
        do { try await writer.write(part) } catch { throw ClientGone(underlying: error) }
    }

    /// Writes `parts` to the client together.
    func send(_ parts: [HTTPServerResponsePart], _ writer: ClientWriter) async throws {
        do { try await writer.write(contentsOf: parts) } catch { throw ClientGone(underlying: error) }
    }
}
#endif

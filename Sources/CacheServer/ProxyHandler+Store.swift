#if Server
import DiskCache
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCache
import Logging
import NIOCore
import HTTPTypes

// A spooled response stored in the cache.
extension ProxyHandler {
    func store(_ response: StoredResponse, _ exchange: Exchange, spool: BodySpool) async {
        let cache = self.cache
        let entry = CachedHTTPResponse(url: exchange.cacheRequest.url, response: response, body: Data(),
                                       mimeType: response.headers[.contentType].map { String($0.prefix { $0 != ";" }) })
        let request = exchange.urlRequest
        do {
            switch try await spool.finish() {
            case .bytes(let body):
                var whole = entry
                whole.body = body
                try await BlockingIOPool.shared.run { [whole] in _ = try cache.storeThrowing(whole, for: request) }
            case .file(let url, let written):
                try await BlockingIOPool.shared.run {
                    _ = try cache.storeThrowing(entry, for: request, bodyFile: (url, .move, written))
                }
            }
            note(.stores)
        } catch {
            logger.warning("Cannot store a response", metadata: ["target": "\(exchange.target)", "error": "\(error)"])
        }
        await spool.remove()
    }
}
#endif

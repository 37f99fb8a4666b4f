#if Server
import DiskCache
import DiskCacheLocking
import Foundation
import HTTPCache
import Logging
import NIOCore
import NIOHTTP1
import HTTPTypes

// Stale-while-revalidate refreshes, run in the background (one per key), answering no client.
extension ProxyHandler {
    /// Waits for the background refreshes under way.
    func waitForRefreshes() async {
        while let task = refreshTasks.withLock({ $0.values.first }) { await task.value }
    }

    /// A stale-while-revalidate refresh: one per key at a time, answering no client.
    func refreshInBackground(_ exchange: Exchange, key: String, validating: HTTPResponseStore.StoredVariant, adding: HTTPFields) {
        refreshTasks.withLock { tasks in
            guard tasks[key] == nil else { return }
            tasks[key] = Task {
                await self.refresh(exchange, key: key, validating: validating, adding: adding)
                _ = self.refreshTasks.withLock { $0.removeValue(forKey: key) }
            }
        }
    }

    private func refresh(_ exchange: Exchange, key: String, validating: HTTPResponseStore.StoredVariant, adding: HTTPFields) async {
        var fields = CachePolicyEngine.endToEndFields(exchange.fields)
        for name in CachePolicyEngine.conditionalRequestFields { fields[name] = nil }
        for field in adding { fields.replaceOrAppend(field.name, field.value) }
        let get = exchange.asGET
        let head = originHead(get, fields: fields)
        let requestTime = Date()
        let cache = self.cache
        do {
            try await origin.exchangeReusing(head) { [self] responseHead, body in
                let responseTime = Date()
                note(.originResponse(seconds: responseTime.timeIntervalSince(requestTime)))
                let code = Int(responseHead.status.code)
                let sent = Fields.fields(responseHead.headers)
                let fields = policyFields(sent)
                if code == 304 {
                    while try await body.next() != nil {}
                    _ = try await BlockingIOPool.shared.run {
                        cache.applyNotModified(fields, validated: validating.entry, key: key, requestTime: requestTime, responseTime: responseTime)
                    }
                    return
                }
                guard isStorable(get.cacheRequest, status: code, fields: fields, sent: sent), let spool = BodySpool(for: cache) else {
                    while try await body.next() != nil {}
                    return
                }
                do {
                    while let buffer = try await body.next() { try await spool.append(buffer) }
                } catch {
                    await spool.remove()
                    throw error
                }
                await store(StoredResponse(request: get.cacheRequest, status: code, headers: fields,
                                           requestTime: requestTime, responseTime: responseTime), get, spool: spool)
            }
        } catch {
            note(.originErrors)
            logger.warning("A background refresh failed", metadata: ["target": "\(exchange.target)", "error": "\(error)"])
        }
    }
}
#endif

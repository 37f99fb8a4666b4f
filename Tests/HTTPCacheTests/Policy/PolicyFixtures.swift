import Foundation
import HTTPTypes
@testable import HTTPCache

/// The namespace of the policy engine's test suites, so their names cannot collide with other
/// suites of the HTTPCacheTests target.
enum PolicyEngineTests {}

extension PolicyEngineTests {
    /// Fixed inputs shared by the policy engine tests. Nothing here reads the clock.
    enum PolicyFixtures {
        /// `Sun, 06 Nov 1994 08:49:37 GMT`, the example date of RFC 9110 §5.6.7.
        static let t0 = Date(timeIntervalSince1970: 784_111_777)
        static let t0HTTP = "Sun, 06 Nov 1994 08:49:37 GMT"

        static func at(_ offset: TimeInterval) -> Date {
            t0.addingTimeInterval(offset)
        }

        static let url = URL(string: "https://example.com/resource")!

        static func request(
            _ method: String = "GET",
            url: URL = url,
            headers: HTTPFields = [:]
        ) -> CacheRequest {
            CacheRequest(method: method, url: url, headers: headers)
        }

        /// A stored 200 response with `Date: t0`, fetched instantly at t0, with the given extra fields.
        static func stored(
            status: Int = 200,
            method: String = "GET",
            headers: HTTPFields,
            date: String? = t0HTTP,
            requestTime: Date = t0,
            responseTime: Date = t0,
            varying: HTTPFields = [:]
        ) -> StoredResponse {
            var all = HTTPFields()
            if let date { all.append(name: "Date", value: date) }
            all.append(contentsOf: headers)
            return StoredResponse(
                requestMethod: method,
                status: status,
                headers: all,
                requestTime: requestTime,
                responseTime: responseTime,
                varyingRequestHeaders: varying
            )
        }

        static let privateEngine = CachePolicyEngine(mode: .private)
        static let sharedEngine = CachePolicyEngine(mode: .shared)

        static func engine(_ mode: CacheMode) -> CachePolicyEngine {
            CachePolicyEngine(mode: mode)
        }
    }

    /// The shape of a decision, for tables that only care which way the engine went.
    enum DecisionKind: String, Sendable, CustomStringConvertible {
        case fresh, stale, staleWhileRevalidate, revalidate, mustFetch, gatewayTimeout, unavailableOffline

        init(_ decision: CacheDecision) {
            switch decision {
            case .fresh: self = .fresh
            case .stale: self = .stale
            case .staleWhileRevalidate: self = .staleWhileRevalidate
            case .revalidate: self = .revalidate
            case .mustFetch: self = .mustFetch
            case .gatewayTimeout: self = .gatewayTimeout
            case .unavailableOffline: self = .unavailableOffline
            }
        }

        var description: String { rawValue }
    }
}

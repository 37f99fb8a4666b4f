/// The one error type of the HTTP cache layer. A miss is not an error; this is thrown where the
/// caller can act: an offline request with nothing stored, a request without a URL, a transport
/// that answered with something other than an HTTP response.
///
/// Match it by code: `catch let error as HTTPCacheError where error.code == .notCached`, or
/// `catch HTTPCacheError.Code.notCached`.
public struct HTTPCacheError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong. New codes may be added; switch over them with a `default` case.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Value: Sendable, Hashable {
            case notCached, invalidRequest, notHTTPResponse
        }

        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The request's policy forbids the network (`returnCacheDataDontLoad`) and nothing
        /// usable is stored for it. No network call was made.
        public static let notCached = Code(.notCached)
        /// The request has no URL, or one the cache cannot key.
        public static let invalidRequest = Code(.invalidRequest)
        /// The transport returned a response that is not an `HTTPURLResponse`.
        public static let notHTTPResponse = Code(.notHTTPResponse)

        public var description: String {
            switch value {
            case .notCached: "notCached"
            case .invalidRequest: "invalidRequest"
            case .notHTTPResponse: "notHTTPResponse"
            }
        }
    }

    /// What went wrong.
    public var code: Code
    /// A sentence for people, naming the request where it helps.
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "HTTPCacheError.\(code): \(message)" }
}

extension HTTPCacheError.Code {
    /// Lets a `catch HTTPCacheError.Code.notCached` clause match an ``HTTPCacheError``.
    public static func ~= (code: HTTPCacheError.Code, error: any Error) -> Bool {
        (error as? HTTPCacheError)?.code == code
    }
}

#if Server
/// A configuration value that cannot work, and why.
public struct ServerConfigurationError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
#endif

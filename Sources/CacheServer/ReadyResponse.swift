#if Server
import NIOHTTP1

/// A response whose parts are all at hand, written to the channel together, and how it answers
/// its request (``Outcome``): a stored response from memory or from a body checked whole, a
/// 304, or a prepared answer. The connection's task writes it with its ``ClientWriter``,
/// ``EventLoopHitResponder`` straight into the pipeline.
typealias ReadyResponse = (parts: [HTTPServerResponsePart], outcome: Outcome)
#endif

public import Foundation

/// An HTTP body as chunks of bytes, each produced when the iteration asks for it: what a
/// ``StreamingHTTPTransport`` returns and ``CachingHTTPClient/download(for:chunkSize:)`` hands out.
///
/// Iterate it once. An error while the body arrives or is read (a connection lost mid-body, a
/// stored body that fails its checksum) is thrown from the iteration; cancelling the iterating
/// task ends it with `CancellationError` where the source honours cancellation. Memory: the
/// chunk being handed over, and whatever the source keeps.
public struct HTTPBodyStream: AsyncSequence, Sendable {
    public typealias Element = Data

    private let iterator: @Sendable () -> AsyncIterator

    /// The chunks `chunks` yields, in order (an empty chunk is passed on as it is).
    public init<Chunks: AsyncSequence & Sendable>(_ chunks: Chunks) where Chunks.Element == Data {
        iterator = { AsyncIterator(chunks.makeAsyncIterator()) }
    }

    /// `data` as one chunk; no chunk when it is empty.
    public init(_ data: Data) {
        iterator = {
            var rest: Data? = data.isEmpty ? nil : data
            return AsyncIterator {
                defer { rest = nil }
                return rest
            }
        }
    }

    /// Chunks made by `next` until it returns `nil`; each iteration calls `makeNext` for a
    /// `next` of its own.
    init(_ makeNext: @escaping @Sendable () -> () async throws -> Data?) {
        iterator = { AsyncIterator(next: makeNext()) }
    }

    public func makeAsyncIterator() -> AsyncIterator { iterator() }

    public struct AsyncIterator: AsyncIteratorProtocol {
        private let nextChunk: () async throws -> Data?

        fileprivate init(next: @escaping () async throws -> Data?) { nextChunk = next }

        fileprivate init<Base: AsyncIteratorProtocol>(_ base: Base) where Base.Element == Data {
            var base = base
            nextChunk = { try await base.next() }
        }

        public mutating func next() async throws -> Data? { try await nextChunk() }
    }
}

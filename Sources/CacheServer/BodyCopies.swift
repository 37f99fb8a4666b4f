#if Server
import CDiskCacheSupport
import DiskCache
@_spi(CustomByteBufferAllocator) import NIOCore

/// `ByteBuffer`s that take over a body copied as it was checked (`DiskCache.BodyCopying`):
/// the copy is written to the socket as it is, and freed, through the allocator it came from
/// (which counts the copies in flight against their budget), once NIO lets go of the buffer.
enum BodyCopies {
    /// `cdiskcache_copy_allocate`'s memory, counted while allocated; a buffer that grows (none
    /// does: the pipeline only reads a body) is counted too, with no budget.
    private static let allocator = ByteBufferAllocator(
        allocate: { cdiskcache_copy_allocate($0, Int.max) },
        reallocate: { bytes, _, size in cdiskcache_copy_reallocate(bytes, size) },
        deallocate: { cdiskcache_copy_free($0) },
        copy: { destination, source, count in destination.copyMemory(from: source, byteCount: count) }
    )

    /// A buffer holding `copy` (`size` bytes), readable over `bounds`; it owns the copy now.
    static func buffer(_ copy: consuming DiskCache.CopiedBody, size: Int, _ bounds: Range<Int>) -> ByteBuffer {
        precondition(bounds.lowerBound >= 0 && bounds.upperBound <= size)
        return ByteBuffer(takingOwnershipOf: UnsafeMutableRawBufferPointer(start: copy.release(), count: size), allocator: allocator,
                          readerIndex: bounds.lowerBound, writerIndex: bounds.upperBound)
    }

    /// Bytes of copies allocated and not yet freed, in the whole process.
    static var inFlight: Int { cdiskcache_copies_in_flight() }
}
#endif

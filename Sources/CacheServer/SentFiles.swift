#if Server
import DiskCacheLocking
import NIOCore

/// The files of one connection's bodies sent with `sendfile` (a `FileRegion` written to the
/// channel). A file must stay open until its write is done, which the request's task cannot
/// see: ``ResponseWrites`` closes it then, and whatever a closing connection never wrote (a
/// write NIO dropped with the channel) is closed with ``closeAll()`` when the connection ends.
/// `NIOFileHandle` refuses a second close and a use after close, so the two may meet.
final class SentFiles: Sendable {
    private let open = PthreadMutex([ObjectIdentifier: NIOFileHandle]())
    /// The server's counts of files sent, over all connections.
    private let serverCount: PthreadMutex<SentFileCounts>

    init(counting serverCount: PthreadMutex<SentFileCounts>) { self.serverCount = serverCount }

    /// Takes `descriptor` (now owned here) as a handle for a `FileRegion`.
    func adopt(_ descriptor: Int32) -> NIOFileHandle {
        let handle = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: descriptor)
        open.withLock { $0[ObjectIdentifier(handle)] = handle }
        serverCount.withLock {
            $0.open += 1
            $0.adopted += 1
        }
        return handle
    }

    func close(_ handle: NIOFileHandle) {
        guard open.withLock({ $0.removeValue(forKey: ObjectIdentifier(handle)) }) != nil else { return }
        serverCount.withLock { $0.open -= 1 }
        try? handle.close()
    }

    func closeAll() {
        for handle in open.withLock({ Array($0.values) }) { close(handle) }
    }
}
#endif

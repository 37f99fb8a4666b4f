/// A stored body file of known size read piece by piece, hashed as it is read, with the rule every
/// streamed read of the store follows: the last piece is handed over only after the whole body
/// matched its checksum. What `DiskCache.Chunks` and `DiskCacheInspector.readValue` read with.
struct BodyPieces {
    enum Failure: Error {
        /// The file ended before the recorded size.
        case short
        /// The whole body read, and its XXH3-64 is not the recorded one.
        case mismatch
        case io(SyscallError)
    }

    /// The open file; this reader closes it (``close()``).
    private(set) var fd: Int32
    let size: Int64
    /// Bytes read so far.
    private(set) var offset: Int64 = 0
    private let checksum: UInt64?
    private let hasher: StreamingChecksum?

    /// Reads `file` from offset 0; with `checksum` nil only the length is checked. Nil (the file
    /// closed) when the checksum state cannot be allocated.
    init?(_ file: consuming OpenFile, size: Int64, checksum: UInt64?) {
        if checksum != nil {
            guard let hasher = StreamingChecksum() else { return nil }
            self.hasher = hasher
        } else {
            self.hasher = nil
        }
        self.fd = file.release()
        self.size = size
        self.checksum = checksum
    }

    /// Every byte read and checked.
    var isDone: Bool { offset == size }

    /// Fills `buffer` with the next bytes (it must be no larger than what is left; an empty
    /// buffer for an empty body); returns how many. The piece that ends the body succeeds only
    /// if the whole body matched its checksum.
    mutating func read(into buffer: UnsafeMutableRawBufferPointer) -> Result<Int, Failure> {
        switch Syscall.preadAll(fd, buffer, at: offset) {
        case .success(let count) where count == buffer.count:
            hasher?.update(UnsafeRawBufferPointer(buffer))
            offset += Int64(count)
        case .success:
            return .failure(.short)
        case .failure(let error):
            return .failure(.io(error))
        }
        if isDone, let hasher, hasher.digest != checksum {
            return .failure(.mismatch)
        }
        return .success(buffer.count)
    }

    mutating func close() {
        if fd >= 0 { Syscall.close(fd) }
        fd = -1
    }
}

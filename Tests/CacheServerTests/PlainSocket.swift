#if Server
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A blocking TCP connection to loopback with a receive timeout, for tests that hold many
/// connections open, or write without ever reading, without an event loop of their own.
final class PlainSocket: Sendable {  // one descriptor, used by one thread at a time
    let descriptor: Int32

    /// Connects to 127.0.0.1:`port`; reads wait at most `timeout` seconds. `kernelBuffers`, when
    /// given, caps the kernel's send and receive buffers of this end (in bytes, before the
    /// kernel doubles them), so that a peer that is never read from fills them soon.
    init(port: Int, timeout: Int = 120, kernelBuffers: Int32? = nil) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        var wait = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        if var size = kernelBuffers {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            setsockopt(descriptor, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(descriptor)
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .ECONNREFUSED)
        }
    }

    deinit { close(descriptor) }

    /// Writes all of `text`; false when the connection would block (`nonBlocking`) or failed.
    @discardableResult
    func send(_ text: String, nonBlocking: Bool = false) -> Bool {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | (nonBlocking ? Int32(MSG_DONTWAIT) : 0)) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }

    /// Writes what the kernel takes at once of `bytes` from `offset`, without waiting: the
    /// count written, 0 when it would block or the connection failed.
    func sendSome(_ bytes: [UInt8], from offset: Int) -> Int {
        let written = bytes[offset...].withUnsafeBytes {
            Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
        }
        return max(written, 0)
    }

    /// One whole answer (head, then `Content-Length` bytes) as text; nil when the connection
    /// ends or the timeout passes first.
    func answer() -> String? {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let text = String(decoding: received, as: UTF8.self)
            if let end = text.range(of: "\r\n\r\n") {
                let length = text[..<end.lowerBound].components(separatedBy: "\r\n")
                    .first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                if text.utf8.count >= text.utf8.distance(from: text.startIndex, to: end.upperBound) + length { return text }
            }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return nil }
            received += buffer[..<count]
        }
    }

    /// Whether the server has closed the connection (nothing waits to be read, and the end has come).
    var isClosedByPeer: Bool {
        var byte: UInt8 = 0
        let count = recv(descriptor, &byte, 1, Int32(MSG_DONTWAIT | MSG_PEEK))
        return count == 0 || (count < 0 && errno == ECONNRESET)
    }

    /// Reads until the server closes the connection; false when the timeout passed first.
    func readsToEnd() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            if count == 0 { return true }
            if count < 0 { return errno == ECONNRESET }
        }
    }
}
#endif

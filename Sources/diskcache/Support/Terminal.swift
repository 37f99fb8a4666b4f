import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Writing to the standard streams, byte for byte.
enum Terminal {
    static func write(_ text: String) {
        writeAll(STDOUT_FILENO, Array(text.utf8))
    }

    static func writeLine(_ text: String = "") {
        write(text + "\n")
    }

    static func writeError(_ text: String) {
        writeAll(STDERR_FILENO, Array(text.utf8))
    }

    /// Writes raw bytes to standard output (binary-safe).
    static func writeData(_ data: Data) throws {
        let ok = data.withUnsafeBytes { writeAll(STDOUT_FILENO, $0) }
        if !ok { throw ToolError("Could not write to standard output: \(String(cString: strerror(errno)))") }
    }

    /// Writes all of `bytes` to `fd` (standard output, or a file the tool opened).
    static func write(_ bytes: UnsafeRawBufferPointer, to fd: Int32, naming name: String) throws {
        if !writeAll(fd, bytes) { throw ToolError("Could not write to \(name): \(String(cString: strerror(errno)))") }
    }

    @discardableResult
    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { writeAll(fd, $0) }
    }

    private static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> Bool {
        guard var base = buffer.baseAddress else { return true }
        var remaining = buffer.count
        while remaining > 0 {
            let written = Foundation.write(fd, base, remaining)
            if written < 0 {
                if errno == EINTR { continue }
                return false
            }
            remaining -= written
            base += written
        }
        return true
    }

    static var standardErrorIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }

    /// Width of the terminal on standard error, or 80.
    static var standardErrorColumns: Int {
        var size = winsize()
        if ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return 80
    }

    /// A key in double quotes, with quotes, backslashes and control characters escaped, so
    /// that any key prints on one line.
    static func quoted(_ text: String) -> String {
        "\"" + escaped(text, escapingQuotes: true) + "\""
    }

    /// `text` with control characters (and optionally quotes) escaped, for one-line output.
    static func escaped(_ text: String, escapingQuotes: Bool = false) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\\" where escapingQuotes: out += "\\\\"
            case "\"" where escapingQuotes: out += "\\\""
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value) {
                    out += "\\u{" + String(scalar.value, radix: 16) + "}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }
}

import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

package struct BenchMachine: Codable {
    var processors: Int
    var cpuModel: String
    var kernel: String
    var fileSystem: String
    var memoryBytes: Int64

    package static func describe(directory: String) -> BenchMachine {
        var cpu = "unknown"
        if let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
           let line = text.split(separator: "\n").first(where: { $0.hasPrefix("model name") }),
           let colon = line.firstIndex(of: ":") {
            cpu = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var name = utsname()
        uname(&name)
        func field<T>(_ value: T) -> String {
            withUnsafeBytes(of: value) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
        }
        let kernel = "\(field(name.sysname)) \(field(name.release)) \(field(name.machine))"
        return BenchMachine(processors: Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), cpuModel: cpu, kernel: kernel,
                            fileSystem: fileSystemType(directory),
                            memoryBytes: Int64(sysconf(Int32(_SC_PHYS_PAGES))) * Int64(sysconf(Int32(_SC_PAGESIZE))))
    }

    /// The type of the filesystem holding `path`, from the longest matching mount point.
    static func fileSystemType(_ path: String) -> String {
        guard let text = try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8) else { return "unknown" }
        let real = (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? path
        var best: (mount: String, type: String, device: String) = ("", "unknown", "")
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 3 else { continue }
            let mount = String(fields[1])
            let isPrefix = real == mount || real.hasPrefix(mount == "/" ? "/" : mount + "/")
            if isPrefix, mount.count >= best.mount.count { best = (mount, String(fields[2]), String(fields[0])) }
        }
        return "\(best.type) (\(best.device) on \(best.mount))"
    }
}

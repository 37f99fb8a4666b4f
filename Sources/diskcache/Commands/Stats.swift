import ArgumentParser
import DiskCache
import Foundation

struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show entries, sizes, journal, volume space and format version (read-only).",
        discussion: """
            Logical size is the sum of the stored bodies; disk usage counts bodies, metadata \
            files and the journal at the filesystem's block size, as the cache's capacity does. \
            Redundant journal records are those a compaction would drop.
            """
    )

    @OptionGroup var cache: CacheOptions

    @Flag(help: "Print a JSON object instead of text.")
    var json = false

    func run() throws {
        let inspector = try cache.inspectSnapshot()
        let summary = inspector.summary
        if json {
            var object: [String: Any] = [
                "directory": cache.url.path,
                "formatVersion": Int(summary.formatVersion),
                "entries": Int(summary.entries),
                "logicalSize": Int(summary.logicalSize),
                "diskUsage": Int(summary.diskUsage),
                "journalSize": Int(summary.journalSize),
                "journalRecords": Int(summary.journalRecords),
                "redundantRecords": Int(summary.redundantRecords),
                "blockSize": Int(summary.blockSize),
                "truncatedTailBytes": Int(summary.truncatedTailBytes),
                "corruptRegions": Int(summary.corruptRegions),
                "wasCleanlyClosed": summary.wasCleanlyClosed,
            ]
            if let owner = summary.openBy { object["openByProcess"] = owner }
            if let volume = summary.volume {
                object["volumeAvailable"] = Int(volume.available)
                object["volumeTotal"] = Int(volume.total)
            }
            try JSONOutput.write(object)
            return
        }
        var fields = Fields()
        fields.add("Directory", cache.url.path)
        fields.add("Format version", "\(summary.formatVersion)")
        fields.add("Entries", "\(summary.entries)")
        fields.add("Logical size", Self.size(Int64(summary.logicalSize)))
        fields.add("Disk usage", Self.size(Int64(summary.diskUsage)))
        fields.add("Journal size", Self.size(Int64(summary.journalSize)))
        let records = summary.journalRecords
        let redundant = summary.redundantRecords
        let percent = records > 0 ? Int((Double(redundant) / Double(records) * 100).rounded()) : 0
        fields.add("Journal records", "\(records) (\(redundant) redundant, \(percent)%)")
        if let volume = summary.volume {
            fields.add("Volume free", "\(ByteSize.format(volume.available)) of \(ByteSize.format(volume.total))")
        } else {
            fields.add("Volume free", "unknown")
        }
        fields.add("Block size", "\(summary.blockSize)")
        if let owner = summary.openBy {
            fields.add("Open", owner.isEmpty ? "yes, in a running process"
                                : owner == "shared" ? "yes, shared by running processes" : "yes, in process \(owner)")
        } else {
            fields.add("Cleanly closed", summary.wasCleanlyClosed ? "yes" : "no")
        }
        var damage: [String] = []
        if summary.truncatedTailBytes > 0 { damage.append("\(summary.truncatedTailBytes) bytes of torn tail") }
        if summary.corruptRegions > 0 { damage.append("\(summary.corruptRegions) corrupt regions") }
        fields.add("Journal damage", damage.isEmpty ? "none" : damage.joined(separator: ", ") + " (run verify)")
        Terminal.write(fields.render())
    }

    /// "12.0 KiB (12288 bytes)"; exact bytes alone under 1 KiB.
    static func size(_ bytes: Int64) -> String {
        bytes < 1024 ? "\(bytes) bytes" : "\(ByteSize.format(bytes)) (\(bytes) bytes)"
    }
}

import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The `VERSION` file, the mark that a directory is a cache: the line `swift-disk-cache`, then
/// the format version (`"swift-disk-cache\n2\n"`), then the line `kind <name>` when the cache
/// was opened with a ``DiskCache/Configuration/kind``, then, when the application using the
/// cache set ``DiskCache/Configuration/applicationVersion``, the line `application <n>`. A
/// mark without a kind line was written before caches recorded their kind, or by a tool that
/// names none (see ``Opener``'s kind check). A directory that is not empty is only
/// opened as a cache when it carries this mark; nothing in it is created, locked or changed
/// before the mark has been read.
///
/// Caches made before the mark had a magic line hold just the version (`"2\n"`); such a file
/// is accepted when the journal beside it starts with the journal's own magic, and is
/// rewritten with the magic line once the cache is locked.
enum FormatMarker {
    static let magic = "swift-disk-cache"
    /// The names the mark is written under before it is renamed into place (`VERSION.tmp.<pid>`).
    static let temporaryPrefix = Layout.versionFileName + ".tmp"

    enum Reading: Equatable {
        /// The mark, with this format version, application version and kind.
        case marked(Int, application: Int? = nil, kind: String? = nil)
        /// A version alone, beside a journal that is ours: a cache made before the magic line.
        case legacy(Int)
        case missing
        /// Something is there but it is not the mark (the text, shortened, or why it is unreadable).
        case damaged(String)
    }

    static let applicationPrefix = "application "
    static let kindPrefix = "kind "

    static func contents(version: Int = Layout.formatVersion, application: Int? = nil, kind: String? = nil) -> [UInt8] {
        Array("\(magic)\n\(version)\n\(kind.map { "\(kindPrefix)\($0)\n" } ?? "")\(application.map { "\(applicationPrefix)\($0)\n" } ?? "")".utf8)
    }

    /// Whether `kind` may be written into the mark: 1 to 64 ASCII letters, digits, `-`, `_` and `.`.
    static func isValidKind(_ kind: String) -> Bool {
        !kind.isEmpty && kind.utf8.count <= 64 && kind.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
                return true
            default:
                return false
            }
        }
    }

    /// The name in a `kind <name>` line, else nil.
    private static func kind(line: Substring) -> String? {
        guard line.hasPrefix(kindPrefix) else { return nil }
        let name = String(line.dropFirst(kindPrefix.count))
        return isValidKind(name) ? name : nil
    }

    /// The version in an `application <n>` line (`n` one or more ASCII digits), else nil.
    private static func applicationVersion(line: Substring) -> Int? {
        guard line.hasPrefix(applicationPrefix) else { return nil }
        let digits = line.dropFirst(applicationPrefix.count)
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(digits)
    }

    /// ``read(root:)``, throwing `.newerFormat` for a mark of a format newer than this library
    /// reads (such a cache is never changed).
    static func readRefusingNewer(root: String) throws(DiskCacheError) -> Reading {
        let reading = read(root: root)
        if case .marked(let version, _, _) = reading, version > Layout.formatVersion {
            throw DiskCacheError(code: .newerFormat,
                                 message: "The cache has format version \(version); this library reads up to \(Layout.formatVersion). It was left untouched",
                                 path: root)
        }
        return reading
    }

    /// Reads the mark of the directory at `root` (never following a link at `VERSION`,
    /// never waiting on a FIFO there).
    static func read(root: String) -> Reading {
        let layout = Layout(root: root)
        switch FileIO.readAll(layout.versionFile, limit: 256, in: nil) {
        case .failure(let error) where error == .noSuchFileOrDirectory:
            return .missing
        case .failure(let error):
            return .damaged("unreadable: \(error)")
        case .success(nil):
            return .damaged("not a small regular file")
        case .success(let bytes?):
            let text = String(decoding: bytes, as: UTF8.self)
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            // magic, version, then `kind <name>` and `application <n>` (each optional, in that
            // order), then the empty rest after the last newline; any other line is not a mark.
            var extra = lines.count >= 3 ? lines[2..<(lines.count - 1)] : []
            let kind = extra.first.flatMap(kind(line:))
            if kind != nil { extra = extra.dropFirst() }
            let application = extra.first.flatMap(applicationVersion(line:))
            if application != nil { extra = extra.dropFirst() }
            if lines.count >= 3, extra.isEmpty, lines[0] == magic, lines[lines.count - 1].isEmpty,
               let version = Int(lines[1]), version >= 1, lines[1].allSatisfy(\.isASCII) {
                return .marked(version, application: application, kind: kind)
            }
            let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if let version = Int(trimmed), version >= 1, version <= Layout.flatShardsVersion,
               hasOurJournal(layout) || onlyOurNames(root) {
                return .legacy(version)
            }
            return .damaged(String(trimmed.prefix(20)).debugDescription)
        }
    }

    /// What a lost or damaged mark still says about whose cache it is: the first `kind <name>`
    /// and `application <n>` lines readable in what is left of `VERSION` or, when the two were
    /// swapped, in `LOCK` (read before anything writes it). Nil for what neither says.
    static func salvage(root: String) -> (kind: String?, application: Int?) {
        let layout = Layout(root: root)
        for path in [layout.versionFile, layout.lockFile] {
            // More than a mark's 256 bytes: bytes appended to it do not hide its lines.
            guard case .success(let bytes?) = FileIO.readAll(path, limit: 64 << 10, in: nil) else { continue }
            var kind: String?, application: Int?
            for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
                if kind == nil { kind = self.kind(line: line) }
                if application == nil { application = applicationVersion(line: line) }
            }
            if kind != nil || application != nil { return (kind, application) }
        }
        return (nil, nil)
    }

    /// Whether `journal` starts with the journal's magic.
    private static func hasOurJournal(_ layout: Layout) -> Bool {
        guard case .success(let bytes?) = FileIO.read(layout.journal, count: Journal.magic.count, in: nil) else { return false }
        return bytes.withBytes { Array($0) == Journal.magic }
    }

    /// Whether every name in the directory is one a cache uses (a format-1 cache without its
    /// journal has nothing else to go by).
    private static func onlyOurNames(_ root: String) -> Bool {
        guard case .success(let names) = Syscall.listDirectory(root) else { return false }
        return isRecognisablyACache(names, minimumShards: 1)
    }

    /// Whether a directory whose mark is missing or damaged is still recognisably a cache, so
    /// that a repair may mark it again: at least half of the 256 shard directories are there
    /// (as real directories), and every other name in it is one the cache uses.
    static func isRecognisablyACache(_ names: [(name: String, type: UInt8)], minimumShards: Int = 128) -> Bool {
        let ours: Set<String> = [Layout.versionFileName, Layout.cacheDirectoryTagFileName, Layout.lockFileName, SharedRegion.fileName,
                                 Journal.journalFileName, Journal.journalTempFileName, Journal.journalCorruptFileName,
                                 Layout.temporaryDirectoryName, Layout.retiredDirectoryName]
        var shards = 0
        for (name, type) in names {
            if Layout.isShardName(name) {
                if type == DT_DIR { shards += 1 }
            } else if !ours.contains(name) && !name.hasPrefix(temporaryPrefix) {
                return false
            }
        }
        return shards >= minimumShards
    }
}

/// Where each file of a cache lives. The names are the on-disk format's own words.
///
/// ```
/// <directory>/
///   LOCK          flock'd by the process that owns the cache; holds its pid
///   VERSION       "1\n": the cache format version
///   journal       append-only, checksummed records (see `Journal`)
///   journal.tmp   only while compacting
///   ab/cd/<32 hex digits>.meta   binary property list (see `EntryMetadata`), slot 0
///   ab/cd/<32 hex digits>.body   the raw bytes stored, when not inline, slot 0
///   ab/cd/<32 hex digits>.1.meta and .1.body: the same in slot 1
///
/// Each entry lives in one of two slots, and the journal says which. A write goes to the slot
/// the entry does not use, so the committed files are untouched until the new journal record
/// commits; only then are the old slot's files removed. A crash before the commit leaves the
/// earlier value readable.
///   tmp/          files being written, renamed into place when complete
/// ```
struct Layout: Sendable {
    static let LOCK_FILE = "LOCK"
    static let VERSION_FILE = "VERSION"
    static let TEMP_DIRECTORY = "tmp"
    static let META_SUFFIX = ".meta"
    static let BODY_SUFFIX = ".body"
    /// The cache format this version writes and the newest it opens.
    static let FORMAT_VERSION = 1

    /// The cache directory, without a trailing slash.
    let root: String

    init(root: String) {
        var root = root
        while root.count > 1 && root.hasSuffix("/") { root.removeLast() }
        self.root = root
    }

    var lockFile: String { root + "/" + Self.LOCK_FILE }
    var versionFile: String { root + "/" + Self.VERSION_FILE }
    var journal: String { root + "/" + Journal.JOURNAL_FILE }
    var journalTemp: String { root + "/" + Journal.JOURNAL_FILE_TEMP }
    var journalCorrupt: String { root + "/" + Journal.JOURNAL_FILE_CORRUPT }
    var temp: String { root + "/" + Self.TEMP_DIRECTORY }

    /// "ab" and "ab/cd" for a hash whose name starts "abcd".
    func shardDirectories(_ hash: KeyHash) -> (outer: String, inner: String) {
        let name = hash.hexName
        let outer = root + "/" + name.prefix(2)
        return (outer, outer + "/" + name.dropFirst(2).prefix(2))
    }

    static let SLOT_1_MARK = ".1"

    func metaFile(_ hash: KeyHash, slot: UInt8) -> String { entryFile(hash, slot: slot, suffix: Self.META_SUFFIX) }

    func bodyFile(_ hash: KeyHash, slot: UInt8) -> String { entryFile(hash, slot: slot, suffix: Self.BODY_SUFFIX) }

    private func entryFile(_ hash: KeyHash, slot: UInt8, suffix: String) -> String {
        let name = hash.hexName
        let mark = slot == 0 ? "" : Self.SLOT_1_MARK
        return "\(root)/\(name.prefix(2))/\(name.dropFirst(2).prefix(2))/\(name)\(mark)\(suffix)"
    }

    func tempFile(_ name: String) -> String { temp + "/" + name }

    /// True for the two-hex-digit names of shard directories.
    static func isShardName(_ name: String) -> Bool {
        name.utf8.count == 2 && name.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }
}

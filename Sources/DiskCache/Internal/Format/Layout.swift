/// Where each file of a cache lives. The names are the on-disk format's own words.
///
/// ```
/// <directory>/
///   LOCK          flock'd by the process that owns the cache; holds its pid
///   VERSION       "2\n": the cache format version
///   CACHEDIR.TAG  tells backup tools to skip the cache (bford.info/cachedir), made with it
///   journal       append-only, checksummed records (see `Journal`)
///   journal.tmp   only while compacting
///   tmp/          emptied at every open: `removeAll`'s trash, bodies being streamed or
///                 copied in (`DiskCache+Streaming.swift`), bodies handed out as files
///                 (`DiskCache+StreamingReads.swift`)
///   00/ … ff/     256 shard directories, all made when the cache is created
///   ab/<32 hex digits>.meta     binary property list (see `EntryMetadata`), slot 0; holds
///                               the body too when it is at most the inline threshold
///   ab/<32 hex digits>.body     the raw bytes stored, when not inline, slot 0
///   ab/<32 hex digits>.1.meta and .1.body: the same in slot 1
/// ```
///
/// Each entry lives in one of two slots, and the journal says which. A write creates its files
/// directly in the slot the entry does not use, so the committed files are untouched until the
/// new journal record commits; only then are the old slot's files removed. A crash before the
/// commit leaves the earlier value readable, and files no record vouches for.
///
/// Format version 1 had two levels of shards made on demand (`ab/cd/<hash>.meta`); a cache of
/// that format is migrated when it is opened for writing (see `Opener`), and read as it is by
/// `DiskCacheInspector`.
struct Layout: Sendable {
    static let lockFileName = "LOCK"
    static let versionFileName = "VERSION"
    static let cacheDirectoryTagFileName = "CACHEDIR.TAG"
    /// `CACHEDIR.TAG`'s contents: the specification's signature line, then comments.
    static let cacheDirectoryTag = Array("""
        Signature: 8a477f597d28d172789f06886806bc55
        # This file is a cache directory tag created by swift-disk-cache.
        # For information about cache directory tags, see https://bford.info/cachedir/

        """.utf8)
    static let temporaryDirectoryName = "tmp"
    /// Where `.meta` files wait to be reused (``RetiredFiles``).
    static let retiredDirectoryName = "retired"
    static let metaSuffix: StaticString = ".meta"
    static let bodySuffix: StaticString = ".body"
    static let slot1Mark = ".1"
    /// The cache format this version writes and the newest it opens.
    static let formatVersion = 2
    /// The first format with one level of 256 shard directories made up front.
    static let flatShardsVersion = 2
    /// Every shard directory's name, "00" through "ff".
    static let shardNames: [String] = (0..<256).map { String(format2Hex: $0) }

    /// The cache directory, without a trailing slash.
    let root: String
    /// The format whose shape the paths follow.
    let version: Int
    /// The cache directory held open, when this layout is a cache's (not just paths).
    private let anchor: CacheDirectory?

    init(root: String, version: Int = Layout.formatVersion) {
        var root = root
        while root.count > 1 && root.hasSuffix("/") { root.removeLast() }
        self.root = root
        self.version = version
        self.anchor = nil
    }

    /// The layout of the cache in the open `directory`.
    init(directory: CacheDirectory, version: Int = Layout.formatVersion) {
        self.root = directory.path
        self.version = version
        self.anchor = directory
    }

    /// The same files in the shape of another format version.
    func withVersion(_ version: Int) -> Layout {
        if let anchor { return Layout(directory: anchor, version: version) }
        return Layout(root: root, version: version)
    }

    /// Where every call that touches a file inside the cache goes (see ``CacheDirectory``).
    /// Only a layout made from an open directory has one.
    var directory: CacheDirectory {
        guard let anchor else { preconditionFailure("A layout made of paths only cannot reach the cache's files") }  // a caller's bug, whatever the files hold
        return anchor
    }

    var lockFile: String { root + "/" + Self.lockFileName }
    var versionFile: String { root + "/" + Self.versionFileName }
    var cacheDirectoryTag: String { root + "/" + Self.cacheDirectoryTagFileName }
    var journal: String { root + "/" + Journal.journalFileName }
    var journalTemp: String { root + "/" + Journal.journalTempFileName }
    var journalCorrupt: String { root + "/" + Journal.journalCorruptFileName }
    var temp: String { root + "/" + Self.temporaryDirectoryName }
    var retired: String { root + "/" + Self.retiredDirectoryName }

    /// The directory holding the entry's files: "ab" (or "ab/cd" in format 1).
    func shardDirectory(_ hash: KeyHash) -> String {
        let name = hash.hexName
        if version >= Self.flatShardsVersion { return root + "/" + name.prefix(2) }
        return root + "/" + name.prefix(2) + "/" + name.dropFirst(2).prefix(2)
    }

    func metaFile(_ hash: KeyHash, slot: UInt8) -> String { entryFile(hash, slot: slot, suffix: Self.metaSuffix) }

    func bodyFile(_ hash: KeyHash, slot: UInt8) -> String { entryFile(hash, slot: slot, suffix: Self.bodySuffix) }

    /// Built in one allocation: every write asks for one.
    private func entryFile(_ hash: KeyHash, slot: UInt8, suffix: StaticString) -> String {
        let relative = relativeEntryLength(slot: slot, suffix: suffix)
        let length = root.utf8.count + 1 + relative
        return String(unsafeUninitializedCapacity: length) { buffer in
            var i = 0
            for byte in root.utf8 { buffer[i] = byte; i += 1 }
            buffer[i] = UInt8(ascii: "/")
            writeRelativeEntryFile(hash, slot: slot, suffix: suffix, into: buffer.baseAddress! + i + 1)
            return length
        }
    }

    /// The length of an entry file's path inside the cache directory.
    private func relativeEntryLength(slot: UInt8, suffix: StaticString) -> Int {
        let levels = version >= Self.flatShardsVersion ? 1 : 2
        return 3 * levels + 32 + (slot == 0 ? 0 : 2) + suffix.utf8CodeUnitCount
    }

    /// Writes an entry file's path inside the cache directory (`ab/<32 hex digits>[.1].meta`),
    /// ``relativeEntryLength(slot:suffix:)`` bytes, at `buffer`.
    private func writeRelativeEntryFile(_ hash: KeyHash, slot: UInt8, suffix: StaticString, into buffer: UnsafeMutablePointer<UInt8>) {
        let levels = version >= Self.flatShardsVersion ? 1 : 2
        var i = 0
        for level in 0..<levels {
            KeyHash.hexDigits(hash.high, from: 2 * level, count: 2, into: UnsafeMutableBufferPointer(start: buffer + i, count: 2))
            buffer[i + 2] = UInt8(ascii: "/")
            i += 3
        }
        KeyHash.hexDigits(hash.high, from: 0, count: 16, into: UnsafeMutableBufferPointer(start: buffer + i, count: 16))
        KeyHash.hexDigits(hash.low, from: 0, count: 16, into: UnsafeMutableBufferPointer(start: buffer + i + 16, count: 16))
        i += 32
        if slot != 0 {
            buffer[i] = UInt8(ascii: ".")
            buffer[i + 1] = UInt8(ascii: "1")
            i += 2
        }
        suffix.withUTF8Buffer { suffix in (buffer + i).update(from: suffix.baseAddress!, count: suffix.count) }
    }

    /// Opens an entry's metadata (`body: false`) or body file to read, its path inside the
    /// cache directory built on the stack: what every read does, with no allocation for the
    /// path (the full path is made only for an observer).
    func openEntryFileToRead(_ hash: KeyHash, slot: UInt8, body: Bool) -> Result<OpenFile, SyscallError> {
        let suffix = body ? Self.bodySuffix : Self.metaSuffix
        let length = relativeEntryLength(slot: slot, suffix: suffix)
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: length + 1) { buffer in
            writeRelativeEntryFile(hash, slot: slot, suffix: suffix, into: buffer.baseAddress!)
            buffer[length] = 0
            return buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: length + 1) { relative in
                directory.open(relative: relative, FileIO.readFlags) { entryFile(hash, slot: slot, suffix: suffix) }
            }
        }
    }

    func tempFile(_ name: String) -> String { temp + "/" + name }

    /// True for the two-hex-digit names of shard directories.
    static func isShardName(_ name: String) -> Bool {
        name.utf8.count == 2 && name.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }
}

extension String {
    /// Two lowercase hex digits.
    init(format2Hex value: Int) {
        let digits = Array("0123456789abcdef")
        self = String([digits[(value >> 4) & 0xF], digits[value & 0xF]])
    }
}

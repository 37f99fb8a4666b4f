#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Checks a cache's files against its index: what `verify` reports and `verify --repair` fixes.
struct Verifier {
    let layout: Layout
    let entries: [(KeyHash, IndexEntry)]
    let hasher: KeyHasher
    /// For a cache that is open (and may change while it is read): asked before a finding about
    /// an entry or a file is kept. Nil for a cache nobody writes meanwhile.
    var settle: Settle? = nil
    /// A `journal.tmp` may be a compaction running in another process (an open cache read
    /// without its locks): then it is no finding.
    var compactionMayRun = false
    /// Instances have the cache open in shared mode: `SHARED` must be the page they share.
    var isOpenShared = false

    /// What a finding about a cache that changes meanwhile is checked against at the end,
    /// once every entry and file was looked at.
    struct Settle {
        /// Whether the index still holds this entry: one replaced or removed while it was read
        /// is no finding.
        var isCurrent: (KeyHash, IndexEntry) -> Bool
        /// Whether the file is still there with no entry vouching for it: one a store
        /// committed, or removed, while the shards were listed is no finding.
        var isOrphan: (KeyHash, UInt8, ShardScanner.FileKind, String) -> Bool
        /// Called once before the two above, after the whole cache was read, with the paths of
        /// the files that looked like orphans (where a reader without the cache's locks takes
        /// its fresh looks at the journal and those files: one set for all the findings, not one
        /// per finding).
        var prepare: (_ orphanPaths: [String]) -> Void = { _ in }
        /// Of the files ``isOrphan`` kept, those that are orphans still, settled all together
        /// (a reader that can take the writers' locks takes them once for the lot); by default
        /// all of them.
        var confirmOrphans: (_ orphans: [Orphan]) -> [Orphan] = { $0 }
    }

    typealias Orphan = (hash: KeyHash, slot: UInt8, kind: ShardScanner.FileKind, path: String)

    struct Findings {
        var problems: [DiskCache.Problem] = []
        /// Entries whose files do not check out.
        var badEntries: [(KeyHash, IndexEntry)] = []
        /// Entry files no index entry vouches for.
        var orphans: [(hash: KeyHash, slot: UInt8, kind: ShardScanner.FileKind, path: String)] = []
        /// Paths whose mode is not the one the store gives them, with that mode.
        var permissions: [(path: String, expected: mode_t)] = []
        /// The cache's own directories (shards, `tmp/`) that are missing or not real directories.
        var brokenDirectories: [String] = []
        /// `SHARED`, when something that is not a regular file is there.
        var brokenSharedPage: String?
        /// A `journal.tmp` no compaction is writing.
        var leftovers: [String] = []
        var entriesChecked = 0
        var bytesChecked: Int64 = 0
    }

    func run(progress: ((Int, Int) -> Void)?) -> Findings {
        var findings = Findings()
        let total = entries.count
        // Candidates first; what changed meanwhile is set aside at the end (see `Settle`).
        var badEntries: [(problem: DiskCache.Problem, hash: KeyHash, entry: IndexEntry)] = []
        for (number, (hash, entry)) in entries.enumerated() {
            if let problem = check(hash, entry, findings: &findings) { badEntries.append((problem, hash, entry)) }
            findings.entriesChecked += 1
            if let progress, number % 64 == 0 || number == total - 1 { progress(number + 1, total) }
        }
        var orphans: [Orphan] = []
        let vouched = Dictionary(entries, uniquingKeysWith: { a, _ in a })
        ShardScanner(layout: layout).forEachEntryFile { hash, slot, kind, path in
            if !(vouched[hash]?.vouches(forSlot: slot, kind: kind) ?? false) {
                orphans.append((hash, slot, kind, path))
            }
            return true
        }
        if let settle, !badEntries.isEmpty || !orphans.isEmpty { settle.prepare(orphans.map(\.path)) }
        for bad in badEntries where settle?.isCurrent(bad.hash, bad.entry) ?? true {
            findings.problems.append(bad.problem)
            findings.badEntries.append((bad.hash, bad.entry))
        }
        var kept = orphans.filter { settle?.isOrphan($0.hash, $0.slot, $0.kind, $0.path) ?? true }
        if let settle, !kept.isEmpty { kept = settle.confirmOrphans(kept) }
        for orphan in kept {
            findings.orphans.append(orphan)
            findings.problems.append(DiskCache.Problem(kind: .orphanFile, path: orphan.path, key: nil,
                                                       detail: "no journal record vouches for this file"))
        }
        checkStructure(findings: &findings)
        // The cache directory itself may be reached through a symbolic link: check its target.
        checkMode(layout.root, expected: 0o700, followingLinks: true, findings: &findings)
        if !findings.brokenDirectories.contains(layout.temp) { checkMode(layout.temp, expected: 0o700, findings: &findings) }
        return findings
    }

    /// The cache's own directories must be real directories: a link in place of a shard or
    /// `tmp/` is never followed (so every write into it fails), and so is a file there. A
    /// `journal.tmp` is only there while a compaction writes it, which a verify never overlaps
    /// (in shared mode it runs as the one housekeeper, which every compaction must be).
    private func checkStructure(findings: inout Findings) {
        guard layout.version >= Layout.flatShardsVersion else { return }  // format 1 makes shards on demand
        let directory = layout.directory
        for name in Layout.shardNames + [Layout.temporaryDirectoryName] {
            let path = layout.root + "/" + name
            let problem: DiskCache.Problem
            switch directory.lstat(path) {
            case .success(let info) where info.st_mode & S_IFMT == S_IFDIR:
                continue
            case .success(let info) where info.st_mode & S_IFMT == S_IFLNK:
                problem = DiskCache.Problem(kind: .symbolicLink, path: path, key: nil,
                                            detail: "a symbolic link where a directory of the cache belongs (never followed: writes into it fail)")
            case .success:
                problem = DiskCache.Problem(kind: .wrongFileType, path: path, key: nil,
                                            detail: "a file where a directory of the cache belongs (writes into it fail)")
            case .failure:
                problem = DiskCache.Problem(kind: .missingDirectory, path: path, key: nil,
                                            detail: "a directory of the cache is missing")
            }
            findings.problems.append(problem)
            findings.brokenDirectories.append(path)
        }
        checkSharedPage(findings: &findings)
        if !compactionMayRun && directory.exists(layout.journalTemp) {
            findings.problems.append(DiskCache.Problem(kind: .temporaryFile, path: layout.journalTemp, key: nil,
                                                       detail: "left by an interrupted compaction (it blocks the next one)"))
            findings.leftovers.append(layout.journalTemp)
        }
    }

    /// `SHARED` must be a regular file (or absent: a cache never shared has none), and while
    /// instances share the cache, the page they share (see ``SharedRegion/isShared(_:)``).
    private func checkSharedPage(findings: inout Findings) {
        let path = layout.root + "/" + SharedRegion.fileName
        switch layout.directory.lstat(path) {
        case .success(let info) where info.st_mode & S_IFMT == S_IFREG:
            guard isOpenShared, !SharedRegion.isShared(layout) else { return }
            findings.problems.append(DiskCache.Problem(kind: .damagedSharedPage, path: path, key: nil,
                                                       detail: "not the page the instances that have the cache open share (overwritten, cut short, or replaced under them): their writes fail until they all close, and the next open writes it afresh"))
        case .success(let info):
            let what = info.st_mode & S_IFMT == S_IFLNK ? "a symbolic link" : info.st_mode & S_IFMT == S_IFDIR ? "a directory" : "a special file"
            findings.problems.append(DiskCache.Problem(kind: info.st_mode & S_IFMT == S_IFLNK ? .symbolicLink : .wrongFileType, path: path, key: nil,
                                                       detail: "\(what) where the shared page belongs (never followed: no shared open succeeds until it is moved aside, which the next shared open with no instance open, or a repair, does)"))
            findings.brokenSharedPage = path
        case .failure:
            guard isOpenShared else { return }
            findings.problems.append(DiskCache.Problem(kind: .damagedSharedPage, path: path, key: nil,
                                                       detail: "missing while instances have the cache open: their writes fail until they all close, and the next open writes it afresh"))
        }
    }

    private func checkMode(_ path: String, expected: mode_t, followingLinks: Bool = false, findings: inout Findings) {
        var info = stat()
        if followingLinks {
            guard stat(path, &info) == 0 else { return }
        } else {
            guard case .success(let found) = layout.directory.lstat(path) else { return }
            info = found
        }
        let mode = info.st_mode & 0o777
        if mode != expected {
            findings.permissions.append((path, expected))
            findings.problems.append(DiskCache.Problem(kind: .wrongPermissions, path: path, key: nil,
                                                       detail: "mode \(String(mode, radix: 8)), expected \(String(expected, radix: 8))"))
        }
    }

    /// Checks one entry; returns its problem, if any.
    private func check(_ hash: KeyHash, _ entry: IndexEntry, findings: inout Findings) -> DiskCache.Problem? {
        let metaPath = layout.metaFile(hash, slot: entry.slot)
        func problem(_ kind: DiskCache.Problem.Kind, _ path: String, key: String? = nil, _ detail: String) -> DiskCache.Problem {
            DiskCache.Problem(kind: kind, path: path, key: key, detail: detail)
        }
        guard case .success(let metaInfo) = layout.directory.lstat(metaPath) else {
            return problem(.missingMetadata, metaPath, "the metadata file is missing")
        }
        if metaInfo.st_mode & S_IFMT == S_IFLNK {
            return problem(.symbolicLink, metaPath, "a symbolic link where an entry file belongs")
        }
        guard case .success(let bytes?) = FileIO.readAll(metaPath, limit: IndexEntry.maximumMetaSize, in: layout.directory),
              let meta = bytes.withUnsafeBytes({ EntryMetadata.decode($0) }) else {
            return problem(.unreadableMetadata, metaPath, "the metadata file is not a readable property list")
        }
        checkMode(metaPath, expected: 0o600, findings: &findings)
        guard hasher.hash(meta.key) == hash else {
            return problem(.keyMismatch, metaPath, key: meta.key, "the key does not hash to the file's name")
        }
        guard meta.checksum == entry.checksum, meta.size == entry.size, (meta.inlineBody != nil) == entry.isInline,
              bytes.count == Int(entry.metaSize) else {
            return problem(.metadataMismatch, metaPath, key: meta.key, "the metadata is not what the journal recorded")
        }
        if let inline = meta.inlineBody {
            findings.bytesChecked += Int64(inline.count)
            guard inline.withUnsafeBytes({ Checksum.xxh3($0) }) == meta.checksum else {
                return problem(.checksumMismatch, metaPath, key: meta.key, "the inline body fails its checksum")
            }
            return nil
        }
        let bodyPath = layout.bodyFile(hash, slot: entry.slot)
        guard case .success(let bodyInfo) = layout.directory.lstat(bodyPath) else {
            return problem(.missingBody, bodyPath, key: meta.key, "the body file is missing")
        }
        if bodyInfo.st_mode & S_IFMT == S_IFLNK {
            return problem(.symbolicLink, bodyPath, key: meta.key, "a symbolic link where an entry file belongs")
        }
        guard Int64(bodyInfo.st_size) == meta.size else {
            return problem(.bodySizeMismatch, bodyPath, key: meta.key, "the body has \(bodyInfo.st_size) bytes, expected \(meta.size)")
        }
        checkMode(bodyPath, expected: 0o600, findings: &findings)
        guard case .success(let checksum?) = FileIO.checksum(bodyPath, count: Int(meta.size), in: layout.directory) else {
            return problem(.missingBody, bodyPath, key: meta.key, "the body file cannot be read")
        }
        findings.bytesChecked += meta.size
        guard checksum == meta.checksum else {
            return problem(.checksumMismatch, bodyPath, key: meta.key, "the body fails its checksum")
        }
        return nil
    }
}

import CDiskCacheSupport
import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Opening a cache directory: checks, locking, cleanup, and rebuilding the index.
struct Opener {
    let layout: Layout
    /// The body files the cache will keep mapped: told of each body file the directory removes.
    let mappedBodies = MappedBodies()
    let configuration: DiskCache.Configuration
    /// True when the directory was missing or empty: a new cache is made in it.
    let isNew: Bool
    var logger: Logger { configuration.logger }

    /// Checks the directory (made when missing; refused unless empty or marked as a cache: see
    /// ``FormatMarker``) and opens it. Nothing in a directory that is not a cache is touched.
    init(path: String, configuration: DiskCache.Configuration) throws(DiskCacheError) {
        let root = Layout(root: path).root
        if let kind = configuration.kind, !FormatMarker.isValidKind(kind) {
            throw DiskCacheError(code: .invalidArgument,
                                 message: "The cache's kind \(kind.debugDescription) is not 1 to 64 ASCII letters, digits, '-', '_' or '.'")
        }
        self.isNew = try Self.prepareDirectory(root)
        // A cache of another kind is refused before anything in it is created or locked (and
        // again under the cache's locks, by `checkVersion`).
        if !isNew, case .marked(_, let application, let kind) = FormatMarker.read(root: root) {
            try Self.checkKind(found: kind, application: application, configuration, path: root)
        }
        let directory = try CacheDirectory.open(root, bodyRemovals: mappedBodies).get(orThrow: "open the cache directory", path: root)
        self.layout = Layout(directory: directory)
        self.configuration = configuration
        // The mark goes first, before `LOCK` or anything else is made: a new cache interrupted
        // at any point is a directory that is empty, holds only a temporary mark, or is marked.
        if isNew {
            try Self.writeVersion(layout, application: configuration.applicationVersion, kind: configuration.kind)
            try Self.writeCacheDirectoryTag(layout)
        }
        #if canImport(Darwin)
        try Self.applyApplePlatformAttributes(layout, configuration: configuration)
        #endif
    }

    struct Opened {
        var layout: Layout
        var blockSize: Int64
        /// `LOCK` and the cache directory, each `flock`ed: closing them releases the cache.
        var locks: [SharedDescriptor]
        var state: CacheState
        var needsOrphanScan: Bool
        /// The application version the cache's mark names (``DiskCache/Configuration/applicationVersion``).
        var applicationVersion: Int?
        /// The kind the cache's mark names (``DiskCache/Configuration/kind``), after this open
        /// adopted a mark that had none.
        var kind: String?
    }

    func open() throws(DiskCacheError) -> Opened {
        var sharing = configuration.sharing
        if sharing == .shared, let kind = Self.networkFilesystem(layout.root, probe: configuration.filesystemTypeProbe) {
            logger.notice("The cache is on a network filesystem, where locks between machines cannot be trusted; opened exclusively",
                          metadata: ["path": "\(layout.root)", "filesystem": "\(kind)"])
            sharing = .exclusive
        }
        guard sharing == .shared else { return try recover(locks: Self.takeLocks(layout), region: nil) }
        let joined = try Self.joinShared(layout, lockTimeout: configuration.lockTimeout, logger: logger)
        // Opens (and closes) happen one at a time: until this one is done, no other starts.
        defer { joined.region.lock(.opening, .unlock) }
        if joined.alone {
            return try recover(locks: [joined.directory], region: joined.region, sharedPageMovedAside: joined.movedAside)
        }
        return try join(locks: [joined.directory], region: joined.region)
    }

    /// Opening a cache other instances have open (shared mode): nothing in the directory is
    /// changed (the first instance recovered it); the journal is read holding the append lock,
    /// so that no record is half written and no compaction swaps files meanwhile.
    private func join(locks: [SharedDescriptor], region: SharedRegion) throws(DiskCacheError) -> Opened {
        let mark = try checkVersion()
        let blockSize = Self.blockSize(layout)
        let (index, records, journal, generation, carriesFiles) = try region.withLock(.append) { () throws(DiskCacheError) in
            guard case .valid(let bytes) = try readJournal() else {
                throw DiskCacheError(code: .ioFailure,
                                     message: "The journal is missing or unreadable while other instances have the cache open; close them, and the next open rebuilds it",
                                     path: layout.journal)
            }
            let (index, summary) = Index.replaying(bytes, blockSize: blockSize, policy: configuration.evictionPolicy)
            let journal = SharedDescriptor(try layout.directory.open(layout.journal, O_RDWR | O_NOFOLLOW | O_NONBLOCK)
                .get(orThrow: "open the journal", path: layout.journal))
            // Up to the last whole record: bytes after it are a dead appender's, which the
            // next append writes over.
            return (index, summary.records, (journal, Int64(summary.validLength)), try region.counter(.generation),
                    summary.carriedFiles > 0)
        }
        region.add(.openCount, 1)
        var state = CacheState(index: index, journal: journal.0, journalLength: journal.1,
                               reservedEnd: journal.1, journalRecords: records)
        state.journalGeneration = generation
        state.journalCarriesFiles = carriesFiles
        state.shared = SharedJournal(region: region, layout: layout, configuration: configuration)
        state.statistics.recovery.recordsReplayed = records
        state.adopt(configuration)
        return Opened(layout: layout.withVersion(Layout.formatVersion), blockSize: blockSize, locks: locks, state: state,
                      needsOrphanScan: false, applicationVersion: mark.application, kind: mark.kind)
    }

    private static func blockSize(_ layout: Layout) -> Int64 {
        if case .success(let info) = Syscall.statvfs(layout.root), info.f_frsize > 0 { return Int64(info.f_frsize) }
        return 4096
    }

    /// Opening a cache no other instance has open: checks the mark, then in four steps cleans up
    /// after the last session, loads the index (replaying the journal and cutting a torn tail,
    /// or scanning the entry files), completes it, and starts the state (in shared mode writing
    /// the shared page afresh).
    private func recover(locks: [SharedDescriptor], region: SharedRegion?, sharedPageMovedAside: Bool = false) throws(DiskCacheError) -> Opened {
        let mark = try checkVersion()
        // Read (and check the version of) the journal before anything in the directory changes,
        // so that a cache of a newer format is left as it was.
        var contents = try readJournal()
        var recovery = DiskCache.Recovery()
        recovery.sharedPageMovedAside = sharedPageMovedAside
        try clearLastSession(version: mark.format, contents: &contents, recovery: &recovery)
        let blockSize = Self.blockSize(layout)
        var loaded = try loadIndex(contents, blockSize: blockSize, recovery: &recovery)
        try completeIndex(&loaded, mark: mark, recovery: &recovery)
        let state = try startState(loaded, region: region, recovery: recovery)
        return Opened(layout: layout.withVersion(Layout.formatVersion), blockSize: blockSize, locks: locks, state: state,
                      needsOrphanScan: loaded.needsOrphanScan, applicationVersion: mark.application, kind: mark.kind)
    }

    /// What ``loadIndex(_:blockSize:recovery:)`` found.
    private struct Loaded {
        var index: Index
        var records: Int
        var needsOrphanScan = false
        var carriesFiles = false
        /// After an unclean shutdown: the journal, and the PUT+FILE records in it to check.
        var carriedFilesToCheck: (journal: [UInt8], offsets: [Int])?
    }

    /// Step 1: removes what the last session left (`tmp/`, `.meta` files retired by instances
    /// that ended without closing, temporary marks, a compaction's unfinished journal), empties
    /// a format-1 cache whose journal cannot say which files are entries, and makes the shards.
    private func clearLastSession(version: Int, contents: inout JournalContents,
                                  recovery: inout DiskCache.Recovery) throws(DiskCacheError) {
        recovery.temporaryFilesRemoved = try cleanTemporaryFiles()
        layout.directory.removeTree(layout.retired)
        if case .success(let names) = layout.directory.listDirectory(layout.root) {
            for (name, _) in names where name.hasPrefix(FormatMarker.temporaryPrefix) {
                layout.directory.removeTree(layout.root + "/" + name)
            }
        }
        _ = layout.directory.unlink(layout.journalTemp)
        if version < Layout.flatShardsVersion, case .valid = contents {
            // Moved into the flat shards by `completeIndex`, once the journal says which files are entries.
        } else if version < Layout.flatShardsVersion {
            // A format-1 cache without a readable journal: nothing says which of its files are
            // entries. It is a cache: its files go, and it starts empty in the current format.
            logger.warning("Discarded a format-1 cache whose journal was missing or unreadable", metadata: ["path": "\(layout.root)"])
            removeFormat1Shards()
            contents = .missing
        }
        let movedAside = try Self.makeShards(layout)
        if movedAside > 0 {
            logger.warning("Moved aside files or links found in place of shard directories", metadata: ["count": "\(movedAside)"])
        }
    }

    /// Step 2: the index, from the journal's records (``replayJournal(_:blockSize:recovery:)``)
    /// or, with no journal to read (an unreadable one moved aside), from the entry files.
    private func loadIndex(_ contents: JournalContents, blockSize: Int64,
                           recovery: inout DiskCache.Recovery) throws(DiskCacheError) -> Loaded {
        switch contents {
        case .missing:
            let (index, records) = try rebuildByScan(blockSize: blockSize, recovery: &recovery)
            return Loaded(index: index, records: records)
        case .unreadable:
            logger.warning("The journal's header is unreadable; moved it aside and rebuilding from the entry files",
                           metadata: ["path": "\(layout.journal)"])
            layout.directory.removeTree(layout.journalCorrupt)
            _ = layout.directory.rename(layout.journal, layout.journalCorrupt)
            let (index, records) = try rebuildByScan(blockSize: blockSize, recovery: &recovery)
            return Loaded(index: index, records: records)
        case .valid(let bytes):
            return try replayJournal(bytes, blockSize: blockSize, recovery: &recovery)
        }
    }

    /// Step 2 with a journal: replays it, keeping every record that checks out; cuts a torn
    /// tail and a final CLOSE record; upgrades an older header.
    private func replayJournal(_ bytes: [UInt8], blockSize: Int64, recovery: inout DiskCache.Recovery) throws(DiskCacheError) -> Loaded {
        var carried = Journal.CarriedFiles()
        let (index, summary) = Index.replaying(bytes, blockSize: blockSize, policy: configuration.evictionPolicy, carried: &carried)
        var loaded = Loaded(index: index, records: summary.records)
        recovery.recordsReplayed = summary.records
        recovery.truncatedBytes = summary.truncatedBytes
        recovery.corruptRegions = summary.corruptRegions
        recovery.wasUncleanShutdown = !summary.endedCleanly
        if summary.truncatedBytes > 0 || summary.corruptRegions > 0 {
            logger.warning("The journal was damaged; kept every record that checks out",
                           metadata: ["truncatedBytes": "\(summary.truncatedBytes)",
                                      "corruptRegions": "\(summary.corruptRegions)",
                                      "corruptBytes": "\(summary.corruptBytes)"])
        }
        // Cut a torn tail; and cut a final CLOSE record too, so that if this session dies
        // the journal does not claim a clean shutdown and the next open looks for orphans.
        let keep = summary.endedCleanly ? summary.lastRecordStart : summary.validLength
        if keep < bytes.count {
            let journal = try layout.directory.open(layout.journal, O_WRONLY | O_NOFOLLOW | O_NONBLOCK).get(orThrow: "open the journal", path: layout.journal)
            try Syscall.ftruncate(journal.fd, Int64(keep)).get(orThrow: "cut the journal's tail", path: layout.journal)
            if summary.endedCleanly {
                loaded.records -= 1
                // Durably: a power cut must not bring the CLOSE record back, or files this
                // session writes but never commits would outlive the next open unscanned.
                try Syscall.fsync(journal.fd).get(orThrow: "sync the journal", path: layout.journal)
            }
        }
        loaded.needsOrphanScan = !summary.endedCleanly || summary.corruptRegions > 0
        loaded.carriesFiles = summary.carriedFiles > 0
        if !summary.endedCleanly && loaded.carriesFiles { loaded.carriedFilesToCheck = (bytes, carried.uncovered) }
        if bytes.withUnsafeBytes({ Journal.version(of: $0) }) < Journal.journalVersion {
            try upgradeJournalHeader()
        }
        return loaded
    }

    /// Step 3: the index made whole: a format-1 cache's files moved into the flat shards, and
    /// after an unclean shutdown the files PUT+FILE records carry restored where they are missing.
    private func completeIndex(_ loaded: inout Loaded, mark: (format: Int, application: Int?, kind: String?),
                               recovery: inout DiskCache.Recovery) throws(DiskCacheError) {
        loaded.index.shrinkToFit()
        if mark.format < Layout.flatShardsVersion { try migrateFromFormat1(loaded.index, application: mark.application, kind: mark.kind) }
        if let carried = loaded.carriedFilesToCheck {
            recovery.filesRestoredFromJournal = restoreCarriedFiles(carried.journal, at: carried.offsets, index: loaded.index)
        }
    }

    /// Step 4: the journal opened for appends and the state made; in shared mode the shared
    /// page written afresh, as the first instance's.
    private func startState(_ loaded: Loaded, region: SharedRegion?, recovery: DiskCache.Recovery) throws(DiskCacheError) -> CacheState {
        let journal = SharedDescriptor(try layout.directory.open(layout.journal, O_RDWR | O_NOFOLLOW | O_NONBLOCK)
            .get(orThrow: "open the journal", path: layout.journal))
        let status = try Syscall.fstat(journal.fd).get(orThrow: "read the journal's size", path: layout.journal)
        let length = status.st_size
        var state = CacheState(index: loaded.index, journal: journal, journalLength: Int64(length),
                               reservedEnd: Int64(length), journalRecords: loaded.records)
        if let region {
            region[.base] = UInt64(length)
            region[.baseRecords] = UInt64(loaded.records)
            region[.end] = UInt64(length)
            region[.writtenAhead] = UInt64(length)
            region[.openCount] = 1
            region[.flags] = loaded.needsOrphanScan ? SharedRegion.flagOrphanScanDue : 0
            region.nameJournal(status)
            state.shared = SharedJournal(region: region, layout: layout, configuration: configuration)
        }
        state.statistics.recovery = recovery
        state.journalCarriesFiles = loaded.carriesFiles
        state.orphanScanPending = loaded.needsOrphanScan
        state.adopt(configuration)
        return state
    }
}

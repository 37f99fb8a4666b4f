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

// The journal at open: read, its header upgraded, the files its PUT+FILE records carry restored,
// or the index rebuilt from the entry files when it is missing or unreadable.

extension Opener {
    enum JournalContents {
        case missing
        case unreadable
        case valid([UInt8])
    }

    /// After an unclean shutdown: rewrites the `.meta` files that the PUT+FILE records at
    /// `offsets` (those no checkpoint covers, ``Journal/CarriedFiles/uncovered``) carry, for the
    /// entries they still commit (a later PUT, REMOVE or CLEAR left another entry, or none, in
    /// the index), where the file differs from the record (a power cut took the unsynced file
    /// or part of it); each rewritten file, then its shard directory, is synced. Returns how
    /// many were rewritten. A file that cannot be written is left for the first read to find
    /// damaged (a miss, the entry removed).
    func restoreCarriedFiles(_ bytes: [UInt8], at offsets: [Int], index: Index) -> Int {
        bytes.withUnsafeBytes { journal in
            var restored = 0
            var shards: Set<String> = []
            for offset in offsets {
                guard case (.put(let put), _, _)? = Journal.decodeRecord(journal, at: offset),
                      let entry = index[put.hash], entry.slot == put.slot, entry.isSameCommit(as: IndexEntry(put)) else { continue }
                let file = UnsafeRawBufferPointer(rebasing: journal[Journal.carriedFile(journal, at: offset)])
                let path = layout.metaFile(put.hash, slot: put.slot)
                if case .success(let existing?) = FileIO.readAll(path, limit: file.count, in: layout.directory),
                   existing.elementsEqual(file) { continue }
                switch FileIO.writeEntryFile(path, [file], sync: true, in: layout.directory) {
                case .success:
                    restored += 1
                    shards.insert(layout.shardDirectory(put.hash))
                case .failure(let error):
                    logger.warning("Could not restore an entry file from the journal", metadata: ["path": "\(path)", "error": "\(error)"])
                }
            }
            for shard in shards.sorted() { _ = layout.directory.fsyncDirectory(shard) }
            if restored > 0 {
                logger.warning("Restored entry files from the journal after an unclean shutdown", metadata: ["count": "\(restored)"])
            }
            return restored
        }
    }

    /// Rewrites a version-1 journal's header as the current version, durably, before records
    /// version 1 does not know can be appended (an older library then refuses the journal
    /// instead of skipping those records as damage).
    func upgradeJournalHeader() throws(DiskCacheError) {
        let journal = try layout.directory.open(layout.journal, O_WRONLY | O_NOFOLLOW | O_NONBLOCK).get(orThrow: "open the journal", path: layout.journal)
        try Journal.header().withUnsafeBytes { Syscall.pwriteAll(journal.fd, $0, at: 0) }.get(orThrow: "write the journal's header", path: layout.journal)
        try Syscall.fsync(journal.fd).get(orThrow: "sync the journal", path: layout.journal)
    }

    func readJournal() throws(DiskCacheError) -> JournalContents {
        let path = layout.journal
        switch FileIO.readAll(path, limit: Int.max, in: layout.directory) {
        case .failure(let error) where error == .noSuchFileOrDirectory:
            return .missing
        case .failure(let error):
            throw DiskCacheError.io(error, "read the journal", path: path)
        case .success(nil):
            return .unreadable
        case .success(let bytes?):
            switch bytes.withUnsafeBytes({ Journal.checkHeader($0) }) {
            case .valid: return .valid(bytes)
            case .unreadable: return .unreadable
            case .newerVersion(let version):
                throw DiskCacheError(code: .newerFormat,
                                     message: "The journal has version \(version); this library reads up to \(Journal.journalVersion). It was left untouched",
                                     path: path)
            }
        }
    }

    /// Rebuilds the index from the `.meta` files (the journal is missing or unreadable) and
    /// writes a new journal from it.
    func rebuildByScan(blockSize: Int64, recovery: inout DiskCache.Recovery) throws(DiskCacheError) -> (Index, Int) {
        var index = Index(blockSize: blockSize, policy: configuration.evictionPolicy)
        // The newest valid slot of each hash wins; everything else is removed.
        var found: [KeyHash: Journal.Put] = [:]
        ShardScanner(layout: layout).forEachEntryFile { hash, slot, kind, path in
            guard kind == .meta else {
                // A body is checked with its metadata file; one without is garbage.
                if case .failure(.noSuchFileOrDirectory) = layout.directory.lstat(layout.metaFile(hash, slot: slot)) {
                    _ = layout.directory.unlink(path)
                }
                return true
            }
            let body = layout.bodyFile(hash, slot: slot)
            guard let put = checkedEntry(hash: hash, slot: slot, metaPath: path, bodyPath: body) else {
                _ = layout.directory.unlink(path)
                _ = layout.directory.unlink(body)
                return true
            }
            if let other = found[hash] {
                let (keep, drop) = other.created >= put.created ? (other, put) : (put, other)
                _ = layout.directory.unlink(layout.metaFile(hash, slot: drop.slot))
                _ = layout.directory.unlink(layout.bodyFile(hash, slot: drop.slot))
                found[hash] = keep
            } else {
                found[hash] = put
            }
            return true
        }
        let puts = found.values.sorted { $0.created < $1.created }
        for put in puts { index.insert(IndexEntry(put), for: put.hash) }
        var journal = Journal.header()
        for put in puts { Journal.encode(.put(put), into: &journal) }
        try Self.replaceJournal(layout: layout, with: journal)
        recovery.rebuiltByScan = true
        recovery.entriesRecoveredByScan = puts.count
        if !puts.isEmpty {
            logger.warning("Rebuilt the journal by scanning the cache's files", metadata: ["entries": "\(puts.count)"])
        }
        return (index, puts.count)
    }
    /// The PUT record a `.meta` file (and its body) would have had, if they check out: the
    /// metadata parses, its key hashes to the file's name, and the body (inline, or a separate
    /// file of the stated size) has the stated checksum. Entry files are written in place, so a
    /// write cut short leaves a torn file: only the checksum tells it from a whole one.
    func checkedEntry(hash: KeyHash, slot: UInt8, metaPath: String, bodyPath: String) -> Journal.Put? {
        guard case .success(let bytes?) = FileIO.readAll(metaPath, limit: IndexEntry.maximumMetaSize, in: layout.directory),
              let meta = bytes.withUnsafeBytes({ EntryMetadata.decode($0) }),
              meta.size >= 0, meta.size <= IndexEntry.maximumBodySize,
              configuration.keyHasher.hash(meta.key) == hash
        else { return nil }
        if let inline = meta.inlineBody {
            guard inline.withUnsafeBytes({ Checksum.xxh3($0) }) == meta.checksum else { return nil }
            _ = layout.directory.unlink(bodyPath)
        } else {
            guard case .success(let info) = layout.directory.lstat(bodyPath), info.st_mode & S_IFMT == S_IFREG,
                  Int64(info.st_size) == meta.size,
                  case .success(let checksum?) = FileIO.checksum(bodyPath, count: Int(meta.size), in: layout.directory),
                  checksum == meta.checksum
            else { return nil }
        }
        return Journal.Put(hash: hash, size: meta.size, metaSize: UInt32(bytes.count), isInline: meta.inlineBody != nil,
                           slot: slot, checksum: meta.checksum, created: meta.created, accessed: meta.accessed,
                           expires: meta.expires)
    }

    /// Writes a whole journal file: to `journal.tmp`, synced, renamed over `journal`, directory synced.
    private static func replaceJournal(layout: Layout, with bytes: [UInt8]) throws(DiskCacheError) {
        let temp = layout.journalTemp
        // A directory (or anything else) left at journal.tmp is in the way of every rewrite.
        layout.directory.removeTree(temp)
        try bytes.withUnsafeBytes { FileIO.writeNewFile(temp, $0, sync: true, in: layout.directory) }
            .get(orThrow: "write a new journal", path: temp)
        try layout.directory.rename(temp, layout.journal).get(orThrow: "replace the journal", path: layout.journal)
        try layout.directory.fsyncDirectory(layout.root).get(orThrow: "sync the cache directory", path: layout.root)
    }
}

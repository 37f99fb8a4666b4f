import ArgumentParser
import DiskCache
import Foundation
import HTTPCache

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check every entry and file; with --repair, fix what can be fixed.",
        discussion: """
            Checks that each entry the journal vouches for has a readable metadata file that \
            matches the journal, a body of the right size and checksum, and the right \
            permissions; that no file lies in the shards without a journal record; and that the \
            journal has no torn tail or damaged records. Exits 1 when anything is wrong.

            Leftovers the next open removes by itself (files in tmp/, a cache that was not \
            closed cleanly) are printed as notes and do not count as problems.

            Without --repair nothing is modified. A cache a running process has open is read \
            as it changes: a finding is reported only if fresh reads of the journal still \
            confirm it; in a cache its instances share, a file that looks like an orphan is \
            checked once more holding the locks a writer of its key holds, and may wait for \
            that write to end (up to 5 s; then the file is named in a note instead). With --repair, a cache whose VERSION file was lost or damaged is marked \
            again first, when the rest of the directory is recognisably a cache; then, when the \
            check finds problems, the cache is opened read-write: damaged entries are removed, orphan and leftover files deleted, \
            permissions restored and the journal rewritten; each repair is listed, then the \
            cache is checked again, and the exit status is 0 only when that check passes.

            In a cache of the HTTP layer (HTTPURLCache), records holding responses that no \
            lookup reaches (such as the variant lists of an earlier record layout) are problems \
            too, and --repair removes them.

            A progress bar is drawn on standard error when it is a terminal.
            """
    )

    @OptionGroup var cache: CacheOptions
    @OptionGroup var lockWait: LockWaitOptions

    @Flag(help: "Fix what can be fixed: drop bad entries, remove orphans, rewrite the journal.")
    var repair = false

    @Flag(name: [.short, .long], help: "Print only problems and repairs, not the summary.")
    var quiet = false

    func run() throws {
        let found: Check
        do {
            found = try check(label: "verifying")
        } catch let error as DiskCacheError where error.code == .notACache && repair {
            // A cache whose VERSION mark was lost or damaged: marked again if the rest of the
            // directory is recognisably a cache (refused otherwise, and nothing is changed).
            let repairs: [String]
            do {
                repairs = try DiskCache.restoreMark(directory: cache.url)
            } catch let refusal as DiskCacheError where refusal.code == .notACache {
                throw error  // not a cache at all: say so as the check did
            }
            for line in repairs { Terminal.writeLine("repaired: \(line)") }
            found = try check(label: "verifying")
        }
        let problems = found.report.problems
        for note in found.report.notes { Terminal.writeLine("note: \(note)") }
        for problem in problems { Terminal.writeLine("problem: \(Self.describe(problem))") }
        for record in found.unreachable { Terminal.writeLine("problem: \(Self.describe(record))") }
        if !quiet {
            Terminal.writeLine("checked \(Self.count(found.report.entriesChecked, "entry", "entries")) (\(ByteSize.format(found.report.bytesChecked)) of bodies): "
                + (found.problemCount == 0 ? "no problems" : Self.count(found.problemCount, "problem", "problems")))
        }
        guard found.problemCount > 0 else { return }
        guard repair else { throw ExitCode(ExitStatus.problemsFound) }

        let repairs = try runRepair(removing: found.unreachable).map { Self.namingKeys($0, from: problems) }
        for line in repairs { Terminal.writeLine("repaired: \(line)") }
        let after = try check(label: "re-checking")
        for problem in after.report.problems { Terminal.writeLine("remaining: \(Self.describe(problem))") }
        for record in after.unreachable { Terminal.writeLine("remaining: \(Self.describe(record))") }
        if !quiet {
            Terminal.writeLine("after repair: \(Self.count(after.report.entriesChecked, "entry", "entries")), "
                + (after.problemCount == 0 ? "no problems" : "\(Self.count(after.problemCount, "problem", "problems")) left"))
        }
        if after.problemCount > 0 { throw ExitCode(ExitStatus.problemsFound) }
    }

    /// What one check found: the store's report, and the HTTP records no lookup reaches.
    private struct Check {
        var report: DiskCache.VerificationReport
        var unreachable: [HTTPURLCache.UnreachableRecord]
        var problemCount: Int { report.problems.count + unreachable.count }
    }

    /// The read-only check; the inspector (and the lock it holds) is gone when this returns.
    private func check(label: String) throws -> Check {
        // A cache a running process has open is read as a snapshot (what changes meanwhile is
        // no finding); the repair then opens it shared, as the other writers do.
        let inspector = try cache.inspectSnapshot(quietly: label != "verifying")
        let bar = ProgressBar(label: label)
        let report = inspector.verify { done, total in bar.update(done: done, total: total) }
        bar.finish()
        let unreachable = HTTPURLCache.unreachableRecords(among: inspector.entries()).sorted { $0.key < $1.key }
        return Check(report: report, unreachable: unreachable)
    }

    /// Opens the cache read-write and repairs it; returns what was done, one sentence each.
    private func runRepair(removing unreachable: [HTTPURLCache.UnreachableRecord]) throws -> [String] {
        let diskCache = try cache.open(reportsRecovery: false, waiting: lockWait.wait)
        defer { try? diskCache.close() }
        let bar = ProgressBar(label: "repairing")
        var report = try diskCache.verify(repair: true) { done, total in bar.update(done: done, total: total) }
        bar.finish()
        for record in unreachable where diskCache.contains(record.key) {
            try diskCache.removeValue(for: record.key)
            report.repairs.append("Removed an HTTP record no lookup reaches (key \(Terminal.quoted(String(record.key.prefix(80))))): \(record.reason)")
        }
        // Closing waits for the background work opening started (the scan for orphans after
        // an unclean shutdown), so the recovery counters below are final.
        try diskCache.close()
        let recovery = diskCache.statistics.recovery
        var repairs = report.repairs
        if recovery.temporaryFilesRemoved > 0 {
            repairs.insert("Removed \(Self.count(recovery.temporaryFilesRemoved, "leftover file", "leftover files")) from tmp/ (when the cache was opened)", at: 0)
        }
        if recovery.filesRestoredFromJournal > 0 {
            repairs.insert("Rewrote \(Self.count(recovery.filesRestoredFromJournal, "entry file", "entry files")) an unclean shutdown had lost from the journal records that carry them (when the cache was opened)", at: 0)
        }
        if recovery.sharedPageMovedAside {
            repairs.insert("Moved aside what was in place of SHARED, which was not a regular file, and wrote the shared page afresh (when the cache was opened)", at: 0)
        }
        if recovery.rebuiltByScan {
            repairs.insert("Rebuilt the journal by scanning the entry files (\(recovery.entriesRecoveredByScan) entries)", at: 0)
        }
        if recovery.orphanFilesRemoved > 0 {
            repairs.append("Removed \(Self.count(recovery.orphanFilesRemoved, "orphan file", "orphan files")) (background scan after an unclean shutdown)")
        }
        return repairs
    }

    /// A repair that names an entry by its hash gets the key a problem found for that hash.
    static func namingKeys(_ repair: String, from problems: [DiskCache.Problem]) -> String {
        guard let hash = repair.split(separator: " ").last.map(String.init), hash.count == 32,
              hash.allSatisfy(\.isHexDigit),
              let key = problems.first(where: { $0.key != nil && $0.path?.contains(hash) == true })?.key
        else { return repair }
        return repair + " (key \(Terminal.quoted(String(key.prefix(80)))))"
    }

    static func describe(_ problem: DiskCache.Problem) -> String {
        var text = "\(problem.kind.rawValue): \(problem.detail)"
        if let key = problem.key { text += " (key \(Terminal.quoted(String(key.prefix(80)))))" }
        if let path = problem.path { text += " [\(path)]" }
        return text
    }

    static func describe(_ record: HTTPURLCache.UnreachableRecord) -> String {
        "unreachableHTTPRecord: \(record.reason) (key \(Terminal.quoted(String(record.key.prefix(80)))))"
    }

    static func count(_ n: Int, _ singular: String, _ plural: String) -> String {
        "\(n) \(n == 1 ? singular : plural)"
    }
}

import ArgumentParser
import DiskCache

struct Clear: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove every entry (the cache itself stays).",
        discussion: "Then rewrites the journal, which holds nothing but its header afterwards."
    )

    @OptionGroup var cache: CacheOptions
    @OptionGroup var lockWait: LockWaitOptions

    func run() throws {
        let diskCache = try cache.open(waiting: lockWait.wait)
        defer { try? diskCache.close() }
        let removed = diskCache.count
        try diskCache.removeAll()
        // Compacting also waits for the background deletion of the removed files, which
        // closing right away would leave in tmp/ for the next open to finish.
        try diskCache.compact()
        try diskCache.close()
        Terminal.writeLine("removed \(removed) \(removed == 1 ? "entry" : "entries")")
    }
}

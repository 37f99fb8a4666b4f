extension DiskCache {
    /// Counters since the cache was opened, read as one consistent value.
    public struct Statistics: Hashable, Sendable {
        /// Reads that returned a value.
        public var hits = 0
        /// Reads that returned nil for any reason (the ones below included).
        public var misses = 0
        /// Reads that found an expired entry (which is then removed).
        public var expiredReads = 0
        /// Reads that found a corrupt or missing body or metadata file (the entry is then removed).
        public var corruptEntriesRemoved = 0
        /// Reads whose key hash matched another key's entry (reported as misses).
        public var hashCollisions = 0
        /// Successful `store` calls that wrote.
        public var writes = 0
        /// `store` calls that `Configuration.admission` declined (they wrote nothing).
        public var declinedStores = 0
        /// Successful `updateMetadata` calls (the body was kept, not rewritten).
        public var metadataUpdates = 0
        /// Entries removed by `removeValue`, `removeEntries(modifiedSince:)` or `removeAll`.
        public var removals = 0
        /// Journal compactions run.
        public var compactions = 0

        /// What the last open found and repaired.
        public var recovery = Recovery()
    }

    /// What opening the cache found and repaired.
    public struct Recovery: Hashable, Sendable {
        /// Records replayed from the journal.
        public var recordsReplayed = 0
        /// Bytes after the last good record (a torn or corrupt tail), cut off.
        public var truncatedBytes = 0
        /// Damaged regions in the middle of the journal that were skipped.
        public var corruptRegions = 0
        /// The journal was missing or unreadable, and the index was rebuilt by scanning the shards.
        public var rebuiltByScan = false
        /// Entries the scan recovered (when `rebuiltByScan`).
        public var entriesRecoveredByScan = 0
        /// The previous session did not close the cache (a crash or kill).
        public var wasUncleanShutdown = false
        /// Files no journal record vouched for, removed by the background scan after an unclean shutdown.
        public var orphanFilesRemoved = 0
        /// Files left in `tmp/` by interrupted writes, removed at open.
        public var temporaryFilesRemoved = 0
        /// `.meta` files of `.immediate` writes that a power cut took (or damaged) before a
        /// checkpoint made them durable, rewritten at open from the journal records that carry
        /// them (see <doc:ChoosingADurabilityMode>).
        public var filesRestoredFromJournal = 0
        /// Shared mode: what was in place of `SHARED` and was not a regular file (a directory,
        /// a link, a FIFO) was moved aside at open, no instance having the cache open (a link is
        /// removed, never its target; anything else goes into `tmp/`, which the open empties).
        public var sharedPageMovedAside = false
    }
}

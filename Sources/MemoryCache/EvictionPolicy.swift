/// The order in which a ``MemoryCache`` gives up entries when a limit is reached.
///
/// The policy is fixed when the cache is created. Both policies are O(1) per
/// operation and keep no per-entry state beyond a few integers.
public enum EvictionPolicy: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Least recently used: every hit moves the entry to the front of one list and
    /// the entry at the back is evicted.
    ///
    /// Simple and predictable, but one pass over many keys that are never read again
    /// (a scan, a crawler, a batch job) pushes every hot entry out.
    case leastRecentlyUsed

    /// S3-FIFO (Yang et al., SOSP 2023): a small FIFO queue that admits new entries
    /// (10 % of the cache), a main FIFO queue (90 %) and a ghost queue that remembers
    /// the keys (not the values) recently evicted from the small queue.
    ///
    /// A new key enters the small queue. When it reaches the end of that queue it is
    /// moved to the main queue if it was read while it waited, and otherwise evicted
    /// and its key remembered in the ghost queue; a key found in the ghost queue when
    /// it is stored again goes straight to the main queue. The main queue gives every
    /// entry that was read since it last passed through another round (a small 2-bit
    /// counter, up to three rounds) before it evicts it. A hit only bumps that counter,
    /// so it never reorders a list.
    ///
    /// One-hit wonders and scans therefore leave through the small queue without
    /// disturbing the main queue. On the Zipf workloads in
    /// `Benchmarks/MemoryPolicies/RESULTS.md` it has a higher hit ratio than LRU at
    /// every cache size measured.
    case s3FIFO

    public var description: String {
        switch self {
        case .leastRecentlyUsed: "LRU"
        case .s3FIFO: "S3-FIFO"
        }
    }
}

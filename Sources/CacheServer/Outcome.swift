#if Server
/// How one request was answered, for the access log and the connection.
struct Outcome {
    var status: UInt = 0
    var bytes: Int64 = 0
    /// HIT, MISS, REVALIDATED, STALE, BYPASS, or what an internal endpoint did.
    var cacheStatus = "BYPASS"
    /// The request's body was read to its end, so the next request can be read.
    var canContinue = true
}
#endif

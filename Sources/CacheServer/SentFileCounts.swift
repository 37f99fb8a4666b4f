#if Server
/// Files a server sends bodies from, over all its connections.
struct SentFileCounts {
    /// Held open now, for writes not yet done.
    var open = 0
    /// Taken for sending since the server started.
    var adopted = 0
}
#endif

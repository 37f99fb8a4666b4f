#if Server
/// A response from the store was part written when this was thrown (a later chunk failed its
/// checksum, the client went): no other answer may follow it, the connection closes.
struct ResponseStarted: Error {
    let underlying: any Error
}
#endif

#if Server
/// The requests of a connection that ``RawHitResponder`` handed on to NIO's pipeline, and the
/// `.end`s of answers written into the pipeline since (counted by ``ResponseWrites``). Only
/// on the connection's event loop.
final class HandedOn {
    var requests = 0
    var ends = 0

    /// Every request handed on has its answer's end written: an answer written now follows it.
    var isIdle: Bool { requests == ends }
}
#endif

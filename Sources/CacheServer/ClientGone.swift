#if Server
/// The client went away (or sent something that ends the exchange) part way: the connection closes.
struct ClientGone: Error {
    let underlying: (any Error)?
}
#endif

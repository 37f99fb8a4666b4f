#if Server
/// Why the origin gave no usable answer.
enum OriginError: Error, CustomStringConvertible {
    case unreachable(String)
    case closedEarly(String)
    /// The origin sent nothing for the read timeout.
    case timedOut(String)

    var description: String {
        switch self {
        case .unreachable(let detail): "cannot reach the origin \(detail)"
        case .closedEarly(let detail), .timedOut(let detail): detail
        }
    }
}
#endif

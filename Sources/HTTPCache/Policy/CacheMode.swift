/// Whether the cache is private to one user or shared between users (RFC 9111 §1).
///
/// The mode changes which directives apply: a shared cache honours `s-maxage`,
/// `proxy-revalidate` and `private`, and refuses responses to requests with `Authorization`
/// unless the response explicitly allows it (RFC 9111 §3.5).
public enum CacheMode: Sendable, Hashable {
    /// A cache dedicated to a single user, such as the one in an app or a browser.
    case `private`
    /// A cache whose stored responses may be served to several users, such as a proxy or a
    /// cache in a server that fetches on behalf of many clients.
    case shared
}

/// An entity tag (RFC 9110 §8.8.3), the validator sent in `ETag` and compared by the cache.
public struct EntityTag: Sendable, Hashable {
    /// The opaque tag including its double quotes, as in `"xyzzy"`.
    public var opaqueTag: String
    /// Whether the tag was marked weak with `W/`.
    public var isWeak: Bool

    public init(opaqueTag: String, isWeak: Bool = false) {
        self.opaqueTag = opaqueTag
        self.isWeak = isWeak
    }

    /// Parses an `ETag` field value such as `"xyzzy"` or `W/"xyzzy"`.
    ///
    /// A value without the required quotes (`xyzzy`, sent by some servers) is accepted as an
    /// opaque tag as written, so that it can still be echoed back in `If-None-Match`. An empty
    /// value is not a tag.
    public init?(_ fieldValue: String) {
        var text = Substring(fieldValue._trimmingOWS)
        var weak = false
        if text.hasPrefix("W/") {
            weak = true
            text = text.dropFirst(2)
        }
        guard !text.isEmpty, !text.contains(",") else { return nil }
        self.init(opaqueTag: String(text), isWeak: weak)
    }

    /// The field value form: `W/"xyzzy"` or `"xyzzy"`.
    public var fieldValue: String {
        isWeak ? "W/" + opaqueTag : opaqueTag
    }

    /// Strong comparison (RFC 9110 §8.8.3.2): both strong and the same opaque tag.
    public func matchesStrongly(_ other: EntityTag) -> Bool {
        !isWeak && !other.isWeak && opaqueTag == other.opaqueTag
    }

    /// Weak comparison (RFC 9110 §8.8.3.2): the same opaque tag, weakness ignored.
    public func matchesWeakly(_ other: EntityTag) -> Bool {
        opaqueTag == other.opaqueTag
    }
}

/// Keys other instances changed, as ``CacheState/externalChanges`` collects them.
struct ExternalChanges: Sendable {
    var hashes: [KeyHash] = []
    /// Everything may have changed (a `removeAll`, a journal read afresh, too many to list).
    var everything = false

    var isEmpty: Bool { hashes.isEmpty && !everything }

    mutating func note(_ hash: KeyHash) {
        guard !everything else { return }
        if hashes.count >= 65_536 { noteEverything() } else { hashes.append(hash) }
    }

    mutating func noteEverything() {
        everything = true
        hashes = []
    }
}

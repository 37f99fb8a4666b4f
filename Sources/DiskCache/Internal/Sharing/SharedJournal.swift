/// What shared mode adds to the state: the shared page, and the directory to reopen the
/// journal in after another instance's compaction replaced it.
struct SharedJournal: Sendable {
    let region: SharedRegion
    let layout: Layout
    #if DEBUG
    /// Tests: the switch to another instance's compacted journal fails while this says so.
    var failsSwitch: (@Sendable () -> Bool)?
    #endif

    init(region: SharedRegion, layout: Layout, configuration: DiskCache.Configuration) {
        self.region = region
        self.layout = layout
        #if DEBUG
        failsSwitch = configuration.failsJournalSwitch
        #endif
    }
}

/// The exit statuses of `diskcache`, one per class of outcome (listed in `diskcache --help`).
enum ExitStatus {
    /// `verify` found problems (that `--repair` did not fix).
    static let problemsFound: Int32 = 1
    /// Bad arguments: an unknown option, a size or date that does not parse.
    static let usage: Int32 = 2
    /// The cache cannot be opened: no such directory, not a directory, not a cache, locked by
    /// a running process, written by a newer format, no permission.
    static let cannotOpen: Int32 = 3
    /// No entry for the key given.
    static let noSuchEntry: Int32 = 4
    /// The operation failed: an I/O error, a full disk, an unreadable input file.
    static let failed: Int32 = 5

    static let helpText = """
        EXIT STATUS:
          0  success
          1  verify found problems (left unrepaired)
          2  usage error (bad option, size or date)
          3  the cache cannot be opened: missing, not a directory, not a cache,
             open in a running process, newer format, permission denied
          4  no entry for the key
          5  the operation failed (I/O error, disk full, unreadable input)
        """
}

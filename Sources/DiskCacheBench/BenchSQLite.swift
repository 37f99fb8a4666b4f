import CSQLite
import Foundation

/// SQLite as a cache, through its C API in this process: one table
/// `cache (key TEXT PRIMARY KEY, value BLOB NOT NULL)` in WAL mode, one autocommit
/// `INSERT OR REPLACE` per put and one `SELECT` per get, with prepared statements and the
/// store's own key strings. One connection per thread (opened `SQLITE_OPEN_NOMUTEX`: thread
/// `i` of a run only ever uses connection `i`), so that gets on several threads read in
/// parallel as WAL allows; writers wait for each other through `busy_timeout`.
final class BenchSQLite: @unchecked Sendable {  // unchecked: connection i is used by one thread only, the i-th of benchRun
    /// `NORMAL` or `FULL`: what the store's durability asks for (see ``synchronous(for:)``).
    let synchronous: String
    let path: String
    private var connections: [Connection] = []

    static var version: String { String(cString: sqlite3_libversion()) }

    /// `FULL` (a WAL sync at every commit) when every store must be durable at once, `NORMAL`
    /// (syncs only at checkpoints) otherwise.
    static func synchronous(immediate: Bool) -> String { immediate ? "FULL" : "NORMAL" }

    init(path: String, threads: Int, synchronous: String) throws {
        self.path = path
        self.synchronous = synchronous
        for _ in 0..<max(1, threads) {
            let connection = try Connection(path: path)
            if connections.isEmpty {
                try connection.execute("PRAGMA journal_mode=WAL")
                try connection.execute("CREATE TABLE IF NOT EXISTS cache (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
            }
            try connection.execute("PRAGMA synchronous=\(synchronous)")
            try connection.prepare()
            connections.append(connection)
        }
    }

    /// Stores `body` under `key` on connection `thread`; returns the bytes stored, 0 on failure.
    func put(thread: Int, key: String, body: Data) -> Int {
        connections[thread].put(key: key, body: body) ? body.count : 0
    }

    /// Deletes `key` on connection `thread` (what evicting it costs); false on failure.
    @discardableResult
    func remove(thread: Int, key: String) -> Bool {
        connections[thread].remove(key: key)
    }

    /// Reads `key` on connection `thread` into a fresh `Data`; returns its size (0 on a miss).
    func get(thread: Int, key: String) -> Int {
        connections[thread].get(key: key)?.count ?? 0
    }

    /// Closes every connection (the last one checkpoints the WAL into the database).
    func close() {
        connections.removeAll()
    }

    /// What opening the cache costs: open the database and count its entries.
    static func openAndCount(path: String) throws -> Int {
        let connection = try Connection(path: path)
        return try connection.count()
    }

    // MARK: - One connection

    private final class Connection {
        private var db: OpaquePointer?
        private var insert: OpaquePointer?
        private var select: OpaquePointer?
        private var delete: OpaquePointer?

        init(path: String) throws {
            let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
            let status = sqlite3_open_v2(path, &db, flags, nil)
            guard status == SQLITE_OK else {
                let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "status \(status)"
                sqlite3_close_v2(db)
                throw BenchError("sqlite: cannot open \(path): \(message)")
            }
            sqlite3_busy_timeout(db, 10_000)
        }

        deinit {
            sqlite3_finalize(insert)
            sqlite3_finalize(select)
            sqlite3_finalize(delete)
            sqlite3_close_v2(db)
        }

        func execute(_ sql: String) throws {
            var message: UnsafeMutablePointer<CChar>?
            guard sqlite3_exec(db, sql, nil, nil, &message) == SQLITE_OK else {
                defer { sqlite3_free(message) }
                throw BenchError("sqlite: \(sql): \(message.map { String(cString: $0) } ?? "error")")
            }
        }

        func prepare() throws {
            insert = try statement("INSERT OR REPLACE INTO cache (key, value) VALUES (?, ?)")
            select = try statement("SELECT value FROM cache WHERE key = ?")
            delete = try statement("DELETE FROM cache WHERE key = ?")
        }

        private func statement(_ sql: String) throws -> OpaquePointer? {
            var statement: OpaquePointer?
            guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK else {
                throw BenchError("sqlite: \(sql): \(String(cString: sqlite3_errmsg(db)))")
            }
            return statement
        }

        func put(key: String, body: Data) -> Bool {
            var key = key
            defer { sqlite3_reset(insert); sqlite3_clear_bindings(insert) }
            // Bound without copies (a nil destructor is SQLITE_STATIC): the bytes outlive the step.
            return key.withUTF8 { text in
                body.withUnsafeBytes { bytes in
                    sqlite3_bind_text(insert, 1, text.baseAddress, Int32(text.count), nil)
                    sqlite3_bind_blob(insert, 2, bytes.baseAddress, Int32(bytes.count), nil)
                    return sqlite3_step(insert) == SQLITE_DONE
                }
            }
        }

        func remove(key: String) -> Bool {
            var key = key
            defer { sqlite3_reset(delete); sqlite3_clear_bindings(delete) }
            return key.withUTF8 { text in
                sqlite3_bind_text(delete, 1, text.baseAddress, Int32(text.count), nil)
                return sqlite3_step(delete) == SQLITE_DONE
            }
        }

        func get(key: String) -> Data? {
            var key = key
            defer { sqlite3_reset(select); sqlite3_clear_bindings(select) }
            return key.withUTF8 { text in
                sqlite3_bind_text(select, 1, text.baseAddress, Int32(text.count), nil)
                guard sqlite3_step(select) == SQLITE_ROW else { return nil }
                let count = Int(sqlite3_column_bytes(select, 0))
                guard count > 0, let blob = sqlite3_column_blob(select, 0) else { return Data() }
                return Data(bytes: blob, count: count)
            }
        }

        func count() throws -> Int {
            let statement = try statement("SELECT count(*) FROM cache")
            defer { sqlite3_finalize(statement) }
            guard sqlite3_step(statement) == SQLITE_ROW else {
                throw BenchError("sqlite: SELECT count(*): \(String(cString: sqlite3_errmsg(db)))")
            }
            return Int(sqlite3_column_int64(statement, 0))
        }
    }
}

#if Server
import NIOCore

/// An origin connection that outlives one exchange: a task of its own runs the exchanges handed
/// to it, one at a time, until one says the connection cannot be used again.
final class PooledConnection: Sendable {
    /// One exchange, run on the connection's task; returns whether the connection can be reused.
    typealias Job = @Sendable (inout OriginClient.Parts, OriginClient.Writer) async -> Bool
    private let jobs: AsyncStream<Job>.Continuation

    init(_ connection: OriginClient.Connection, pool: OriginPool) {
        let (stream, jobs) = AsyncStream<Job>.makeStream()
        self.jobs = jobs
        pool.tasks.begin()
        Task { [weak pool, jobs] in
            try? await connection.executeThenClose { inbound, outbound in
                var parts = inbound.makeAsyncIterator()
                for await job in stream {
                    guard await job(&parts, outbound) else { return }
                    pool?.give(self)
                }
            }
            jobs.finish()
            pool?.tasks.end()
        }
    }

    /// Hands `job` to the connection's task; false when that task has ended (it will never run).
    func submit(_ job: @escaping Job) -> Bool {
        if case .enqueued = jobs.yield(job) { return true }
        return false
    }

    /// Ends the connection's task (and so the connection) once it is idle.
    func close() { jobs.finish() }
}
#endif

/// A benchmark that cannot run or a worker process that misbehaves; `diskcache` prints it as
/// one line and exits with its `failed` status.
package struct BenchError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

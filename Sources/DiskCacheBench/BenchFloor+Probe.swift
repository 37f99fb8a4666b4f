import Foundation
import ToolSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Choosing the floor by measurement

extension BenchFloor {
    /// One way to be the floor: a layout and a write strategy.
    struct Candidate: Hashable, Codable, Sendable, CustomStringConvertible {
        var layout: Layout
        var strategy: Strategy
        var description: String { "\(layout.label), \(strategy.label)" }

        static let all = Layout.allCases.flatMap { layout in Strategy.allCases.map { Candidate(layout: layout, strategy: $0) } }
    }

    /// What the probe measured for one candidate, best of its rounds.
    struct ProbeResult: Codable {
        var layout: Layout
        var strategy: Strategy
        /// False when the filesystem refused the strategy (`O_TMPFILE`); it was not run.
        var isSupported: Bool
        var putOpsPerSecond: Double
        /// Gets of the entries it had just put, by read method.
        var getOpsPerSecond: [String: Double]
        /// Puts in its best round.
        var puts: Int
    }

    /// The floor chosen for one body size, and the probe that chose it.
    struct Choice: Codable {
        var size: Int
        var layout: Layout
        var strategy: Strategy
        var readMethod: ReadMethod
        /// In words: "256 shards, direct O_EXCL create, pread".
        var description: String
        var rounds: Int
        var seconds: Double
        var candidates: [ProbeResult]

        init(size: Int, layout: Layout, strategy: Strategy, readMethod: ReadMethod, rounds: Int, seconds: Double,
             candidates: [ProbeResult]) {
            (self.size, self.layout, self.strategy, self.readMethod) = (size, layout, strategy, readMethod)
            (self.rounds, self.seconds, self.candidates) = (rounds, seconds, candidates)
            description = "\(Candidate(layout: layout, strategy: strategy)), \(readMethod.label)"
        }
    }

    /// Tries every candidate on this machine in `directory` (scratch directories, each set aside
    /// in `trash` (see ``BenchTrash``) and `sync`ed afterwards, so that no candidate pays for
    /// another's writeback or deletions): up to
    /// `rounds` interleaved rounds, in each up to `maxPuts` puts of `body` into an empty
    /// directory, then as many gets with each read method. About `seconds` in all: each put
    /// or get run stops after its share of 60 % of it (the rest goes to removing and syncing),
    /// and no round starts that would end past it. The candidate with the best put rate of any
    /// round is chosen; of the read methods, the one with the best get rate in that layout.
    static func probe(in directory: String, trash: String, body: Data, threads: Int, durable: Bool, maxPuts: Int,
                      seconds: Double, rounds: Int, onProgress: (Double) -> Void) throws -> Choice {
        let start = benchNanoseconds()
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw BenchError("cannot create \(directory): \(String(cString: strerror(errno)))")
        }
        defer { BenchTrash.setAside(directory, root: trash) }
        let hasTmpfile = supportsTmpfile(in: directory)
        let runnable = Candidate.all.filter { $0.strategy != .tmpfileLink || hasTmpfile }
        // Of a candidate's slice, 60 % for puts (they choose) and 20 % for each read method.
        let slice = 0.6 * seconds / Double(max(1, rounds * runnable.count))
        var bestPut: [Candidate: (rate: Double, puts: Int)] = [:]
        var bestGet: [Candidate: [ReadMethod: Double]] = [:]
        var roundsRun = 0
        sync()
        // Every candidate then starts right after memory was freed (the previous one's files).
        BenchProcess.recyclePages(bytes: min(maxPuts * body.count, 64 << 20), in: directory)
        for round in 0..<rounds {
            if round > 0 {
                // The next round would take about as long as the average one so far.
                let elapsed = Double(benchNanoseconds() - start) / 1e9
                if elapsed + elapsed / Double(round) > seconds { break }
            }
            // Rotate the order each round so that no candidate always runs first or last.
            let shift = round * runnable.count / max(1, rounds)
            for (position, candidate) in (runnable[shift...] + runnable[..<shift]).enumerated() {
                let root = directory + "/\(round)-\(position)"
                let floor = try BenchFloor(root: root, bodySize: body.count, layout: candidate.layout,
                                           strategy: candidate.strategy, durable: durable)
                let next = Atomic<Int>(0)
                let failures = Atomic<Int>(0)
                let put = benchRun(threads: threads, count: maxPuts, seconds: slice * 0.6, seed: 0, progress: .silent) { _, _, _ in
                    let written = floor.put(next.add(1, ordering: .relaxed).oldValue, body: body)
                    if written == 0 { failures.add(1, ordering: .relaxed) }
                    return written
                }
                // A candidate whose puts fail here (a full disk, say) is no floor.
                if failures.load(ordering: .relaxed) == 0, put.opsPerSecond > bestPut[candidate]?.rate ?? 0 {
                    bestPut[candidate] = (put.opsPerSecond, put.operations)
                }
                let methods = round % 2 == 0 ? ReadMethod.allCases : ReadMethod.allCases.reversed()
                for method in methods {
                    let get = benchRun(threads: threads, count: put.operations, seconds: slice * 0.2, seed: UInt64(round),
                                       progress: .silent) { _, _, random in
                        floor.get(random.below(put.operations), using: method)
                    }
                    bestGet[candidate, default: [:]][method] = max(bestGet[candidate]?[method] ?? 0, get.opsPerSecond)
                }
                BenchTrash.setAside(root, root: trash)
                sync()
                onProgress((Double(round) + Double(position + 1) / Double(runnable.count)) / Double(rounds))
            }
            roundsRun += 1
        }
        guard let winner = runnable.max(by: { bestPut[$0]?.rate ?? 0 < bestPut[$1]?.rate ?? 0 }), bestPut[winner] != nil else {
            throw BenchError("the floor probe found no candidate whose puts succeed in \(directory)")
        }
        let readMethod = ReadMethod.allCases.max { a, b in
            func best(_ method: ReadMethod) -> Double {
                runnable.filter { $0.layout == winner.layout }.map { bestGet[$0]?[method] ?? 0 }.max() ?? 0
            }
            return best(a) < best(b)
        }!
        let results = Candidate.all.map { candidate in
            ProbeResult(layout: candidate.layout, strategy: candidate.strategy, isSupported: runnable.contains(candidate),
                        putOpsPerSecond: bestPut[candidate]?.rate ?? 0,
                        getOpsPerSecond: Dictionary(uniqueKeysWithValues: (bestGet[candidate] ?? [:]).map { ($0.key.rawValue, $0.value) }),
                        puts: bestPut[candidate]?.puts ?? 0)
        }
        return Choice(size: body.count, layout: winner.layout, strategy: winner.strategy, readMethod: readMethod,
                      rounds: roundsRun, seconds: Double(benchNanoseconds() - start) / 1e9, candidates: results)
    }
}

extension BenchFloor.Choice {
    /// One line for the report: the choice and every candidate's best put rate.
    var note: String {
        let rates = candidates.map { result in
            let rate = result.isSupported ? BenchReport.rate(result.putOpsPerSecond) : "unsupported"
            return "\(result.layout == .shards ? "shards" : "flat"), \(result.strategy.label) \(rate)"
        }
        let puts = candidates.first { $0.layout == layout && $0.strategy == strategy }?.puts ?? 0
        return "floor: \(description) (probe: best put ops/s of \(rounds) rounds in \(String(format: "%.1f", seconds)) s, "
            + "\(puts) puts in the winner's best round: " + rates.joined(separator: "; ") + ")"
    }
}

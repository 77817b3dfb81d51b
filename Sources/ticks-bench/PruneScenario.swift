import ArgumentParser
import Foundation
import GRDB
import Histogram
import Logging
import ServiceLifecycle
import TicksProtocol
import TicksServer

/// `ticks-bench prune`: retention of the receipt log on SQLite, in process.
///
/// Each run makes a fresh database file, fills its receipt log with `--moves`
/// backdated moves spread evenly over `--days` (written straight into
/// `cursor_move`, in time order), and then, on the store `ticks serve` uses
/// (`SQLStore.sqlite`, with its WAL checkpointer running):
///
/// 1. receipts at `--rate` for `--duration` seconds with no pruning: the
///    writer's latency alone;
/// 2. one pruning round (`ReceiptLogPruner.round()`, the server's own) with
///    the same receipts going on until it ends: rows deleted per second of the
///    round, the slowest batch, and the writer's latency meanwhile;
/// 3. the file's size before, after the round (the pages the deleted rows
///    free stay in the file, on SQLite's freelist, reused by later rows), and
///    after a `VACUUM` (what the rows kept need).
///
/// A receipt is one `markRead` or `markUnread` of a channel's reader through
/// the store, alternating, so every one moves a cursor and logs a move; its
/// latency is from when it was due (open loop: a late start counts) to its
/// commit (`synchronous = FULL`: on disk). No HTTP: this measures the writer.
struct Prune: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Receipt log retention on SQLite: rows pruned per second, size, receipts' latency while pruning.")

    @Option(help: "Folder for the benchmark's database (its file is made anew for each run).")
    var dataDir = "/tmp/ticks-bench-prune"
    @Option(help: "Backdated moves in the log before pruning.") var moves = 3_000_000
    @Option(help: "Days the moves are spread over, ending now.") var days = 365
    @Option(help: "The retention window.") var retention = "90d"
    @Option(help: "Moves looked at (and at most deleted) per transaction.") var batch = 1000
    @Option(help: "Milliseconds between two batches.") var pauseMs = 10
    @Option(help: "Channels of two (a sender and a reader).") var channels = 200
    @Option(help: "Receipts per second, during both phases.") var rate = 500
    @Option(help: "Seconds of receipts without pruning.") var duration = 20.0
    @Option(help: "Runs, each on a fresh database; medians are reported.") var runs = 3
    @Option(
        help: """
            Seconds of the steady state instead: a fresh log, receipts at --rate with the pruner running \
            (a round every --interval seconds); the log's rows and the file's size sampled as it goes.
            """)
    var steady: Double?
    @Option(help: "Seconds between two pruning rounds (with --steady; one round otherwise).") var interval = 10.0
    @Flag(help: "Print one JSON object on stdout (the summary goes to stderr).") var json = false

    struct Run: Codable {
        var moves_before: Int
        var moves_after: Int
        var deleted: Int
        var batches: Int
        var round_seconds: Double
        var deleted_per_second: Double
        var slowest_batch_ms: Double
        /// `page_count × page_size`, after a truncating checkpoint (so the write-ahead log is empty).
        var file_bytes_before: Int
        var file_bytes_after: Int
        /// Pages on SQLite's freelist after the round, times the page size: free space inside the file.
        var free_bytes_after: Int
        var file_bytes_after_vacuum: Int
        var vacuum_seconds: Double
        var receipts_without_pruning: LatencySummary
        var receipts_while_pruning: LatencySummary
        var receipt_errors: Int
        var seed_seconds: Double
    }

    struct Result: Codable {
        var scenario = "prune"
        var params: [String: String]
        var runs: [Run]
        var median: [String: Double]
    }

    func run() async throws {
        let window = try ReceiptLogRetention(parsing: retention)
        guard window.isEnabled else { throw ValidationError("--retention must not be off") }
        if let steady {
            try await steadyState(seconds: steady, window: window)
            return
        }
        var results: [Run] = []
        for number in 1...runs {
            let run = try await once(window: window, number: number)
            results.append(run)
            FileHandle.standardError.write(Data("run \(number): \(Self.describe(run))\n".utf8))
        }
        func median(_ value: (Run) -> Double) -> Double {
            let sorted = results.map(value).sorted()
            return sorted[sorted.count / 2]
        }
        let medians: [String: Double] = [
            "deleted_per_second": median(\.deleted_per_second),
            "round_seconds": median(\.round_seconds),
            "slowest_batch_ms": median(\.slowest_batch_ms),
            "file_bytes_before": median { Double($0.file_bytes_before) },
            "file_bytes_after": median { Double($0.file_bytes_after) },
            "free_bytes_after": median { Double($0.free_bytes_after) },
            "file_bytes_after_vacuum": median { Double($0.file_bytes_after_vacuum) },
            "p50_ms_without_pruning": median(\.receipts_without_pruning.p50),
            "p99_ms_without_pruning": median(\.receipts_without_pruning.p99),
            "p50_ms_while_pruning": median(\.receipts_while_pruning.p50),
            "p99_ms_while_pruning": median(\.receipts_while_pruning.p99),
        ]
        let params = [
            "moves": "\(moves)", "days": "\(days)", "retention": "\(window)", "batch": "\(batch)",
            "pause_ms": "\(pauseMs)", "channels": "\(channels)", "rate": "\(rate)", "duration": "\(duration)",
        ]
        let lines = ["medians of \(runs) runs:"] + medians.sorted { $0.key < $1.key }.map { "  \($0.key): \($0.value)" }
        try report(lines, json: Result(params: params, runs: results, median: medians), asJSON: json)
    }

    static func describe(_ run: Run) -> String {
        """
        \(run.deleted) of \(run.moves_before) moves deleted in \(run.round_seconds) s \
        (\(Int(run.deleted_per_second))/s, \(run.batches) batches, slowest \(run.slowest_batch_ms) ms); \
        file \(run.file_bytes_before) → \(run.file_bytes_after) bytes (\(run.free_bytes_after) free), \
        \(run.file_bytes_after_vacuum) after VACUUM; receipts without pruning \(run.receipts_without_pruning.text); \
        while pruning \(run.receipts_while_pruning.text); \(run.receipt_errors) errors
        """
    }

    /// A new database file `name` in the data folder (any old one removed), on the store `ticks serve` uses.
    func freshStore(_ name: String) throws -> (path: String, store: SQLStore) {
        try FileManager.default.createDirectory(atPath: dataDir, withIntermediateDirectories: true)
        let path = (dataDir as NSString).appendingPathComponent(name)
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        return (path, try SQLStore.sqlite(path: path))
    }

    /// The server's pruner on `store`, with this run's batch, pause and interval.
    func pruner(of store: SQLStore, window: ReceiptLogRetention) throws -> ReceiptLogPruner {
        var settings = window
        settings.batchSize = batch
        settings.pause = .milliseconds(pauseMs)
        settings.interval = .seconds(interval)
        var logger = Logger(label: "ticks-bench")
        logger.logLevel = .warning
        return try requireValue(
            ReceiptLogPruner(store: store, retention: settings, time: .system, metrics: ServerMetrics(), logger: logger)
        )
    }

    func once(window: ReceiptLogRetention, number: Int) async throws -> Run {
        // A file of its own for each run: the last run's connections may still be closing.
        let (path, store) = try freshStore("prune-\(number).sqlite")
        let now = Timestamp.now()
        // Made at the start of the backdated span, so the log's ids follow its times from the first
        // row, as a server's log does (the pruner walks it by id).
        let plans = try await Self.channels(
            channels, in: store, now: Timestamp(microseconds: now.microseconds - Int64(days) * 86_400_000_000))

        let seedStart = ContinuousClock.now
        try Self.seed(moves, over: days, endingAt: now, channels: plans, path: path)
        let seedSeconds = (ContinuousClock.now - seedStart).seconds
        let before = try Self.measure(path)

        let pruner = try pruner(of: store, window: window)

        let (quiet, busy, round, roundSeconds) = try await withThrowingTaskGroup(of: Void.self) { services in
            // The store's WAL checkpointer, as `ticks serve` runs it.
            for service in store.services { services.addTask { try await service.run() } }
            defer { services.cancelAll() }
            let load = ReceiptLoad(store: store, channels: plans, rate: rate)
            let quiet = try await load.run(for: .seconds(duration))
            let pruning = Locked<ReceiptLogPruner.Round?>(nil)
            let roundStart = ContinuousClock.now
            let busy = try await load.run(until: {
                let round = try await pruner.round()
                pruning.withLock { $0 = round }
            })
            let roundSeconds = (ContinuousClock.now - roundStart).seconds
            return (quiet, busy, try requireValue(pruning.withLock { $0 }), roundSeconds)
        }
        // Measured once the checkpointer has stopped, so nothing else touches the file.
        let after = try Self.measure(path)
        let vacuumStart = ContinuousClock.now
        let vacuumed = try Self.vacuum(path)
        return Run(
            moves_before: before.moves, moves_after: after.moves, deleted: round.deleted,
            batches: round.batches.count, round_seconds: (roundSeconds * 100).rounded() / 100,
            deleted_per_second: (Double(round.deleted) / roundSeconds).rounded(),
            slowest_batch_ms: (round.slowestBatch.seconds * 100_000).rounded() / 100,
            file_bytes_before: before.bytes, file_bytes_after: after.bytes, free_bytes_after: after.free,
            file_bytes_after_vacuum: vacuumed.bytes,
            vacuum_seconds: ((ContinuousClock.now - vacuumStart).seconds * 100).rounded() / 100,
            receipts_without_pruning: quiet.latency, receipts_while_pruning: busy.latency,
            receipt_errors: quiet.errors + busy.errors, seed_seconds: (seedSeconds * 10).rounded() / 10)
    }

    /// One look at the log during the steady state.
    struct Sample: Codable {
        var seconds: Double
        var moves: Int
        /// `page_count × page_size` as the store sees it (the write-ahead log's pages counted in).
        var file_bytes: Int
        var free_bytes: Int
    }

    struct Steady: Codable {
        var scenario = "prune-steady"
        var params: [String: String]
        var samples: [Sample]
        var receipts: LatencySummary
        var receipt_errors: Int
        /// Bytes the file grew by over the second half of the run (flat: about zero).
        var growth_over_second_half: Int
    }

    /// Receipts at a constant rate into a fresh log, the pruner running as `ticks serve`
    /// runs it: once the window has passed, the log's rows and the file stop growing.
    func steadyState(seconds: Double, window: ReceiptLogRetention) async throws {
        let (path, store) = try freshStore("prune-steady.sqlite")
        let plans = try await Self.channels(channels, in: store, now: .now())
        let pruner = try pruner(of: store, window: window)
        let reader = try Self.queue(path)
        let started = ContinuousClock.now
        let samples = Locked<[Sample]>([])
        let outcome = try await withThrowingTaskGroup(of: Void.self) { services in
            for service in store.services { services.addTask { try await service.run() } }
            services.addTask { try await pruner.run() }
            services.addTask {
                while true {
                    let sample = try await reader.read { db in
                        let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 0
                        return Sample(
                            seconds: ((ContinuousClock.now - started).seconds * 10).rounded() / 10,
                            moves: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM cursor_move") ?? 0,
                            file_bytes: (try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0) * pageSize,
                            free_bytes: (try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0) * pageSize)
                    }
                    samples.withLock { $0.append(sample) }
                    let line = "\(sample.seconds) s: \(sample.moves) moves, \(sample.file_bytes) bytes"
                    FileHandle.standardError.write(Data("\(line) (\(sample.free_bytes) free)\n".utf8))
                    try await Task.sleep(for: .seconds(interval / 2))
                }
            }
            defer { services.cancelAll() }
            return try await ReceiptLoad(store: store, channels: plans, rate: rate).run(for: .seconds(seconds))
        }
        let taken = samples.withLock { $0 }
        let half = taken.first { $0.seconds >= seconds / 2 } ?? taken[0]
        let result = Steady(
            params: [
                "retention": "\(window)", "interval": "\(interval)", "rate": "\(rate)", "seconds": "\(seconds)",
                "batch": "\(batch)", "pause_ms": "\(pauseMs)", "channels": "\(channels)",
            ],
            samples: taken, receipts: outcome.latency, receipt_errors: outcome.errors,
            growth_over_second_half: (taken.last?.file_bytes ?? 0) - half.file_bytes)
        try report(
            [
                "steady state, \(rate) receipts/s for \(seconds) s, retention \(window), a round every \(interval) s:",
                "  the file grew \(result.growth_over_second_half) bytes over the second half; receipts \(outcome.latency.text)",
            ], json: result, asJSON: json)
    }

    /// A channel of two: its pk (for the seeded rows), its id, its sender and reader.
    struct Plan: Sendable {
        var pk: Int64
        var channel: ChannelRecord
        var sender: String
        var reader: String
    }

    /// `count` channels with a sender, a reader and two messages each, made through the store.
    static func channels(_ count: Int, in store: SQLStore, now: Timestamp) async throws -> [Plan] {
        var plans: [Plan] = []
        for index in 0..<count {
            let sender = "s\(index)"
            let reader = "r\(index)"
            _ = try await store.upsertUsers([User(id: sender), User(id: reader)], now: now)
            let (channel, _) = try await store.createChannel(
                ChannelID(type: "messaging", id: "c\(index)"), createdBy: sender, memberIDs: [sender, reader], custom: [:],
                now: now)
            for message in 1...2 {
                _ = try await store.sendMessage(
                    NewMessage(id: "c\(index)-m\(message)", userID: sender, text: "hello", custom: [:]), to: channel,
                    now: now)
            }
            plans.append(Plan(pk: channel.pk, channel: channel, sender: sender, reader: reader))
        }
        return plans
    }

    /// Writes `count` moves, oldest first, evenly over `days` days before `end`,
    /// straight into the log: the shape the server writes (a member's read or
    /// delivered cursor to message 1 or 2), 100,000 a transaction.
    static func seed(_ count: Int, over days: Int, endingAt end: Timestamp, channels: [Plan], path: String) throws {
        let queue = try Self.queue(path)
        let span = Int64(days) * 86_400_000_000
        let start = end.microseconds - span + 1
        var written = 0
        while written < count {
            let chunk = min(100_000, count - written)
            try queue.write { db in
                let insert = try db.makeStatement(
                    sql: "INSERT INTO cursor_move (channel_pk, user_id, kind, seq, at) VALUES (?, ?, ?, ?, ?)")
                for index in written..<(written + chunk) {
                    let plan = channels[index % channels.count]
                    let user = index / channels.count % 4 < 2 ? plan.reader : plan.sender
                    let at = start + Int64(Double(span) * Double(index) / Double(count))
                    try insert.execute(arguments: [plan.pk, user, index % 2, 1 + (index / 2) % 2, at])
                }
            }
            written += chunk
        }
        try queue.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
    }

    /// A connection of the benchmark's own, which waits while the store's checkpointer works.
    static func queue(_ path: String) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.busyMode = .timeout(60)
        return try DatabaseQueue(path: path, configuration: configuration)
    }

    struct Size {
        var moves: Int
        var bytes: Int
        var free: Int
    }

    /// The log's rows and the file's size, the write-ahead log checkpointed into it first.
    static func measure(_ path: String) throws -> Size {
        let queue = try Self.queue(path)
        return try queue.writeWithoutTransaction { db in
            _ = try db.checkpoint(.truncate)
            let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 0
            return Size(
                moves: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM cursor_move") ?? 0,
                bytes: (try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0) * pageSize,
                free: (try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0) * pageSize)
        }
    }

    static func vacuum(_ path: String) throws -> Size {
        let queue = try Self.queue(path)
        try queue.writeWithoutTransaction { db in try db.execute(sql: "VACUUM") }
        return try measure(path)
    }
}

/// Receipts through the store at a fixed rate: each channel's reader reads
/// message 2, then marks it unread, and so on (every receipt moves a cursor).
struct ReceiptLoad: Sendable {
    let store: SQLStore
    let channels: [Prune.Plan]
    let rate: Int
    private let unread = Locked<[Bool]>([])

    init(store: SQLStore, channels: [Prune.Plan], rate: Int) {
        self.store = store
        self.channels = channels
        self.rate = rate
        unread.withLock { $0 = Array(repeating: false, count: channels.count) }
    }

    struct Outcome {
        var latency: LatencySummary
        var errors: Int
    }

    func run(for duration: Duration) async throws -> Outcome {
        try await run(until: { try await Task.sleep(for: duration) })
    }

    /// Receipts until `work` returns; one in flight per channel at most (a reader's marks go in order).
    func run(until work: @escaping @Sendable () async throws -> Void) async throws -> Outcome {
        let histogram = Locked(
            Histogram<UInt64>(highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: .three))
        let errors = Locked(0)
        let busy = Locked(Set<Int>())
        let audience = ReceiptAudience(fullChannelLimit: 100)
        let interval = Duration.seconds(1.0 / Double(rate))
        try await withThrowingTaskGroup(of: Void.self) { group in
            let done = Locked(false)
            group.addTask {
                try await work()
                done.withLock { $0 = true }
            }
            var due = ContinuousClock.now
            var next = 0
            while !done.withLock({ $0 }) {
                try await Task.sleep(until: due)
                let index = next % channels.count
                next += 1
                let scheduled = due
                due += interval
                // A reader still waiting for its previous mark skips its turn.
                guard busy.withLock({ $0.insert(index).inserted }) else { continue }
                let plan = channels[index]
                let unread = self.unread.withLock { flags in
                    defer { flags[index].toggle() }
                    return flags[index]
                }
                group.addTask {
                    do {
                        if unread {
                            _ = try await store.markUnread(
                                plan.reader, in: plan.channel, from: "\(plan.channel.id)-m2", now: .now())
                        } else {
                            _ = try await store.markRead(
                                plan.reader, in: plan.channel.cid, upTo: "\(plan.channel.id)-m2",
                                audience: audience, now: .now())
                        }
                        let micros = UInt64(max((ContinuousClock.now - scheduled).microseconds, 1))
                        histogram.withLock { _ = $0.record(micros) }
                    } catch {
                        errors.withLock { $0 += 1 }
                    }
                    busy.withLock { _ = $0.remove(index) }
                }
            }
            try await group.waitForAll()
        }
        return Outcome(latency: histogram.withLock { LatencySummary($0) }, errors: errors.withLock { $0 })
    }
}

/// A value that must be there; a benchmark with nothing to measure stops.
func requireValue<Value>(_ value: Value?, _ what: String = #function) throws -> Value {
    guard let value else { throw ValidationError("nothing to measure: \(what)") }
    return value
}

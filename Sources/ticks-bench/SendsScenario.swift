import ArgumentParser
import Foundation
import Synchronization

/// Sends into one channel of many members (issue 57, item 6): what a send
/// costs as the channel grows, one at a time and several at once.
struct Sends: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "One author sends into one channel of M members, S sends in flight at once: rate, latency, errors.")

    @OptionGroup var server: ServerOptions
    @Option(help: "Members of the channel, the author included (2–100,000).") var members = 100
    @Option(help: "Sends in flight at once (1–256).") var senders = 1
    @Option(help: "Sends measured (after 10 unmeasured ones), 1–100,000.") var messages = 200
    @Option(help: "HTTP connections to the server.") var connections = 16
    @Option(help: "A database's process (PostgreSQL's postmaster): its CPU and its children's over the measured sends.")
    var databasePid: Int32?

    struct Result: Codable {
        var scenario = "sends"
        var params: [String: Int]
        /// Sends answered 2xx per second, over the measured sends.
        var achieved_rate: Double
        /// Each send, from its request to its answer (2xx only).
        var latency_ms: LatencySummary
        /// Answers other than 2xx, by status ("0": no answer).
        var errors: [String: Int]
        /// The server's CPU (user and system, its `/metrics`) over the measured sends, per answered send.
        var server_cpu_us_per_send: Double?
        /// This process's CPU over the measured sends, per send.
        var generator_cpu_us_per_send: Double?
        /// With --database-pid: that process's CPU and its children's over the measured sends, per answered send.
        var database_cpu_us_per_send: Double?
    }

    func validate() throws {
        guard (2...100_000).contains(members) else { throw ValidationError("--members must be 2–100,000") }
        guard (1...256).contains(senders) else { throw ValidationError("--senders must be 1–256") }
        guard (1...100_000).contains(messages) else { throw ValidationError("--messages must be 1–100,000") }
    }

    func run() async throws {
        try await server.withTicks(connections: max(connections, senders)) { ticks in
            let result = try await measure(ticks)
            let errors = result.errors.isEmpty ? "none" : result.errors.sorted { $0.key < $1.key }
                .map { "\($0.value) × \($0.key)" }.joined(separator: ", ")
            try report(
                [
                    "sends into \(members) members, \(senders) at once: \(result.achieved_rate)/s; \(result.latency_ms.text)",
                    "  errors: \(errors); server CPU per send: "
                        + "\(result.server_cpu_us_per_send.map { "\($0) µs" } ?? "not reported")"
                        + (result.database_cpu_us_per_send.map { "; database CPU per send: \($0) µs" } ?? ""),
                ], json: result, asJSON: server.json)
        }
    }

    func measure(_ ticks: TicksTarget) async throws -> Result {
        let prefix = runPrefix()
        let ids = (0..<members).map { "\(prefix)m\($0)" }
        try await ticks.upsertUsers(ids)
        let channel = "\(prefix)s"
        let path = "/channels/messaging/\(channel)"
        try await ticks.createChannel(channel, members: ids)
        let token = try await ticks.tokens.user(ids[0])
        let send = { @Sendable (id: String) async throws in
            try await ticks.http.call(
                .POST, ticks.url("\(path)/message"), headers: ticks.headers(token),
                json: "{\"message\": {\"id\": \"\(id)\", \"text\": \"a message to everyone\"}}")
        }
        // Warm: the first sends fill caches and the connection pool; they are not measured.
        try await forEachConcurrently(Array(0..<10), width: senders) { n in _ = try await send("\(prefix)w\(n)") }

        let histogram = LatencyBook()
        let errors = Locked([String: Int]())
        let answered = Counter()
        let cpu0 = try await ticks.serverCPUSeconds()
        let database0 = databasePid.flatMap(processTreeCPUSeconds(root:))
        let generator0 = processCPUSeconds()
        let start = ContinuousClock.now
        try await forEachConcurrently(Array(0..<messages), width: senders) { n in
            let id = "\(prefix)x\(n)"
            histogram.start(id)
            do {
                _ = try await send(id)
                histogram.seen(id)
                answered.increment()
            } catch let failure as HTTP.Failure {
                histogram.cancel(id)
                errors.withLock { $0["\(failure.status)", default: 0] += 1 }
            } catch {
                histogram.cancel(id)
                errors.withLock { $0["0", default: 0] += 1 }
            }
        }
        let elapsed = (ContinuousClock.now - start).seconds
        let generator = processCPUSeconds() - generator0
        let database = processTreeCPUSeconds(root: databasePid, since: database0)
        let cpu1 = try await ticks.serverCPUSeconds()
        return Result(
            params: ["members": members, "senders": senders, "messages": messages],
            achieved_rate: (Double(answered.value) / elapsed * 10).rounded() / 10, latency_ms: histogram.summary,
            errors: errors.withLock { $0 },
            server_cpu_us_per_send: microsecondsEach(
                cpu0.flatMap { before in cpu1.map { $0 - before } }, over: answered.value),
            generator_cpu_us_per_send: microsecondsEach(generator, over: messages),
            database_cpu_us_per_send: microsecondsEach(database, over: answered.value))
    }
}

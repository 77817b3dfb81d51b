import ArgumentParser
import Foundation

/// The socket path's floor (bench/floors): a bare frame in and an answer
/// frame out on authenticated sockets, at a target rate. Each socket sends
/// `health.check` and waits for the server's `health.check` before the
/// next, as a reader waits for a receipt's ack; the server's part is its
/// WebSocket framing, one string test and one small event encoded, so its
/// CPU per frame is what any frame on a socket costs before Ticks does
/// anything with it.
struct Pings: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The socket's floor: health.check frames at a target rate, each answered; server CPU per frame.")

    @OptionGroup var server: ServerOptions
    @Option(help: "Sockets, one user each.") var sockets = 100
    @Option(help: "Target frames per second, over all the sockets.") var rate = 1000
    @Option(help: "Seconds of load.") var duration = 10.0

    struct Result: Codable {
        var scenario = "pings"
        var sockets: Int
        var rate: Int
        var duration: Double
        var achieved_rate: Double
        var latency_ms: LatencySummary
        var errors: Int
        /// The server's CPU time (its `/metrics`) over the load, divided by the frames it answered.
        var server_cpu_us_per_frame: Double?
        /// This generator's own CPU over the load, per frame answered.
        var client_cpu_us_per_frame: Double?
    }

    func run() async throws {
        guard sockets > 0, rate > 0, duration > 0 else {
            throw ValidationError("--sockets, --rate and --duration: positive")
        }
        let ticks = try await server.ticks(connections: 4)
        let prefix = runPrefix()
        let ids = (0..<sockets).map { "\(prefix)p\($0)" }
        try await ticks.upsertUsers(ids)
        var signed: [String] = []
        for id in ids { signed.append(try await ticks.tokens.user(id)) }
        let tokens = signed
        let connected = Counter()
        let pingers = (0..<sockets).map { _ in ReaderSocket(answeredBy: #""type":"health.check""#) }
        let tasks = (0..<sockets).map { index in
            Task {
                await ticks.runSocket(
                    user: ids[index], token: tokens[index], connected: connected, on: ticks.baseURL,
                    outgoing: pingers[index].frames
                ) { frame in pingers[index].received(frame) }
            }
        }
        let deadline = ContinuousClock.now + .seconds(60)
        while connected.value < sockets {
            guard ContinuousClock.now < deadline else {
                throw ValidationError("only \(connected.value) of \(sockets) sockets connected")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let book = LatencyBook()
        let (answered, errors) = (Counter(), Counter())
        let interval = Duration.seconds(Double(sockets) / Double(rate))
        let cpuBefore = try await ticks.serverCPUSeconds()
        let clientCPUBefore = processCPUSeconds()
        let start = ContinuousClock.now + .milliseconds(200)
        let end = start + .seconds(duration)
        try await paced(workers: sockets, interval: interval, from: start, until: end) { index, op in
            let key = "\(index)/\(op)"
            book.start(key)
            do {
                try await pingers[index].send(#"{"type":"health.check"}"#)
                book.seen(key)
                answered.increment()
            } catch {
                book.cancel(key)
                errors.increment()
            }
        }
        let elapsed = max((ContinuousClock.now - start).seconds, duration)
        let clientCPU = processCPUSeconds() - clientCPUBefore
        let cpuAfter = try await ticks.serverCPUSeconds()
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
        await ticks.http.shutdown()
        let serverCPU = cpuBefore.flatMap { before in cpuAfter.map { $0 - before } }
        let result = Result(
            sockets: sockets, rate: rate, duration: duration,
            achieved_rate: (Double(answered.value) / elapsed * 10).rounded() / 10, latency_ms: book.summary,
            errors: errors.value, server_cpu_us_per_frame: microsecondsEach(serverCPU, over: answered.value),
            client_cpu_us_per_frame: microsecondsEach(clientCPU, over: answered.value))
        try report(
            [
                "pings on \(sockets) sockets, target \(rate)/s for \(duration)s: achieved \(result.achieved_rate)/s,"
                    + " errors \(result.errors)",
                "  frame → answer latency: \(result.latency_ms.text)",
                "  server CPU per frame: \(result.server_cpu_us_per_frame.map { "\($0) µs" } ?? "not reported")",
            ], json: result, asJSON: server.json)
    }
}

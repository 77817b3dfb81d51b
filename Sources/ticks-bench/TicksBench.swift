import ArgumentParser
import Foundation

@main
struct TicksBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ticks-bench",
        abstract: "Load generator for Ticks (and Matrix Synapse): real HTTP and WebSocket clients.",
        subcommands: [
            Receipts.self, Group.self, Sends.self, Connections.self, Storage.self, SDKCache.self, Prune.self, Pings.self,
        ])
}

/// Where the Ticks server is and how to make tokens for it.
struct ServerOptions: ParsableArguments {
    @Option(help: "The Ticks server.") var url = "http://127.0.0.1:3030"
    @Option(
        name: .customLong("socket-url"),
        help: "Where the WebSockets connect, when not --url: another node of the same cluster.")
    var socketURL: String?
    @Option(name: .customLong("api-key"), help: "API key (or TICKS_API_KEY).") var apiKey: String?
    @Option(name: .customLong("api-secret"), help: "API secret, to sign tokens (or TICKS_API_SECRET).")
    var apiSecret: String?
    @Option(name: .customLong("data-dir"), help: "Read the credentials from this data folder if not given.")
    var dataDirectory = ".ticks"
    @Flag(help: "Print one JSON object on stdout (the summary goes to stderr).") var json = false

    /// The key and secret from the flags, the environment, or the data folder.
    func credentials() throws -> (key: String, secret: String) {
        let environment = ProcessInfo.processInfo.environment
        if let key = apiKey ?? environment["TICKS_API_KEY"], let secret = apiSecret ?? environment["TICKS_API_SECRET"] {
            return (key, secret)
        }
        let file = URL(fileURLWithPath: dataDirectory).appendingPathComponent("credentials.json")
        guard let data = try? Data(contentsOf: file),
            let object = try JSONSerialization.jsonObject(with: data) as? [String: String],
            let key = object["api_key"], let secret = object["api_secret"]
        else {
            throw ValidationError("give --api-key and --api-secret, or --data-dir with credentials.json")
        }
        return (key, secret)
    }

    /// `body` with a Ticks target whose HTTP client is shut down afterwards, whatever happens.
    func withTicks<T>(connections: Int, _ body: (TicksTarget) async throws -> T) async throws -> T {
        let ticks = try await ticks(connections: connections)
        do {
            let value = try await body(ticks)
            await ticks.http.shutdown()
            return value
        } catch {
            await ticks.http.shutdown()
            throw error
        }
    }

    func ticks(connections: Int) async throws -> TicksTarget {
        let (key, secret) = try credentials()
        func trimmed(_ url: String) -> String { url.hasSuffix("/") ? String(url.dropLast()) : url }
        return TicksTarget(
            baseURL: trimmed(url), socketBaseURL: trimmed(socketURL ?? url), apiKey: key,
            tokens: await Tokens(secret: secret), http: HTTP(connections: connections))
    }
}

struct Receipts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Readers mark delivered and read at a target rate; latency until the sender's socket sees it.")

    @OptionGroup var server: ServerOptions
    @Option(help: "ticks or synapse.") var target = "ticks"
    @Option(help: "Synapse's base URL (with --target synapse).") var synapseURL = "http://127.0.0.1:8008"
    @Option(help: "Channels (Matrix: rooms).") var channels = 200
    @Option(help: "Members per channel, 2 or 3 (one sender, the rest readers).") var members = 2
    @Option(help: "Target receipts per second, or a comma-separated list to sweep.") var rate = "1000"
    @Option(help: "Seconds of load per rate.") var duration = 10.0
    @Option(help: "read, or delivered,read (Ticks only).") var kinds = "delivered,read"
    @Option(help: "HTTP connections to the server.") var connections = 64
    @Option(help: "With a sweep: the p99 bound (ms) the highest passing rate must meet.") var p99Bound = 10.0
    @Option(help: "How readers send receipts: http, or socket (frames on sockets of their own; Ticks only).")
    var via = "http"
    @Option(help: "A database's process (PostgreSQL's postmaster): its CPU and its children's over the load.")
    var databasePid: Int32?

    func run() async throws {
        guard (2...3).contains(members) else { throw ValidationError("--members is 2 or 3") }
        guard via == "http" || (via == "socket" && target == "ticks") else {
            throw ValidationError("--via is http, or socket with --target ticks")
        }
        let rates = rate.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !rates.isEmpty, rates.allSatisfy({ $0 > 0 }) else { throw ValidationError("--rate: positive numbers") }
        let kinds = self.kinds.split(separator: ",").compactMap { ReceiptKind(rawValue: String($0)) }
        guard !kinds.isEmpty, kinds.last == .read else { throw ValidationError("--kinds is read or delivered,read") }
        let receiptTarget: any ReceiptTarget
        let http: HTTP
        switch target {
        case "ticks":
            var ticks = try await server.ticks(connections: connections)
            if via == "socket" { ticks.readerSockets = ReaderSockets() }
            receiptTarget = ticks
            http = ticks.http
        case "synapse":
            guard kinds == [.read] else { throw ValidationError("Matrix has read receipts only: --kinds read") }
            http = HTTP(connections: connections)
            receiptTarget = SynapseTarget(baseURL: synapseURL, http: http)
        default:
            throw ValidationError("--target is ticks or synapse")
        }
        var results: [ReceiptsScenario.Result] = []
        do {
            for rate in rates {
                let result = try await ReceiptsScenario(
                    target: receiptTarget,
                    parameters: .init(
                        target: target, channels: channels, members: members, rate: rate, duration: duration,
                        kinds: kinds, via: via),
                    databasePid: databasePid
                ).run()
                results.append(result)
                if rates.count > 1 {
                    FileHandle.standardError.write(
                        Data((ReceiptsScenario.describe(result).joined(separator: "\n") + "\n").utf8))
                }
            }
        } catch {
            await http.shutdown()
            throw error
        }
        await http.shutdown()
        if rates.count == 1, let only = results.first {
            try report(ReceiptsScenario.describe(only), json: only, asJSON: server.json)
        } else {
            let passing = results.filter { $0.latency_ms.p99 <= p99Bound && $0.errors == 0 && $0.missing == 0 }
            let best = passing.map(\.params.rate).max()
            struct Sweep: Encodable {
                var scenario = "receipts-sweep"
                var p99_bound_ms: Double
                var highest_rate_within_bound: Int?
                var runs: [ReceiptsScenario.Result]
            }
            try report(
                ["highest rate with p99 ≤ \(p99Bound) ms: \(best.map(String.init) ?? "none")"],
                json: Sweep(p99_bound_ms: p99Bound, highest_rate_within_bound: best, runs: results), asJSON: server.json)
        }
    }
}

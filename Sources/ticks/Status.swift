import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import TicksProtocol
import TicksServer

/// `ticks status`: a node's `GET /admin/status`, for a person.
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show how a running server is doing: connections, webhooks, the bus, the store (GET /admin/status).",
        discussion: """
            It signs a server token with the app secret that expires \(Int(tokenLifetime)) seconds after it is made, \
            so a token that leaks on its way to --url is soon worth nothing.
            """)

    /// How long the server token it sends is good for.
    static let tokenLifetime: TimeInterval = 60

    @Option(help: "The server's URL.") var url: String = "http://127.0.0.1:3030"
    @OptionGroup var credentialOptions: CredentialOptions
    @Flag(help: "Print the answer's JSON as it came.") var json = false

    func run() async throws {
        // It asks a server and keeps nothing: no data folder or credentials are made here.
        let (credentials, _) = try credentialOptions.resolve(creating: false)
        let token = try await TokenAuthority(credentials: credentials).serverToken(expiresIn: Self.tokenLifetime)
        guard var components = URLComponents(string: url), components.host != nil else {
            throw ValidationError("--url must be a URL such as http://127.0.0.1:3030")
        }
        components.path = components.path.hasSuffix("/") ? components.path + "admin/status" : components.path + "/admin/status"
        components.queryItems = [URLQueryItem(name: "api_key", value: credentials.apiKey)]
        var request = HTTPClientRequest(url: components.string ?? url)
        request.headers.add(name: "Authorization", value: token)
        request.headers.add(name: "stream-auth-type", value: "jwt")
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let (status, body): (UInt, ByteBuffer)
        do {
            let response = try await client.execute(request, timeout: .seconds(10))
            status = response.status.code
            body = try await response.body.collect(upTo: 1 << 20)
            try await client.shutdown()
        } catch {
            try? await client.shutdown()
            throw StatusError("could not reach \(url): \(error)")
        }
        let data = Data(buffer: body)
        guard status == 200 else {
            throw StatusError("\(url) answered \(status): \(String(decoding: data, as: UTF8.self))")
        }
        if json {
            print(String(decoding: data, as: UTF8.self))
            return
        }
        print(Self.render(try JSONDecoder().decode(NodeStatus.self, from: data), url: url))
    }

    struct StatusError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    static func render(_ status: NodeStatus, url: String) -> String {
        var lines = [
            "Ticks \(status.version) (\(status.commit)) at \(url), up \(duration(status.uptimeSeconds)) since \(status.startedAt)",
            "store        \(status.store.kind), "
                + (status.store.unreachableSince.map { "UNREACHABLE since \($0)" + (status.store.sizeBytes == nil ? "" : ", ") } ?? "")
                + (status.store.sizeBytes.map(bytes) ?? "")
                + (status.store.unavailableCalls > 0
                    ? "; \(status.store.unavailableCalls) calls answered 503 since the start"
                        + (status.store.timedOutCalls.map { " (\($0) at the deadline)" } ?? "") : ""),
            "receipt log  "
                + (status.store.oldestReceiptMove.map { "oldest move \($0)" } ?? "empty") + ", "
                + (status.store.receiptLogRetentionSeconds.map { "kept \(duration($0))" } ?? "kept forever"),
            "connections  \(status.connections.open) open (\(status.connections.users) users), "
                + "\(status.connections.slowClosed) closed as too slow since the start",
        ]
        let hooks = status.webhooks
        if hooks.enabled || !hooks.receivers.isEmpty {
            lines.append(
                "webhooks     \(hooks.enabled ? (hooks.sending ? "this node sends" : "another node sends") : "off here"); "
                    + "\(hooks.waiting) waiting, \(hooks.dead) dead")
            for receiver in hooks.receivers {
                lines.append(
                    "  \(receiver.hook) \(receiver.url): \(receiver.waiting) waiting"
                        + (receiver.oldestWaiting.map { " (oldest \($0))" } ?? "") + ", \(receiver.dead) dead")
            }
        } else {
            lines.append("webhooks     none")
        }
        if let bus = status.bus {
            lines.append(
                "bus          node \(bus.node), \(bus.listening ? "listening" : "NOT LISTENING"), "
                    + "\(bus.queuedEvents) queued, \(bus.eventsLost) lost since the start")
        } else {
            lines.append("bus          none (one node)")
        }
        lines.append(
            "process      \(status.process.residentMemoryBytes.map(bytes) ?? "?") resident, "
                + String(format: "%.1f s CPU", status.process.cpuSeconds))
        return lines.joined(separator: "\n")
    }

    static func bytes(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f ", value) + units[unit]
    }

    static func duration(_ seconds: Int64) -> String {
        let days = seconds / 86_400
        let hours = seconds % 86_400 / 3_600
        let minutes = seconds % 3_600 / 60
        if days > 0 { return "\(days) d \(hours) h" }
        if hours > 0 { return "\(hours) h \(minutes) min" }
        if minutes > 0 { return "\(minutes) min \(seconds % 60) s" }
        return "\(seconds) s"
    }
}

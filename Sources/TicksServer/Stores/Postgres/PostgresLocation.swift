import Foundation
import NIOSSL
import PostgresNIO

/// Where the PostgreSQL store is, from a URL:
/// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|require][&schema=NAME]`.
///
/// `schema` (default `public`) keeps Ticks' tables apart from others in the
/// same database; it also names the event bus's notification channel.
public struct PostgresLocation: Sendable, Equatable {
    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    public var requireTLS: Bool
    public var schema: String

    public init(url text: String) throws {
        guard let url = URLComponents(string: text), url.scheme == "postgres" || url.scheme == "postgresql",
            let host = url.host, !host.isEmpty
        else {
            throw PostgresLocationError.invalid("'\(text)' is not a postgres://USER@HOST:PORT/DATABASE URL")
        }
        guard let user = url.user, !user.isEmpty else {
            throw PostgresLocationError.invalid("the URL names no user: postgres://USER@HOST:PORT/DATABASE")
        }
        let database = String(url.path.drop { $0 == "/" })
        guard !database.isEmpty else {
            throw PostgresLocationError.invalid("the URL names no database: postgres://USER@HOST:PORT/DATABASE")
        }
        let query = Dictionary(
            (url.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { _, last in last })
        switch query["sslmode"] ?? "disable" {
        case "disable": requireTLS = false
        case "require", "verify-full": requireTLS = true
        case let mode: throw PostgresLocationError.invalid("sslmode=\(mode) is not supported: use disable or require")
        }
        let schema = query["schema"] ?? "public"
        guard !schema.isEmpty, schema.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
            throw PostgresLocationError.invalid("schema must be letters, digits and _")
        }
        self.host = host
        self.port = url.port ?? 5432
        self.username = user.removingPercentEncoding ?? user
        self.password = url.password.map { $0.removingPercentEncoding ?? $0 }
        self.database = database
        self.schema = schema
    }

    /// The URL without the password, for logs and the start-up banner.
    public var redacted: String {
        "postgres://\(username)@\(host):\(port)/\(database)" + (schema == "public" ? "" : "?schema=\(schema)")
    }

    var tls: PostgresConnection.Configuration.TLS {
        get throws {
            requireTLS ? .require(try NIOSSLContext(configuration: .makeClientConfiguration())) : .disable
        }
    }

    /// For the store's pool; every connection uses `schema`. Prepared
    /// statements (`PreparedStatements.swift`) are planned once, generically:
    /// left to choose, PostgreSQL planned the batched receipts' statement
    /// afresh at every call (1.1 ms of planning for 0.3 ms of work).
    ///
    /// The server drops a connection whose client stopped answering at the
    /// TCP level within about `silence` + 3 s: a node cut off by a silent
    /// partition in the middle of a transaction cannot tell the server it
    /// gave up (its close never arrives), and the server would keep that
    /// transaction's row locks — on users every channel shares — until TCP
    /// gave up on its own, hours later (keepalives) or minutes (unacknowledged
    /// data), holding up every other node. So each session asks for
    /// keepalive probes after `silence` idle, one a second, three missed
    /// ending it, and for data unacknowledged after `silence` to end it
    /// (`tcp_user_timeout`). A client that is alive but slow (its CPU
    /// saturated) still acknowledges at the TCP level and keeps its
    /// transaction, which `idle_in_transaction_session_timeout` would not
    /// allow: it ended transactions of a saturated test run and broke them.
    public func clientConfiguration(silence: Duration = StoreDeadline.defaultTimeout)
        -> PostgresClient.Configuration
    {
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database,
            tls: requireTLS ? .require(.makeClientConfiguration()) : .disable)
        configuration.options.additionalStartupParameters =
            [("search_path", schema), ("plan_cache_mode", "force_generic_plan")] + Self.keepalives(silence)
        configuration.options.maximumConnections = 32
        // postgres-nio's pool arms a keep-alive timer and, above its minimum, an idle timer, each
        // a task of its own with a task group of two, every time a connection is given back, and
        // cancels them at the next lease: every batch of receipts, every publish of the bus. Two
        // connections kept (the lane's and the bus's) and no keep-alive: at saturation the node's
        // CPU a receipt 0.80× (`bench/ab`, docs/benchmarks-history.md, 2026-12-05). A connection
        // the server dropped is found by its first statement, and the store's deadline and probe
        // (`PostgresPool`) cover one that went silent, as they did.
        configuration.options.minimumConnections = 2
        configuration.options.keepAliveBehavior = nil
        return configuration
    }

    /// For a connection of its own (the event bus's listener and publisher), dropped by the
    /// server like the pool's when the node stops answering (`clientConfiguration(silence:)`).
    public func connectionConfiguration(silence: Duration = StoreDeadline.defaultTimeout) throws
        -> PostgresConnection.Configuration
    {
        var configuration = PostgresConnection.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: try tls)
        configuration.options.additionalStartupParameters = [("search_path", schema)] + Self.keepalives(silence)
        return configuration
    }

    /// The session settings that have the server drop a connection about `silence` + 3 s
    /// after its client stopped answering at the TCP level.
    static func keepalives(_ silence: Duration) -> [(String, String)] {
        let seconds = max(1, silence.components.seconds + (silence.components.attoseconds > 0 ? 1 : 0))
        return [
            ("tcp_keepalives_idle", String(seconds)), ("tcp_keepalives_interval", "1"),
            ("tcp_keepalives_count", "3"), ("tcp_user_timeout", String(seconds * 1_000)),
        ]
    }
}

public enum PostgresLocationError: Error, CustomStringConvertible {
    case invalid(String)

    public var description: String {
        switch self {
        case .invalid(let message): "--postgres-url: \(message)"
        }
    }
}

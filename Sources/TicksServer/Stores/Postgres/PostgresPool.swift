import Logging
import PostgresNIO
import _ConnectionPoolModule
import ServiceLifecycle
import Synchronization
import TicksProtocol

/// The store's connections to PostgreSQL: postgres-nio's `PostgresClient`,
/// renewed when the database is back after an outage.
///
/// Why renew: while the database refuses connections, the client retries
/// one connection with a backoff that grows by a quarter each attempt (100 ms
/// × 1.25ⁿ, up to a minute). After 30 s of refusals the next attempt is ~7 s
/// away, so a node stayed 503 for seconds after the database was back
/// (measured: 7.1 s; the test allows 5). So while `StoreHealth` says the
/// store is away, `run()` tries a connection of its own every
/// `probeInterval`; once one opens and answers, a fresh client takes the
/// place of the one that lost its connections (it may be backing off), the
/// old one is shut down, and `StoreHealth` hears that the store is back.
/// Meanwhile no call waits on the pool: the health says the store is away,
/// and every call fails at once (`StoreHealth.awayWhileProbed()`). A call
/// still waiting for a connection of the old client when it is shut down
/// takes one of the new client instead (`withConnection`).
final class PostgresPool: Service, Sendable {
    private let configuration: PostgresClient.Configuration
    private let probe: PostgresConnection.Configuration
    let health: StoreHealth
    private let time: TimeSource
    private let probeInterval: Duration
    private let logger: Logger

    private struct Current {
        var client: PostgresClient
        var runner: Task<Void, Never>?
        var renewals = 0
    }

    private let current: Mutex<Current>

    /// - Parameters:
    ///   - probe: how the probe connects (its own connection, a short connect timeout).
    ///   - health: whether the store answers; the probe runs while it does not.
    ///   - time: the clock of the probe's rounds.
    init(
        configuration: PostgresClient.Configuration, probe: PostgresConnection.Configuration, health: StoreHealth,
        time: TimeSource = .system, probeInterval: Duration = .milliseconds(250), logger: Logger
    ) {
        var configuration = configuration
        // postgres-nio does not check it: a minimum above the maximum fails a precondition in its
        // pool (`ConnectionGroup.createNewConnection`) and kills the process. FailFastTests' pool
        // of one connection crashes without this line (checked 2026-12-05).
        configuration.options.minimumConnections = min(
            configuration.options.minimumConnections, configuration.options.maximumConnections)
        self.configuration = configuration
        var probe = probe
        probe.options.connectTimeout = .seconds(1)
        self.probe = probe
        self.health = health
        self.time = time
        self.probeInterval = probeInterval
        self.logger = logger
        current = Mutex(Current(client: PostgresClient(configuration: configuration, backgroundLogger: logger)))
        health.probing()
    }

    /// The client connections are leased from now.
    var client: PostgresClient { current.withLock { $0.client } }

    /// How many times the client was renewed since the start.
    var renewals: Int { current.withLock { $0.renewals } }

    /// `body` on a connection of the current client. A client shut down while
    /// the call waited for one of its connections (it was renewed) never ran
    /// `body`: postgres-nio answers a lease it cannot give any more with
    /// `ConnectionPoolError.poolShutdown` (`PSQLError.poolClosed` where it maps
    /// it), and a query on a connection that closes fails otherwise. The call
    /// then waits on the client that replaced it instead of failing.
    func withConnection<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        while true {
            let client = self.client
            do {
                return try await client.withConnection(body)
            } catch where Self.leaseRefused(error) && self.client !== client {
                continue
            }
        }
    }

    /// Whether `error` says the client was shut down before it gave a connection.
    private static func leaseRefused(_ error: any Error) -> Bool {
        if let error = error as? ConnectionPoolError { return error == .poolShutdown }
        if let error = error as? PSQLError { return error.code == .poolClosed }
        return false
    }

    /// Runs the client (and those that replace it) and the probe, until shutdown.
    func run() async throws {
        start(current.withLock { $0.client })
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await self.time.sleep(for: self.probeInterval)
                } catch {
                    return
                }
                guard self.health.unreachableSince != nil else { continue }
                let why = self.health.reasonWhy
                guard await self.databaseAnswers() else { continue }
                // The connections were refused or dropped: the client may be backing off, so a fresh one
                // takes its place. A database that was only slow, or whose disk filled, keeps its client.
                if case .unreachable? = why { self.renew() }
                self.health.probeAnswered()
            }
        }
        let runner = current.withLock { $0.runner }
        runner?.cancel()
        await runner?.value
    }

    private func start(_ client: PostgresClient) {
        let runner = Task { await client.run() }
        current.withLock { $0.runner = runner }
    }

    /// A fresh client takes the place of the current one, which is shut down.
    func renew() {
        let fresh = PostgresClient(configuration: configuration, backgroundLogger: logger)
        let runner = Task { await fresh.run() }
        let old = current.withLock { current -> Task<Void, Never>? in
            defer {
                current.client = fresh
                current.runner = runner
                current.renewals += 1
            }
            return current.runner
        }
        old?.cancel()
        logger.notice("the database answers again: renewed the connection pool, which was still backing off")
    }

    /// Whether a connection of the probe's own opens and answers `SELECT 1`, within two seconds.
    private func databaseAnswers() async -> Bool {
        do {
            try await StoreDeadline(timeout: .seconds(2), time: time).run { [probe, logger] in
                let connection = try await PostgresConnection.connect(configuration: probe, id: 3, logger: logger)
                let expiry = StoreDeadline.expiry
                let registration = expiry?.closes(connection)
                // Closed and waited for, whatever the answer: a connection may not be dropped open.
                let answered: Result<Void, any Error>
                do {
                    _ = try await connection.query("SELECT 1", logger: logger).collect()
                    answered = .success(())
                } catch {
                    answered = .failure(error)
                }
                expiry?.forget(registration)
                try? await connection.close()
                try answered.get()
            }
            return true
        } catch {
            return false
        }
    }
}

import ArgumentParser
import Foundation
import Logging
import NIOPosix
import PostgresNIO
import ServiceLifecycle
import TicksProtocol
import TicksServer

@main
struct Ticks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ticks",
        abstract: "Ticks: message delivery and read receipts, speaking Stream Chat's API.",
        version: "ticks \(BuildInfo.version) (commit \(BuildInfo.commit))",
        subcommands: [Serve.self, Token.self, Backup.self, Restore.self, Status.self],
        defaultSubcommand: Serve.self)

    /// Swift's tasks run on NIO's event loops, the threads that read and write
    /// the sockets: a request's handler, the store's reads and the events'
    /// fan-out run on the loop that read the request, instead of a hop to
    /// Swift's own thread pool and back for each (BENCHMARKS.md, issue 26).
    /// `TICKS_EXECUTOR=swift` keeps Swift's pool (to compare). Installed
    /// first, before any task of ours starts; NIO allows it once per process.
    static func main() async {
        if ProcessInfo.processInfo.environment["TICKS_EXECUTOR"] != "swift" {
            NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        }
        await main(nil)
    }
}

/// Options shared by the commands that need the app's credentials.
struct CredentialOptions: ParsableArguments {
    @Option(name: .customLong("data-dir"), help: "Folder for the database and generated credentials.")
    var dataDirectory: String = ".ticks"

    @Option(name: .customLong("api-key"), help: "API key (or TICKS_API_KEY).")
    var apiKey: String?

    @Option(name: .customLong("api-secret"), help: "API secret, at least 32 bytes (or TICKS_API_SECRET).")
    var apiSecret: String?

    var dataURL: URL { URL(fileURLWithPath: dataDirectory, isDirectory: true) }

    /// Flags first, then the environment, then the credentials file in the data
    /// folder (generated on first use, unless `creating` is false: then a
    /// missing file is an error and nothing is made).
    func resolve(creating: Bool = true) throws -> (credentials: Credentials, source: String) {
        let environment = ProcessInfo.processInfo.environment
        let key = apiKey ?? environment["TICKS_API_KEY"]
        let secret = apiSecret ?? environment["TICKS_API_SECRET"]
        switch (key, secret) {
        case (let key?, let secret?):
            return (try Credentials(apiKey: key, apiSecret: secret), "given on the command line or in the environment")
        case (nil, nil) where !creating:
            guard let credentials = try CredentialsFile.load(from: dataURL) else {
                throw ValidationError(
                    "no credentials in \(CredentialsFile.path(in: dataURL)): give --data-dir of the server's folder, "
                        + "or --api-key and --api-secret (or TICKS_API_KEY and TICKS_API_SECRET)")
            }
            return (credentials, "kept in \(CredentialsFile.path(in: dataURL))")
        case (nil, nil):
            try PrivateFiles.makeFolder(dataURL)
            let (credentials, created) = try CredentialsFile.loadOrCreate(in: dataURL)
            let path = CredentialsFile.path(in: dataURL)
            return (credentials, created ? "generated and kept in \(path)" : "kept in \(path)")
        default:
            throw ValidationError("give both the API key and the API secret, or neither")
        }
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the Ticks server (SQLite in the data folder, or PostgreSQL with --postgres-url).")

    @Option(help: "Address to listen on.") var host: String = "127.0.0.1"
    @Option(help: "Port to listen on.") var port: Int = 3030
    @OptionGroup var credentialOptions: CredentialOptions
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.") var logLevel: String = "info"
    @Option(
        name: .customLong("postgres-url"),
        help: """
            Keep state in PostgreSQL, shared with other nodes (or TICKS_POSTGRES_URL): \
            postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=require][&schema=NAME]
            """)
    var postgresURL: String?
    @Option(
        name: .customLong("migrations-up-to"),
        help: ArgumentHelp(
            "PostgreSQL: apply the schema's migrations only up to this one (how the upgrade test plays an older release).",
            visibility: .hidden))
    var migrationsUpTo: String?
    @Option(
        name: .customLong("store-timeout"),
        help: """
            Seconds a request waits on the database before it is answered 503 with Retry-After \
            (or TICKS_STORE_TIMEOUT; docs/operations.md, "When the database goes away").
            """)
    var storeTimeout: Double?
    @Option(
        help: """
            Seconds a graceful shutdown (SIGTERM) may take; then what is left is cancelled, logged, \
            and the exit status is 1 (docs/operations.md, "Install on a server").
            """)
    var shutdownTimeout: Int = 15
    @Option(
        name: .customLong("cors-origin"),
        help: ArgumentHelp(
            "A web page origin whose scripts may call the API from a browser; repeat for several, or none (default: any).",
            valueName: "https://chat.example.com"))
    var corsOrigins: [String] = []
    @Flag(help: "Serve the web demo at / and hand out user tokens to anyone who asks (never in production).")
    var demo = false
    @Flag(
        name: .customLong("demo-allow-remote"),
        help: "Allow --demo on an address other hosts can reach (anyone there may act as any user).")
    var demoAllowRemote = false
    @Option(
        name: .customLong("otel-endpoint"),
        help: """
            Export OpenTelemetry traces over OTLP/HTTP to this collector (or TICKS_OTEL_ENDPOINT), \
            e.g. http://127.0.0.1:4318; off when unset.
            """)
    var otelEndpoint: String?
    @Option(
        name: .customLong("metrics-port"),
        help: """
            Serve GET /metrics on this port of --metrics-host only, not on --port (or TICKS_METRICS_PORT): \
            keeps the metrics off a public --host (docs/operations.md, "Watch it").
            """)
    var metricsPort: Int?
    @Option(
        name: .customLong("metrics-host"),
        help: "The address --metrics-port listens on (or TICKS_METRICS_HOST; default 127.0.0.1).")
    var metricsHost: String?
    @Flag(
        name: .customLong("allow-newer-schema"),
        help: "SQLite: serve a database a newer Ticks migrated (a downgrade; refused without it).")
    var allowNewerSchema = false
    @OptionGroup(title: "Limits") var limitOptions: LimitOptions
    @OptionGroup(title: "Webhooks") var webhookOptions: WebhookOptions
    @OptionGroup(title: "Receipt log") var retentionOptions: RetentionOptions

    func validate() throws {
        if demo, !Self.isLoopback(host), !demoAllowRemote {
            throw ValidationError(
                """
                --demo hands a token for any user to whoever asks, so it listens on loopback only:                 '\(host)' is reachable from other hosts. Use --host 127.0.0.1, or add --demo-allow-remote                 if you really mean it.
                """)
        }
        _ = try limitOptions.rateLimits()
        _ = try webhookOptions.settings()
        if let endpoint = otelEndpoint { _ = try Traces.tracesURL(for: endpoint) }
        _ = try storeTimeoutSetting()
        guard (1...3_600).contains(shutdownTimeout) else {
            throw ValidationError("--shutdown-timeout must be between 1 and 3600 seconds")
        }
        _ = try browserOriginsSetting()
        _ = try metricsAddressSetting()
    }

    /// The flags, else the environment; nil (metrics on the API's address) without a port.
    /// `--cors-origin`: none given is any page; `none` is no page; else each an origin (`scheme://host[:port]`).
    func browserOriginsSetting() throws -> BrowserOrigins {
        if corsOrigins.isEmpty || corsOrigins == ["*"] { return .any }
        if corsOrigins == ["none"] { return .none }
        for origin in corsOrigins {
            guard let url = URL(string: origin), ["http", "https"].contains(url.scheme ?? ""), url.host != nil,
                url.path.isEmpty, url.query == nil, url.user == nil, !origin.hasSuffix("/")
            else {
                throw ValidationError(
                    "--cors-origin '\(origin)' is not an origin: scheme://host[:port], e.g. https://chat.example.com "
                        + "(or none, alone)")
            }
        }
        return .only(corsOrigins)
    }

    func metricsAddressSetting() throws -> MetricsAddress? {
        let environment = ProcessInfo.processInfo.environment
        let host = metricsHost ?? environment["TICKS_METRICS_HOST"].flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1"
        let text = environment["TICKS_METRICS_PORT"].flatMap { $0.isEmpty ? nil : $0 }
        guard let port = metricsPort ?? text.flatMap({ Int($0) }) else {
            if let text { throw ValidationError("TICKS_METRICS_PORT must be a port number, not '\(text)'") }
            if metricsHost != nil { throw ValidationError("--metrics-host needs --metrics-port") }
            return nil
        }
        guard (1...65_535).contains(port) else { throw ValidationError("--metrics-port must be between 1 and 65535") }
        guard port != self.port else { throw ValidationError("--metrics-port must differ from --port") }
        return MetricsAddress(host: host, port: port)
    }

    /// The flag, else the environment, else `StoreDeadline.defaultTimeout`.
    func storeTimeoutSetting() throws -> Duration {
        let text = ProcessInfo.processInfo.environment["TICKS_STORE_TIMEOUT"]
        guard let seconds = storeTimeout ?? text.flatMap(Double.init) else {
            if let text { throw ValidationError("TICKS_STORE_TIMEOUT must be a number of seconds, not '\(text)'") }
            return StoreDeadline.defaultTimeout
        }
        guard seconds > 0, seconds <= 3_600 else { throw ValidationError("--store-timeout must be between 0 and 3600 seconds") }
        return .milliseconds(Int64(seconds * 1_000))
    }

    /// The flag, else the environment; an empty value is off.
    var otelEndpointSetting: String? {
        (otelEndpoint ?? ProcessInfo.processInfo.environment["TICKS_OTEL_ENDPOINT"]).flatMap { $0.isEmpty ? nil : $0 }
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "ticks")
        let (credentials, source) = try credentialOptions.resolve()
        // Said, not silently changed: the operator may share the folder on purpose.
        for loose in PrivateFiles.loosePermissions(in: credentialOptions.dataURL, names: SQLiteBackup.liveNames()) {
            logger.warning("\(loose)")
        }
        var configuration = TicksServerConfiguration(host: host, port: port, credentials: credentials)
        configuration.demo = demo
        configuration.limits = limitOptions.limits
        configuration.pingInterval = .seconds(limitOptions.pingInterval)
        configuration.rateLimits = try limitOptions.rateLimits()
        configuration.webhooks = try webhookOptions.settings()
        configuration.migrationsUpTo = migrationsUpTo
        configuration.receiptLogRetention = try retentionOptions.retention()
        configuration.storeDeadline = StoreDeadline(timeout: try storeTimeoutSetting())
        configuration.metricsAddress = try metricsAddressSetting()
        configuration.browserOrigins = try browserOriginsSetting()
        configuration.allowsNewerSchema = allowNewerSchema
        let database: String
        // A SQLite folder has one server at a time, and no restore under it (`ticks restore`).
        var folderLock: DataDirectoryLock?
        defer { folderLock?.release() }
        if let url = postgresURL ?? ProcessInfo.processInfo.environment["TICKS_POSTGRES_URL"] {
            configuration.storage = .postgres(url: url)
            database = try PostgresLocation(url: url).redacted
        } else {
            try PrivateFiles.makeFolder(credentialOptions.dataURL)
            folderLock = try DataDirectoryLock(directory: credentialOptions.dataURL)
            database = credentialOptions.dataURL.appendingPathComponent("ticks.sqlite").path
            configuration.storage = .sqlite(path: database)
        }
        try await serve(configuration: configuration, database: database, source: source, logger: logger)
    }

    func serve(configuration: TicksServerConfiguration, database: String, source: String, logger: Logger) async throws {
        var configuration = configuration
        var services: [any Service] = []
        if let endpoint = otelEndpointSetting {
            services.append(try Traces.bootstrap(endpoint: endpoint, nodeID: configuration.nodeID, logger: logger))
            configuration.tracing = true
        }
        let (application, nodeServices) = try await buildApplication(
            configuration: configuration, logger: logger, services: services)
        let tokenHint =
            credentialOptions.dataDirectory == ".ticks" ? "" : " --data-dir \(credentialOptions.dataDirectory)"
        // Straight to the file descriptor: a pipe or file sees it at once.
        FileHandle.standardOutput.write(
            Data(
                """
            Ticks is listening on http://\(host):\(port)
              database:   \(database)
              API key:    \(configuration.credentials.apiKey)
              API secret: \(source)
              user token: \(Self.tokenCommand) token USER_ID\(tokenHint)
            \(configuration.metricsAddress.map { "  metrics:    http://\($0.host):\($0.port)/metrics\n" } ?? "")\
            \(otelEndpointSetting.map { "  traces:     \($0) (node \(configuration.nodeID))\n" } ?? "")\
            \(demo ? demoBanner : "")
            """.utf8))
        // SIGINT/SIGTERM: the sockets close first (1011, `SocketsClosedFirst`, which a group stops
        // before the services listed ahead of it), then the application stops accepting and
        // finishes its in-flight requests, all within --shutdown-timeout; past it what is left is
        // cancelled, and has 5 s more to end before the process traps.
        var groupConfiguration = ServiceGroupConfiguration(
            services: [application, SocketsClosedFirst(services: nodeServices, time: configuration.time)],
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        groupConfiguration.maximumCancellationDuration = .seconds(5)
        do {
            try await runWithShutdownBound(
                ServiceGroup(configuration: groupConfiguration), readiness: nodeServices.readiness,
                bound: .seconds(shutdownTimeout), time: configuration.time, logger: logger)
        } catch let stopped as StoppedBeforeServing {
            logger.info("\(stopped)", metadata: ["cancelled": "\(stopped.whilePreparing)"])
        }
    }
}

extension Serve {
    /// How to run `ticks` again, as this one was started: `swift run ticks` from a
    /// checkout's build folder, plain `ticks` when installed (scripts/release, INSTALL.md).
    static var tokenCommand: String {
        CommandLine.arguments.first?.contains("/.build/") == true ? "swift run ticks" : "ticks"
    }

    var demoBanner: String {
        """
          demo:       open http://\(host == "0.0.0.0" ? "127.0.0.1" : host):\(port)/ in two browser windows
                      (anyone who can reach this port can get a token for any user)

        """
    }
}

/// The bounds and rate limits of `ticks serve` (README: "Limits"); defaults from `ServerLimits`.
struct LimitOptions: ParsableArguments {
    private static let defaults = ServerLimits()

    @Option(name: .customLong("rate-limits"), help: "Rate limits on or off (off for benchmarks).")
    var rateLimitSwitch: Switch = .on
    @Option(
        name: .customLong("rate-limit"),
        help: ArgumentHelp(
            "A limit a minute for one endpoint: per user, and optionally per app for server tokens.",
            valueName: "NAME=USER[/SERVER]"))
    var rateLimitOverrides: [String] = []
    @Option(help: "WebSocket connections one user may hold.")
    var maxConnectionsPerUser = defaults.maxConnectionsPerUser
    @Option(help: "Bytes that may wait for one WebSocket before it is closed as too slow.")
    var connectionBufferBytes = defaults.connectionBufferBytes
    @Option(help: "Custom data of one user, message or channel, in bytes of JSON.")
    var maxCustomDataBytes = defaults.maxCustomDataBytes
    @Option(help: "Members of one channel.")
    var maxChannelMembers = defaults.maxChannelMembers
    @Option(help: "Values of one $in filter.")
    var maxFilterValues = defaults.maxFilterValues
    @Option(help: "The largest WebSocket frame a client may send, in bytes.")
    var maxInboundFrameBytes = defaults.maxInboundFrameBytes
    @Option(help: "Seconds an HTTP connection may stay idle.")
    var idleTimeout = Int(defaults.idleTimeout.components.seconds)
    @Option(help: "Seconds a new connection has to send a whole request.")
    var headerTimeout = Int(defaults.headerTimeout.components.seconds)
    @Option(help: "Seconds between the server's pings on each WebSocket; one that has not answered a ping by the next is closed (1…86400).")
    var pingInterval = Int(TicksServerConfiguration.defaultPingInterval.components.seconds)
    @Option(help: "Bytes the decoded-user and verified-token caches may hold together.")
    var cacheBytes = defaults.cacheBytes
    @Option(help: "Bytes of events a PostgreSQL node may queue for the other nodes.")
    var busQueueBytes = defaults.busQueueBytes
    @Option(help: "Events POST /sync tells of one channel before asking for a reload of it.")
    var syncEventsPerChannel = defaults.syncEventsPerChannel
    @Option(help: "Events in one POST /sync answer.")
    var syncEventsPerAnswer = defaults.syncEventsPerAnswer

    enum Switch: String, ExpressibleByArgument {
        case on, off
    }

    func validate() throws {
        let positive: [(String, Int)] = [
            ("--max-connections-per-user", maxConnectionsPerUser), ("--connection-buffer-bytes", connectionBufferBytes),
            ("--max-custom-data-bytes", maxCustomDataBytes), ("--max-channel-members", maxChannelMembers),
            ("--max-filter-values", maxFilterValues), ("--max-inbound-frame-bytes", maxInboundFrameBytes),
            ("--idle-timeout", idleTimeout), ("--header-timeout", headerTimeout), ("--cache-bytes", cacheBytes),
            ("--bus-queue-bytes", busQueueBytes), ("--sync-events-per-channel", syncEventsPerChannel),
            ("--sync-events-per-answer", syncEventsPerAnswer),
        ]
        for (flag, value) in positive where value <= 0 {
            throw ValidationError("\(flag) must be positive")
        }
        guard (1...86_400).contains(pingInterval) else {
            throw ValidationError("--ping-interval must be between 1 and 86400 seconds")
        }
        guard syncEventsPerChannel <= syncEventsPerAnswer else {
            throw ValidationError("--sync-events-per-channel must not be more than --sync-events-per-answer")
        }
    }

    var limits: ServerLimits {
        var limits = ServerLimits()
        limits.maxConnectionsPerUser = maxConnectionsPerUser
        limits.connectionBufferBytes = connectionBufferBytes
        limits.maxCustomDataBytes = maxCustomDataBytes
        limits.maxChannelMembers = maxChannelMembers
        limits.maxFilterValues = maxFilterValues
        limits.maxInboundFrameBytes = maxInboundFrameBytes
        limits.idleTimeout = .seconds(idleTimeout)
        limits.headerTimeout = .seconds(headerTimeout)
        limits.cacheBytes = cacheBytes
        limits.busQueueBytes = busQueueBytes
        limits.syncEventsPerChannel = syncEventsPerChannel
        limits.syncEventsPerAnswer = syncEventsPerAnswer
        return limits
    }

    func rateLimits() throws -> RateLimits {
        var rateLimits = rateLimitSwitch == .on ? RateLimits() : .off
        for override in rateLimitOverrides {
            do {
                try rateLimits.set(override)
            } catch {
                throw ValidationError("--rate-limit \(error)")
            }
        }
        return rateLimits
    }
}

/// `ticks serve`'s webhook flags (docs/webhooks.md); each has an environment variable.
struct WebhookOptions: ParsableArguments {
    static let defaults = WebhookSettings()

    @Option(name: .customLong("webhook"), help: "A webhook URL; repeat for several (or TICKS_WEBHOOK_URLS, comma-separated).")
    var webhookURLs: [String] = []
    @Option(help: "Event types the webhooks get, comma-separated, or all (or TICKS_WEBHOOK_EVENTS).")
    var webhookEvents: String?
    @Option(help: "The push hook's URL: new messages with their offline recipients (or TICKS_PUSH_HOOK_URL).")
    var pushHook: String?
    @Option(help: "Attempts of one call before it is dead.")
    var webhookAttempts = defaults.maxAttempts
    @Option(help: "Seconds before the first retry; each next waits twice as long.")
    var webhookFirstBackoff = 1.0
    @Option(help: "The longest wait between two attempts, in seconds.")
    var webhookMaxBackoff = 600.0
    @Option(help: "Seconds one call may take.")
    var webhookTimeout = 5.0
    @Option(help: "Calls in flight at once.")
    var webhookConcurrency = defaults.concurrency
    @Option(help: "Seconds after its change a call not yet delivered is dead.")
    var webhookMaxAge = Int(defaults.maxAge.components.seconds)
    @Option(help: "Calls that may wait for one receiver; the oldest beyond are dead.")
    var webhookMaxWaiting = defaults.maxWaiting
    @Option(help: "Dead calls kept; the oldest beyond are removed.")
    var webhookMaxDead = defaults.maxDead
    @Option(help: "Seconds a push hook's delivery-only token is valid.")
    var deliveryTokenLifetime = Int(defaults.deliveryTokenLifetime.components.seconds)

    func settings() throws -> WebhookSettings {
        let environment = ProcessInfo.processInfo.environment
        var settings = WebhookSettings()
        do {
            var urls = webhookURLs
            if urls.isEmpty, let listed = environment["TICKS_WEBHOOK_URLS"] {
                urls = listed.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            }
            let types = try (webhookEvents ?? environment["TICKS_WEBHOOK_EVENTS"]).flatMap(WebhookSettings.eventTypes(parsing:))
            settings.webhooks = try urls.map { WebhookSettings.Webhook(url: try WebhookSettings.url(parsing: $0), eventTypes: types) }
            settings.pushURL = try (pushHook ?? environment["TICKS_PUSH_HOOK_URL"]).map(WebhookSettings.url(parsing:))
            settings.maxAttempts = webhookAttempts
            settings.firstBackoff = .milliseconds(Int64(webhookFirstBackoff * 1_000))
            settings.maxBackoff = .milliseconds(Int64(webhookMaxBackoff * 1_000))
            settings.callTimeout = .milliseconds(Int64(webhookTimeout * 1_000))
            settings.concurrency = webhookConcurrency
            settings.maxAge = .seconds(webhookMaxAge)
            settings.maxWaiting = webhookMaxWaiting
            settings.maxDead = webhookMaxDead
            settings.deliveryTokenLifetime = .seconds(deliveryTokenLifetime)
            try settings.validate()
        } catch let error as WebhookSettingsError {
            throw ValidationError(error.description)
        }
        return settings
    }
}

struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print a user token signed with the app secret.")

    @Argument(help: "The user the token acts as (omit with --server).") var userID: String?
    @Option(name: .customLong("expires-in"), help: "Seconds until the token expires (default: never).")
    var expiresIn: Int?
    @Flag(help: "Print a server token instead (acts for any user).") var server = false
    @OptionGroup var credentialOptions: CredentialOptions

    func run() async throws {
        let (credentials, _) = try credentialOptions.resolve()
        let authority = await TokenAuthority(credentials: credentials)
        if let expiresIn, expiresIn <= 0 { throw ValidationError("--expires-in must be positive") }
        if server {
            print(try await authority.serverToken(expiresIn: expiresIn.map(TimeInterval.init)))
        } else {
            guard let userID, Identifier.isValid(userID) else {
                throw ValidationError("give a user id (1–255 characters of a-z, A-Z, 0-9, @, _, -) or --server")
            }
            print(try await authority.userToken(for: userID, expiresIn: expiresIn.map(TimeInterval.init)))
        }
    }
}

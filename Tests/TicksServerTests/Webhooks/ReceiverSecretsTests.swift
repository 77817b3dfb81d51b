import Foundation
import Logging
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// No receiver's credentials at rest (docs/webhooks.md, "The call"): a
/// webhook URL's `user:password@` and query reach the receiver on every
/// call, but the outbox's rows, `GET /webhooks/failed`, `GET /app` and the
/// database file name the receiver without them.
@Suite("Receiver credentials stay out of the database")
struct ReceiverSecretsTests {
    static let secrets = ["hook-user", "hook-pass", "q-secret"]

    /// `base` with credentials and a secret query, as an operator might configure it.
    static func credentialed(_ base: URL) -> URL {
        var components = URLComponents(url: base, resolvingAgainstBaseURL: false)!
        components.user = "hook-user"
        components.password = "hook-pass"
        components.path = "/in"
        components.query = "token=q-secret"
        return components.url!
    }

    static func holdsNoSecret(_ text: String) -> Bool { !secrets.contains { text.contains($0) } }

    @Test("calls carry the URL's credentials and query; rows, answers and the file hold neither", arguments: StoreKind.all)
    func noSecretAtRest(kind: StoreKind) async throws {
        let receiver = WebhookReceiver()
        // Every call fails: it stays in the outbox and, after one attempt, is dead (GET /webhooks/failed).
        receiver.answer { _, _, _ in (.internalServerError, false) }
        try await receiver.run { base in
            let url = Self.credentialed(base)
            try await TestServer.run(kind, webhooks: WebhookTests.settings(webhook: url, attempts: 1)) { server in
                try await server.upsert("alice", "bob")
                try await server.createChannel("messaging:s", members: ["alice", "bob"])
                try await server.send("messaging:s", id: "s1", from: "alice")
                try await receiver.wait(for: "the first call") { !$0.isEmpty }
                let call = try #require(receiver.received.first)
                #expect(call.path == "/in" && call.query == "token=q-secret")
                let basic = "Basic " + Data("hook-user:hook-pass".utf8).base64EncodedString()
                #expect(call.headers[.authorization] == basic)

                let store = try #require(server.store as? SQLStore)
                // From the store, not GET /webhooks/failed: polling the endpoint meets its rate limit.
                try await eventually { try await !store.deadCalls(after: 0, limit: 1).isEmpty }
                let dead = try await store.deadCalls(after: 0, limit: 100)
                #expect(!dead.isEmpty)
                for row in dead {
                    #expect(row.target == "\(base.scheme!)://\(base.host!):\(base.port!)/in")
                    #expect(Self.holdsNoSecret(row.target + row.payload + (row.lastError ?? "")), "\(row)")
                }
                #expect(try await store.outboxTargets().allSatisfy { Self.holdsNoSecret($0.target) })
                let failedText = try await server.call(.get, "/webhooks/failed").body
                #expect(failedText.contains("/in") && Self.holdsNoSecret(failedText), "\(failedText)")
                let app = try await server.call(.get, "/app").body
                #expect(app.contains("/in") && Self.holdsNoSecret(app), "\(app)")
                if case .disk = kind {
                    // The database file and its write-ahead log, byte for byte.
                    let files = try await store.engine.readOne {
                        Fetch.texts("SELECT file FROM pragma_database_list WHERE name = 'main'")
                    }
                    let path = try #require(files.first)
                    for file in [path, path + "-wal"] {
                        let bytes = (try? Data(contentsOf: URL(fileURLWithPath: file))) ?? Data()
                        for secret in Self.secrets {
                            #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(secret) in \(file)")
                        }
                    }
                }
            }
        }
    }

    @Test("rows an older release wrote with the whole URL are renamed without it, and still delivered",
          arguments: StoreKind.all)
    func olderRowsRenamed(kind: StoreKind) async throws {
        let receiver = WebhookReceiver()
        try await receiver.run { base in
            let url = Self.credentialed(base)
            try await kind.withStore { store in
                // As 0.9 wrote it: the receiver's whole URL, credentials and query in the row.
                let entry = OutboxEntry(
                    target: url.absoluteString, kind: .webhook, eventType: "message.new", cid: "messaging:old",
                    payload: #"{"type":"message.new","cid":"messaging:old"}"#)
                try await store.engine.write {
                    Step.execute(StoreSQL.insertOutbox(entry, deliveryID: "old-1", at: Timestamp.now().microseconds))
                }
                #expect(try await store.outboxTargets().map(\.target) == [url.absoluteString])
                var settings = WebhookTests.settings(webhook: url)
                settings.maxAttempts = 3
                let sender = WebhookSender(
                    store: store, kind: store.kind, settings: settings,
                    authority: await TokenAuthority(credentials: try Credentials(apiKey: "k", apiSecret: TestKeys.apiSecret)),
                    metrics: ServerMetrics(), logger: Logger(label: "test"), pollInterval: .milliseconds(20))
                try await sender.adoptReceiverNames()
                #expect(try await store.outboxTargets().map(\.target) == ["\(base.scheme!)://\(base.host!):\(base.port!)/in"])
                // The renamed row goes to the configured receiver, credentials and all.
                let running = Task { try await sender.run() }
                defer { running.cancel() }
                try await receiver.wait(for: "the older row's call") { $0.contains { $0.deliveryID == "old-1" } }
                let call = try #require(receiver.received.first { $0.deliveryID == "old-1" })
                #expect(call.query == "token=q-secret")
                #expect(call.headers[.authorization] == "Basic " + Data("hook-user:hook-pass".utf8).base64EncodedString())
            }
        }
    }

    @Test("two receivers that differ only in credentials or query are refused at start")
    func sameName() throws {
        var settings = WebhookSettings()
        settings.webhooks = [
            WebhookSettings.Webhook(url: URL(string: "https://a:1@hooks.example/in")!),
            WebhookSettings.Webhook(url: URL(string: "https://b:2@hooks.example/in?x=1")!),
        ]
        #expect(throws: WebhookSettingsError.sameReceiverName("https://hooks.example/in")) { try settings.validate() }
        settings.pushURL = nil
        settings.webhooks = [WebhookSettings.Webhook(url: URL(string: "https://a:1@hooks.example/in")!)]
        settings.pushURL = URL(string: "https://a:1@hooks.example/in")
        try settings.validate()
    }
}

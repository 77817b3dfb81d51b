import Foundation
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// `PATCH /app` and the settings it keeps (R15, docs/api.md "App settings"):
/// kept in the store on every store, read by each node at most once a second
/// on its clock, and R15 applied to a live socket.
@Suite("App settings")
struct AppOptionsTests {
    /// A new database's settings: R15 off, sends counting unread by positions (`v15-unread-positions`).
    static let fresh = AppOptions(reciprocalReadReceipts: false, unreadCounting: .positions)

    @Test("the store keeps each setting until it is changed; a change that names none changes none", arguments: StoreKind.all)
    func kept(kind: StoreKind) async throws {
        try await kind.withStore { (store: SQLStore) async throws in
            #expect(try await store.appOptions() == Self.fresh, "off by default")
            #expect(try await store.updateAppOptions(.init(reciprocalReadReceipts: true)).reciprocalReadReceipts)
            #expect(try await store.updateAppOptions(.init()).reciprocalReadReceipts, "a change naming nothing keeps it")
            #expect(try await store.appOptions().reciprocalReadReceipts)
            #expect(try await store.updateAppOptions(.init(reciprocalReadReceipts: false)) == Self.fresh)
        }
    }

    @Test("a node held before v12-app-settings serves the defaults and refuses a change (409)")
    func oldSchema() async throws {
        let store = SQLStore(
            engine: try SQLiteEngine.inMemory(), deadline: StoreKind.deadline,
            schema: SchemaLevel(upTo: "v11-all-members"))
        #expect(try await store.appOptions() == AppOptions())
        let error = await #expect(throws: StoreError.self) {
            try await store.updateAppOptions(.init(reciprocalReadReceipts: true))
        }
        #expect(error.map { APIError($0).status } == .conflict)
    }

    @Test("another node's change applies once a second has passed on this node's clock", arguments: StoreKind.all)
    func refresh(kind: StoreKind) async throws {
        try await kind.withStore { (store: SQLStore) async throws in
            let clock = ManualClock()
            let cache = AppOptionsCache(store: store, time: clock.timeSource, refresh: .seconds(1))
            #expect(try await cache.current() == Self.fresh)
            // Another node changes it in the store this node shares.
            _ = try await store.updateAppOptions(.init(reciprocalReadReceipts: true))
            clock.advance(by: .milliseconds(999))
            #expect(try await cache.current() == Self.fresh, "read less than a second ago")
            clock.advance(by: .milliseconds(1))
            #expect(try await cache.current().reciprocalReadReceipts)
            // This node's own change applies at once.
            #expect(try await cache.update(.init(reciprocalReadReceipts: false)) == Self.fresh)
            #expect(try await cache.current() == Self.fresh)
        }
    }

    @Test("PATCH /app: a server token's change shows in GET /app; bad bodies are 400 and change nothing", arguments: StoreKind.all)
    func endpoint(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("amy")
            for (body, token, status) in [
                (#"{"reciprocal_read_receipts": true}"#, try await server.token("amy"), 403),
                (#"{"reciprocal_read_receipts": 1}"#, nil, 400),
                (#"{"reciprocal_read_receipts": null}"#, nil, 400),
                (#"{"disable_auth_checks": true}"#, nil, 400),
                (#"{}"#, nil, 400),
                (#"[true]"#, nil, 400),
                (#"{"reciprocal_read_receipts": tru"#, nil, 400),
            ] {
                let reply = try await server.call(.patch, "/app", body: body, token: token)
                try reply.expectError(status, code: status == 403 ? 17 : 4)
            }
            #expect(try await server.ok(.get, "/app")["app"]["reciprocal_read_receipts"].bool == false)
            try await server.ok(.patch, "/app", #"{"reciprocal_read_receipts": true}"#)
            #expect(try await server.ok(.get, "/app")["app"]["reciprocal_read_receipts"].bool == true)
            #expect(try await server.store.appOptions().reciprocalReadReceipts)
        }
    }

    @Test("R15 live: a member who hides reads hears a read as message.delivered, and again as message.read once it is off",
          arguments: StoreKind.all)
    func live(kind: StoreKind) async throws {
        try await TestServer.run(kind, .live) { server in
            try await server.ok(
                .post, "/users",
                #"{"users": {"alice": {"id": "alice"}, "bob": {"id": "bob"}, "finn": {"id": "finn", "privacy_settings": {"read_receipts": {"enabled": false}}}}}"#)
            try await server.createChannel("messaging:r", members: ["alice", "bob", "finn"])
            try await server.ok(.patch, "/app", #"{"reciprocal_read_receipts": true}"#)
            let finn = try await TestSocket.connect(server, as: "finn")
            defer { finn.close() }
            try await server.send("messaging:r", id: "m1", from: "alice")
            try await server.markRead("messaging:r", "bob")
            let delivered = try await finn.next("message.delivered")
            #expect(delivered["user"]["id"].string == "bob" && delivered["last_delivered_message_id"].string == "m1")
            #expect(!finn.pending.contains { $0["type"].string == "message.read" }, "no read of bob's reached finn")
            try await server.ok(.patch, "/app", #"{"reciprocal_read_receipts": false}"#)
            try await server.send("messaging:r", id: "m2", from: "alice")
            try await server.markRead("messaging:r", "bob")
            let read = try await finn.next("message.read")
            #expect(read["user"]["id"].string == "bob" && read["last_read_message_id"].string == "m2")
        }
    }
}

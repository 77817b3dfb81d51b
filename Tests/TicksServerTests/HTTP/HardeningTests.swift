import Foundation
import HTTPTypes
import Testing
import TicksTestSupport
import TicksProtocol

@testable import TicksServer

/// What used to crash, answer 500 or let one user harm another: each is now a
/// clear 4xx, and the data stays as it was. Runs on every store.
@Suite("Hardening")
struct HardeningTests {
    func setUp(_ server: TestServer) async throws {
        try await server.upsert("alice", "bob", "carol", "dave")
        try await server.createChannel("messaging:g", members: ["alice", "bob", "carol"], createdBy: "alice")
        try await server.send("messaging:g", id: "g1", from: "alice", text: "first")
    }

    func members(_ server: TestServer, _ cid: String = "messaging:g") async throws -> [String] {
        try await server.state(cid)["members"].array.compactMap { $0["user"]["id"].string }.sorted()
    }

    // MARK: Requests that crashed or failed

    @Test("a created_at with 24 fractional digits in POST /users is accepted (it killed the process)", arguments: StoreKind.all)
    func longFractionInUsers(_ kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            let created = "2024-01-01T00:00:00.123456999999999999999999Z"
            let reply = try await server.call(
                .post, "/users", body: #"{"users": {"eve": {"id": "eve", "created_at": "\#(created)"}}}"#,
                token: try await server.token("eve"))
            #expect(reply.status == 200 || reply.status == 201, "\(reply.body)")
            try await server.ok(.get, "/health")
            #expect(try await server.store.users(ids: ["eve"])["eve"] != nil)
        }
    }

    @Test("the same created_at in the WebSocket's user_details connects as usual")
    func longFractionOnConnect() async throws {
        try await TestServer.run(.standard, .live) { server in
            let json = #"{"user_id": "frank", "user_details": {"id": "frank", "created_at": "2024-01-01T00:00:00.123456999999999999999999Z"}}"#
            let socket = try await TestSocket.connect(server, as: "frank", json: json)
            defer { socket.close() }
            #expect(socket.hello?["me"]["id"].string == "frank")
        }
    }

    @Test("an empty $in matches no channel (it answered 500 on SQLite); more than the limit is a 400", arguments: StoreKind.all)
    func emptyAndLongIn(_ kind: StoreKind) async throws {
        var limits = ServerLimits.patient
        limits.maxFilterValues = 5
        try await TestServer.run(kind, limits: limits) { server in
            try await setUp(server)
            for field in ["members", "cid", "type", "id"] {
                let reply = try await server.ok(.post, "/channels", #"{"filter_conditions": {"\#(field)": {"$in": []}}}"#)
                #expect(reply["channels"].array.isEmpty, "\(field)")
            }
            let six = (1...6).map { "\"u\($0)\"" }.joined(separator: ",")
            try await server.call(.post, "/channels", body: #"{"filter_conditions": {"members": {"$in": [\#(six)]}}}"#)
                .expectError(400, code: 4)
            try await server.call(.get, "/users?payload=" + #"{"filter_conditions": {"id": {"$in": [\#(six)]}}}"#.formEncoded)
                .expectError(400, code: 4)
            let five = (1...5).map { "\"u\($0)\"" }.joined(separator: ",")
            try await server.ok(.post, "/channels", #"{"filter_conditions": {"members": {"$in": [\#(five)]}}}"#)
        }
    }

    // MARK: Who may change members

    @Test("an ordinary member can neither add nor remove others, the creator included; the creator's state survives", arguments: StoreKind.all)
    func memberCannotChangeMembers(_ kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            try await server.markRead("messaging:g", "bob")
            let bob = try await server.token("bob")
            try await server.call(.post, "/channels/messaging/g", body: #"{"add_members": ["dave"]}"#, token: bob)
                .expectError(403, code: 17)
            try await server.call(.post, "/channels/messaging/g", body: #"{"remove_members": ["alice"]}"#, token: bob)
                .expectError(403, code: 17)
            try await server.call(
                .post, "/channels/messaging/g", body: #"{"remove_members": ["bob", "carol"]}"#, token: bob
            ).expectError(403, code: 17)
            try await server.call(.post, "/channels/messaging/g", body: #"{"add_moderators": ["bob"]}"#, token: bob)
                .expectError(403, code: 17)
            #expect(try await members(server) == ["alice", "bob", "carol"])
            // Nothing of the creator's read state or receipt log went.
            let receipts = try await server.receipts("g1")
            #expect(receipts["read_count"].int == 1)
            #expect(try await server.readState("messaging:g", of: "alice")?["last_read_message_id"].string == "g1")
            // A non-member cannot either.
            try await server.call(
                .post, "/channels/messaging/g", body: #"{"remove_members": ["bob"]}"#, token: try await server.token("dave")
            ).expectError(403, code: 17)
        }
    }

    @Test("a member may leave; the creator, a moderator, an admin member and a server token may add and remove", arguments: StoreKind.all)
    func whoMayChangeMembers(_ kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            // Leaving.
            try await server.ok(.post, "/channels/messaging/g", #"{"remove_members": ["carol"]}"#, token: try await server.token("carol"))
            #expect(try await members(server) == ["alice", "bob"])
            // The creator.
            let alice = try await server.token("alice")
            try await server.ok(.post, "/channels/messaging/g", #"{"add_members": ["carol", "dave"]}"#, token: alice)
            try await server.ok(.post, "/channels/messaging/g", #"{"remove_members": ["dave"]}"#, token: alice)
            // A moderator the creator made, until demoted.
            let promoted = try await server.ok(.post, "/channels/messaging/g", #"{"add_moderators": ["bob"]}"#, token: alice)
            let bobMember = promoted["members"].array.first { $0["user"]["id"].string == "bob" }
            #expect(bobMember?["channel_role"].string == "channel_moderator")
            #expect(bobMember?["role"].string == "moderator")
            #expect(promoted["members"].array.first { $0["user"]["id"].string == "alice" }?["role"].string == "owner")
            let bob = try await server.token("bob")
            try await server.ok(.post, "/channels/messaging/g", #"{"add_members": ["dave"]}"#, token: bob)
            try await server.ok(.post, "/channels/messaging/g", #"{"demote_moderators": ["bob"]}"#, token: alice)
            try await server.call(.post, "/channels/messaging/g", body: #"{"remove_members": ["dave"]}"#, token: bob)
                .expectError(403, code: 17)
            // An admin (a role only a server token gives) in a channel they belong to; from outside, nothing.
            try await server.ok(.post, "/users", #"{"users": {"root": {"id": "root", "role": "admin"}}}"#)
            let root = try await server.token("root")
            try await server.call(.post, "/channels/messaging/g", body: #"{"remove_members": ["dave"]}"#, token: root)
                .expectError(403, code: 17)
            #expect(try await members(server) == ["alice", "bob", "carol", "dave"])
            try await server.ok(.post, "/channels/messaging/g", #"{"add_members": ["root"]}"#)
            try await server.ok(.post, "/channels/messaging/g", #"{"remove_members": ["dave", "root"]}"#, token: root)
            // The server.
            try await server.ok(.post, "/channels/messaging/g", #"{"remove_members": ["alice"]}"#)
            #expect(try await members(server) == ["bob", "carol"])
        }
    }

    @Test("only a server token gives roles: a user token cannot make itself admin, on upsert or on connect")
    func rolesComeFromTheServer() async throws {
        try await TestServer.run(.standard, .live) { server in
            try await server.upsert("mallory")
            let mallory = try await server.token("mallory")
            try await server.call(.post, "/users", body: #"{"users": {"mallory": {"id": "mallory", "role": "admin"}}}"#, token: mallory)
                .expectError(403, code: 17)
            #expect(try await server.store.users(ids: ["mallory"])["mallory"]?.role == "user")
            // Updating other fields keeps the role the server gave.
            try await server.ok(.post, "/users", #"{"users": {"mod": {"id": "mod", "role": "moderator"}}}"#)
            try await server.ok(.post, "/users", #"{"users": {"mod": {"id": "mod", "name": "Mod"}}}"#, token: try await server.token("mod"))
            #expect(try await server.store.users(ids: ["mod"])["mod"]?.role == "moderator")
            // A new user's details on connect never carry a role.
            let socket = try await TestSocket.connect(
                server, as: "sneaky", json: #"{"user_id": "sneaky", "user_details": {"id": "sneaky", "role": "admin"}}"#)
            defer { socket.close() }
            #expect(try await server.store.users(ids: ["sneaky"])["sneaky"] != nil)
            #expect(try await server.store.users(ids: ["sneaky"])["sneaky"]?.role == "user")
        }
    }

    // MARK: Message ids

    @Test("a message id belongs to its author: another user's resend is 409 and changes nothing; the author's is idempotent", arguments: StoreKind.all)
    func messageIDsAreOwned(_ kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            let bob = try await server.token("bob")
            try await server.call(
                .post, "/channels/messaging/g/message", body: #"{"message": {"id": "g1", "text": "mine now"}}"#, token: bob
            ).expectError(409, code: 4)
            let stored = try await server.ok(.get, "/messages/g1")
            #expect(stored["message"]["text"].string == "first")
            #expect(stored["message"]["user"]["id"].string == "alice")
            // The author's retry: 200 with what is stored, no second message.
            let again = try await server.call(
                .post, "/channels/messaging/g/message", body: #"{"message": {"id": "g1", "text": "first"}}"#,
                token: try await server.token("alice"))
            #expect(again.status == 200)
            #expect(try again.json()["message"]["id"].string == "g1")
            #expect(try await server.state("messaging:g")["messages"].array.count == 1)
        }
    }

    // MARK: Sizes

    @Test("custom data over the limit is a 400 for users, messages and channels; at the limit it is stored", arguments: StoreKind.all)
    func customDataLimits(_ kind: StoreKind) async throws {
        var limits = ServerLimits.patient
        limits.maxCustomDataBytes = 200
        try await TestServer.run(kind, limits: limits) { server in
            try await setUp(server)
            let big = String(repeating: "x", count: 200)
            let small = String(repeating: "x", count: 100)
            try await server.call(.post, "/users", body: #"{"users": {"eve": {"id": "eve", "bio": "\#(big)"}}}"#)
                .expectError(400, code: 4)
            try await server.call(.post, "/users", body: #"{"users": {"eve": {"id": "eve", "name": "\#(big)"}}}"#)
                .expectError(400, code: 4)
            try await server.ok(.post, "/users", #"{"users": {"eve": {"id": "eve", "bio": "\#(small)"}}}"#)
            try await server.call(
                .post, "/channels/messaging/g/message",
                body: #"{"message": {"id": "big", "text": "t", "user_id": "alice", "extra": "\#(big)"}}"#
            ).expectError(400, code: 4)
            try await server.ok(
                .post, "/channels/messaging/g/message",
                #"{"message": {"id": "small", "text": "t", "user_id": "alice", "extra": "\#(small)"}}"#)
            try await server.call(
                .post, "/channels/messaging/new/query", body: #"{"data": {"members": ["alice"], "motd": "\#(big)"}}"#
            ).expectError(400, code: 4)
            #expect(try await server.store.channel(ChannelID(type: "messaging", id: "new")) == nil)
        }
    }

    @Test("message length counts Unicode scalars: combining marks cannot smuggle megabytes into one character")
    func textLengthBoundsBytes() async throws {
        try await TestServer.run { server in
            try await setUp(server)
            // One character of 5,001 scalars; the messaging type allows 5,000.
            let zalgo = "e" + String(repeating: "\u{301}", count: 5_000)
            #expect(zalgo.count == 1)
            try await server.call(
                .post, "/channels/messaging/g/message", body: #"{"message": {"text": "\#(zalgo)", "user_id": "alice"}}"#
            ).expectError(400, code: 4)
        }
    }

    @Test("a channel takes at most maxChannelMembers members", arguments: StoreKind.all)
    func memberCap(_ kind: StoreKind) async throws {
        var limits = ServerLimits.patient
        limits.maxChannelMembers = 4
        try await TestServer.run(kind, limits: limits) { server in
            try await setUp(server)
            try await server.upsert("erin")
            try await server.ok(.post, "/channels/messaging/g", #"{"add_members": ["dave"]}"#)
            try await server.call(.post, "/channels/messaging/g", body: #"{"add_members": ["erin"]}"#)
                .expectError(400, code: 4)
            #expect(try await members(server).count == 4)
            // Swapping one member for another stays within the cap.
            try await server.ok(.post, "/channels/messaging/g", #"{"add_members": ["erin"], "remove_members": ["dave"]}"#)
        }
    }

    @Test("a user holds at most maxConnectionsPerUser WebSockets; the next is refused with code 9 and closed")
    func connectionCap() async throws {
        var limits = ServerLimits.patient
        limits.maxConnectionsPerUser = 2
        try await TestServer.run(.standard, .live, limits: limits) { server in
            try await server.upsert("alice", "bob")
            let first = try await TestSocket.connect(server, as: "alice")
            let second = try await TestSocket.connect(server, as: "alice")
            defer { first.close(); second.close() }
            let (close, frames) = try await TestSocket.refusal(server, as: "alice", token: try await server.token("alice"))
            #expect(close == 1000)
            #expect(frames.first?["error"]["code"].int == 9)
            #expect(frames.first?["error"]["StatusCode"].int == 429)
            // Another user is not affected, and a freed place can be taken.
            let bob = try await TestSocket.connect(server, as: "bob")
            defer { bob.close() }
            first.close()
            try await eventually { server.services.hub.connectionCount == 2 }
            let third = try await TestSocket.connect(server, as: "alice")
            defer { third.close() }
            #expect(third.hello?["me"]["id"].string == "alice")
        }
    }

    // MARK: Errors and metrics

    @Test("a known path with another method is 405 with Allow; an unknown path is 404")
    func methodNotAllowed() async throws {
        try await TestServer.run { server in
            let reply = try await server.call(.delete, "/users")
            try reply.expectError(405, code: 4)
            #expect(reply.headers[.allow]?.contains("POST") == true)
            #expect(reply.headers[.allow]?.contains("GET") == true)
            try await server.call(.get, "/channels/messaging/g/read").expectError(405, code: 4)
            try await server.call(.get, "/nowhere").expectError(404, code: 16)
        }
    }

    @Test("/metrics counts refusals and failures by status, and 4xx and 5xx in all")
    func errorsAreCounted() async throws {
        try await TestServer.run { server in
            try await server.call(.post, "/users", body: "{").expectError(400, code: 4)
            try await server.call(.get, "/nowhere").expectError(404, code: 16)
            try await server.call(.get, "/messages/x1", token: "forged").expectError(401, code: 5)
            let metrics = try await server.call(.get, "/metrics").body
            #expect(metrics.contains(#"ticks_http_errors_total{class="4xx"} 3"#), "\(metrics)")
            #expect(metrics.contains(#"status="400""#))
            #expect(metrics.contains(#"status="401""#))
            #expect(metrics.contains(#"status="404""#))
        }
    }
}

extension String {
    /// As an HTML form encodes a query value.
    var formEncoded: String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return addingPercentEncoding(withAllowedCharacters: allowed)!
    }
}

/// Waits until `condition` holds, up to `timeout` (a deadline for what never
/// happens, long enough for a loaded machine; no test asserts how fast).
func eventually(
    timeout: Duration = Patience.wait, sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("the condition did not hold within \(timeout)", sourceLocation: sourceLocation)
}

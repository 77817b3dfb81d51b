import Foundation
import JWTKit
import Testing

@testable import TicksServer

/// The auth matrix of docs/api.md ("Authentication", "Acting as a user"): server tokens act for anyone, user tokens for themselves
/// on their own channels; a bad key, signature or expiry is 401, acting beyond
/// one's rights is 403.
@Suite("Authentication and authorisation")
struct AuthTests {
    func setUp(_ server: TestServer) async throws {
        try await server.upsert("alice", "bob", "mallory")
        try await server.createChannel("messaging:ab", members: ["alice", "bob"])
        try await server.send("messaging:ab", id: "ab1", from: "alice")
    }

    func forged(_ claims: String, secret: String) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        struct Claims: JWTPayload {
            var user_id: String?
            var server: Bool?
            func verify(using algorithm: some JWTAlgorithm) async throws {}
        }
        let claims = try JSONDecoder().decode(Claims.self, from: Data(claims.utf8))
        return try await keys.sign(claims)
    }

    @Test("a wrong or missing api_key is 401")
    func apiKey() async throws {
        try await TestServer.run { server in
            try await server.call(.get, "/channeltypes", apiKey: "wrong").expectError(401, code: 5)
            try await server.call(.get, "/channeltypes", apiKey: nil).expectError(401, code: 5)
        }
    }

    @Test("a token signed with another secret, a malformed one, or none at all is 401")
    func badTokens() async throws {
        try await TestServer.run { server in
            let otherSecret = try await forged(#"{"server": true}"#, secret: String(repeating: "x", count: 40))
            try await server.call(.get, "/channeltypes", token: otherSecret).expectError(401, code: 5)
            try await server.call(.get, "/channeltypes", token: "not.a.jwt").expectError(401, code: 5)
            try await server.call(.get, "/channeltypes", token: "").expectError(401, code: 5)
            let noClaims = try await forged("{}", secret: String(repeating: "x", count: 40))
            try await server.call(.get, "/channeltypes", token: noClaims).expectError(401, code: 5)
            try await server.call(.get, "/channeltypes", headers: [.init("stream-auth-type")!: "anonymous"])
                .expectError(401, code: 5)
        }
    }

    /// A token signed with the app secret (HS256), whose claims are exactly these.
    func signed(_ claims: Claims) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: TestKeys.apiSecret), digestAlgorithm: .sha256)
        return try await keys.sign(claims)
    }

    struct Claims: JWTPayload, CustomStringConvertible {
        var user_id: String?
        var server: Bool?
        var scope: String?
        var channel_cid: String?
        var iat: Int?
        var exp: Int?
        func verify(using algorithm: some JWTAlgorithm) async throws {}
        var description: String {
            (try? JSONEncoder().encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "unencodable claims"
        }
    }

    /// Who each signed token acts as, by what `PATCH /app` answers: 200 for
    /// the server, 403 for a user, 401 for a token refused.
    static let principalTable: [(Claims, Int)] = {
        let now = Int(Date().timeIntervalSince1970)
        return [
            (Claims(), 200),  // getstream 7.0.0's server token: no claims at all
            (Claims(iat: now), 200),  // getstream before 7.0.0
            (Claims(iat: now, exp: now + 600), 200),
            (Claims(exp: now - 10), 401),
            (Claims(server: true), 200),
            (Claims(user_id: "alice", server: true), 200),
            (Claims(server: false), 401),
            (Claims(user_id: "alice"), 403),
            (Claims(user_id: "alice", server: false), 403),
            (Claims(user_id: "alice", iat: now, exp: now - 10), 401),
            (Claims(user_id: ""), 401),
            (Claims(user_id: "al ice"), 401),
            (Claims(scope: "delivery", channel_cid: "messaging:ab", exp: now + 600), 401),  // a scope needs a user
            (Claims(server: true, scope: "delivery", channel_cid: "messaging:ab", exp: now + 600), 401),
            (Claims(user_id: "alice", scope: "delivery", channel_cid: "messaging:ab", exp: now + 600), 403),
        ]
    }()

    @Test("a signed token that names no user acts as the server (Stream's rule); the others as the table says", arguments: principalTable)
    func principals(claims: Claims, status: Int) async throws {
        try await TestServer.run { server in
            try await server.upsert("alice")
            let token = try await signed(claims)
            let reply = try await server.call(.patch, "/app", body: #"{"reciprocal_read_receipts": false}"#, token: token)
            if status == 200 {
                #expect(reply.status == 200, "\(reply.body)")
            } else {
                try reply.expectError(status, code: status == 401 ? 5 : 17)
            }
        }
    }

    @Test("with no claims to name a user, a token not signed by the app's HS256 key is still 401")
    func unsignedServerTokens() async throws {
        func base64URL(_ text: String) -> String {
            Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        let good = try await signed(Claims())
        let parts = good.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        let tokens = [
            "alg none": "\(base64URL(#"{"alg":"none","typ":"JWT"}"#)).\(parts[1]).",
            "alg none, no dot": "\(base64URL(#"{"alg":"none"}"#)).\(parts[1])",
            "no signature": "\(parts[0]).\(parts[1]).",
            "another token's signature": "\(parts[0]).\(base64URL(#"{"iat":1}"#)).\(parts[2])",
            "alg HS384": "\(base64URL(#"{"alg":"HS384","typ":"JWT"}"#)).\(parts[1]).\(parts[2])",
            "another secret": try await forged("{}", secret: String(repeating: "y", count: 40)),
        ]
        try await TestServer.run { server in
            #expect(try await server.call(.get, "/channeltypes", token: good).status == 200)
            for (name, token) in tokens.sorted(by: { $0.key < $1.key }) {
                let reply = try await server.call(.get, "/channeltypes", token: token)
                #expect(reply.status == 401, "\(name): \(reply.body)")
                try reply.expectError(401, code: 5)
            }
        }
    }

    @Test("an expired user token is 401; an unexpired one works")
    func expiry() async throws {
        try await TestServer.run { server in
            try await setUp(server)
            let expired = try await server.services.authority.userToken(for: "alice", expiresIn: -5)
            let reply = try await server.call(.post, "/channels/messaging/ab/query", body: "{}", token: expired)
            try reply.expectError(401, code: 5)
            #expect(try reply.json()["message"].string?.contains("expired") == true)
            let fresh = try await server.services.authority.userToken(for: "alice", expiresIn: 60)
            #expect(try await server.call(.post, "/channels/messaging/ab/query", body: "{}", token: fresh).status == 200)
        }
    }

    @Test("a token that worked is refused once it expires (verified tokens are remembered only until then)")
    func expiresWhileInUse() async throws {
        try await TestServer.run { server in
            try await setUp(server)
            let token = try await server.services.authority.userToken(for: "alice", expiresIn: 2)
            #expect(try await server.call(.post, "/channels/messaging/ab/query", body: "{}", token: token).status == 200)
            try await Task.sleep(for: .seconds(2.5))
            let reply = try await server.call(.post, "/channels/messaging/ab/query", body: "{}", token: token)
            try reply.expectError(401, code: 5)
            #expect(try reply.json()["message"].string?.contains("expired") == true)
        }
    }

    @Test("a user token cannot act for another user", arguments: [
        ("/channels/messaging/ab/read", #"{"user": {"id": "bob"}}"#),
        ("/channels/messaging/ab/unread", #"{"user_id": "bob", "message_id": "ab1"}"#),
        ("/channels/messaging/ab/message", #"{"message": {"text": "hi", "user": {"id": "bob"}}}"#),
        ("/channels/delivered?user_id=bob", #"{"latest_delivered_messages": [{"cid": "messaging:ab", "id": "ab1"}]}"#),
        ("/channels/read", #"{"user": {"id": "bob"}}"#),
        ("/users", #"{"users": {"bob": {"id": "bob", "name": "Not Bob"}}}"#),
    ])
    func actingForAnother(path: String, body: String) async throws {
        try await TestServer.run { server in
            try await setUp(server)
            let alice = try await server.token("alice")
            try await server.call(.post, path, body: body, token: alice).expectError(403, code: 17)
            // Nothing changed for bob.
            let bob = try #require(try await server.readState("messaging:ab", of: "bob"))
            #expect(bob["unread_messages"].int == 1)
            #expect(try await server.store.users(ids: ["bob"])["bob"]?.name == "Bob")
        }
    }

    @Test("a non-member's user token cannot read or write a channel", arguments: [
        ("POST", "/channels/messaging/ab/query", "{}"),
        ("POST", "/channels/messaging/ab/read", "{}"),
        // The answer says nothing of the channel's messages: 403, whether the message is there or not.
        ("POST", "/channels/messaging/ab/read", #"{"message_id": "ab1"}"#),
        ("POST", "/channels/messaging/ab/read", #"{"message_id": "no-such-message"}"#),
        ("POST", "/channels/messaging/ab/message", #"{"message": {"text": "hi"}}"#),
        ("POST", "/channels/messaging/ab", #"{"add_members": ["mallory"]}"#),
        ("GET", "/messages/ab1", ""),
        ("GET", "/messages/ab1/receipts", ""),
        ("POST", "/channels/delivered", #"{"latest_delivered_messages": [{"cid": "messaging:ab", "id": "ab1"}]}"#),
    ])
    func nonMember(method: String, path: String, body: String) async throws {
        try await TestServer.run { server in
            try await setUp(server)
            let mallory = try await server.token("mallory")
            let reply = try await server.call(
                method == "GET" ? .get : .post, path, body: body.isEmpty ? nil : body, token: mallory)
            try reply.expectError(403, code: 17)
            let members = try await server.state("messaging:ab")["members"].array.map { $0["user_id"].string }
            #expect(members == ["alice", "bob"])
            #expect(try await server.state("messaging:ab")["messages"].array.count == 1)
        }
    }

    @Test(
        "a server token acts with full permissions: it sends for a non-member, whose mark read is accepted and makes no read state",
        arguments: StoreKind.all)
    func serverTokenForNonMember(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await setUp(server)
            let read = try await server.ok(.post, "/channels/messaging/ab/read", #"{"user_id": "mallory"}"#)
            #expect(!read["event"].exists)
            try await server.ok(.post, "/channels/messaging/ab/message", #"{"message": {"id": "m1", "text": "x", "user_id": "mallory"}}"#)
            let state = try await server.state("messaging:ab")
            #expect(state["messages"].array.map { $0["id"].string } == ["ab1", "m1"])
            #expect(state["members"].array.map { $0["user_id"].string } == ["alice", "bob"])
            #expect(!state["read"].array.contains { $0["user"]["id"].string == "mallory" })
            // Their message is unread for the members as any other.
            let bob = try #require(state["read"].array.first { $0["user"]["id"].string == "bob" })
            #expect(bob["unread_messages"].int == 2)
            // A user that does not exist cannot send.
            try await server.call(
                .post, "/channels/messaging/ab/message", body: #"{"message": {"text": "x", "user_id": "ghost"}}"#
            ).expectError(400, code: 4)
            try await server.markRead("messaging:ab", "bob")
        }
    }

    @Test("a user token works for its own user on its own channels")
    func ownUser() async throws {
        try await TestServer.run { server in
            try await setUp(server)
            let bob = try await server.token("bob")
            // No user named: the token's user acts.
            let read = try await server.ok(.post, "/channels/messaging/ab/read", "{}", token: bob)
            #expect(read["event"]["user"]["id"].string == "bob")
            #expect(read["event"]["last_read_message_id"].string == "ab1")
            try await server.ok(.post, "/channels/messaging/ab/message", #"{"message": {"id": "b1", "text": "yo"}}"#, token: bob)
            let channels = try await server.ok(.post, "/channels", #"{"filter_conditions": {}}"#, token: bob)
            #expect(channels["channels"].array.map { $0["channel"]["cid"].string } == ["messaging:ab"])
        }
    }

    @Test("only a server token changes channel types")
    func channelTypes() async throws {
        try await TestServer.run { server in
            try await server.upsert("alice")
            let alice = try await server.token("alice")
            try await server.call(.post, "/channeltypes", body: #"{"name": "mine"}"#, token: alice).expectError(403, code: 17)
            try await server.call(.put, "/channeltypes/messaging", body: #"{"read_events": false}"#, token: alice)
                .expectError(403, code: 17)
            #expect(try await server.ok(.get, "/channeltypes/messaging", token: alice)["read_events"].bool == true)
        }
    }

    @Test("health and metrics need no token")
    func openEndpoints() async throws {
        try await TestServer.run { server in
            let health = try await server.execute(uri: "/health", method: .get)
            #expect(health.status == 200)
            try await server.upsert("alice")
            let text = try await server.execute(uri: "/metrics", method: .get).body
            #expect(text.contains("ticks_http_requests_total{"))
            #expect(text.contains("route=\"/users\""))
            #expect(text.contains("ticks_http_request_duration_seconds_bucket"))
        }
    }
}

import Crypto
import Foundation
import JWTKit
import Testing
import TicksTestSupport

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
    /// the server, 403 for a user, 401 for a token refused. Unexpired tokens
    /// expire a day after the table is made, not minutes: a loaded run reaches them long after.
    static let principalTable: [(Claims, Int)] = {
        let now = Int(Date().timeIntervalSince1970)
        return [
            (Claims(), 200),  // getstream 7.0.0's server token: no claims at all
            (Claims(iat: now), 200),  // getstream before 7.0.0
            (Claims(iat: now, exp: now + 86_400), 200),
            (Claims(exp: now - 10), 401),
            (Claims(server: true), 200),
            (Claims(user_id: "alice", server: true), 200),
            (Claims(server: false), 401),
            (Claims(user_id: "alice"), 403),
            (Claims(user_id: "alice", server: false), 403),
            (Claims(user_id: "alice", iat: now, exp: now - 10), 401),
            (Claims(user_id: ""), 401),
            (Claims(user_id: "al ice"), 401),
            (Claims(scope: "delivery", channel_cid: "messaging:ab", exp: now + 86_400), 401),  // a scope needs a user
            (Claims(server: true, scope: "delivery", channel_cid: "messaging:ab", exp: now + 86_400), 401),
            (Claims(user_id: "alice", scope: "delivery", channel_cid: "messaging:ab", exp: now + 86_400), 403),
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
                // An expired token is code 40 (Stream's, upon which its clients fetch a new one).
                let expired = claims.exp.map { $0 < Int(Date().timeIntervalSince1970) } ?? false
                try reply.expectError(status, code: status == 401 ? (expired ? 40 : 5) : 17)
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
            // Code 40, Stream's for an expired token: its clients fetch a new token on it.
            try reply.expectError(401, code: 40)
            #expect(try reply.json()["message"].string?.contains("expired") == true)
            let fresh = try await server.services.authority.userToken(for: "alice", expiresIn: 60)
            #expect(try await server.call(.post, "/channels/messaging/ab/query", body: "{}", token: fresh).status == 200)
        }
    }

    @Test("a token that worked is refused once it expires (verified tokens are remembered only until then)")
    func expiresWhileInUse() async throws {
        // Expiry is read on the server's clock: the test moves it, so a busy machine cannot make the first call late.
        let clock = ManualClock()
        try await TestServer.run(time: clock.timeSource) { server in
            try await setUp(server)
            // An hour: the clock's wall time is the real one plus what the test advanced, so the
            // real seconds a loaded machine spends between the calls must not reach the expiry.
            let token = try await server.services.authority.userToken(for: "alice", expiresIn: 3_600)
            #expect(try await server.call(.post, "/channels/messaging/ab/query", body: "{}", token: token).status == 200)
            clock.advance(by: .seconds(1_800))
            #expect(try await server.call(.post, "/channels/messaging/ab/query", body: "{}", token: token).status == 200)
            clock.advance(by: .seconds(1_800))
            let reply = try await server.call(.post, "/channels/messaging/ab/query", body: "{}", token: token)
            try reply.expectError(401, code: 40)
            #expect(try reply.json()["message"].string?.contains("expired") == true)
        }
    }

    /// Headers that name anything but HS256, each signed exactly as HS256 signs
    /// (HMAC-SHA256 of the app's secret over `header.payload`): only the header says otherwise.
    static let foreignHeaders: [(name: String, header: String)] = [
        ("alg none", #"{"alg":"none","typ":"JWT"}"#),
        ("alg empty", #"{"alg":"","typ":"JWT"}"#),
        ("alg HS384", #"{"alg":"HS384","typ":"JWT"}"#),
        ("alg HS512", #"{"alg":"HS512","typ":"JWT"}"#),
        ("alg RS256", #"{"alg":"RS256","typ":"JWT"}"#),
        ("alg ES256", #"{"alg":"ES256","typ":"JWT"}"#),
        ("alg hs256, lower case", #"{"alg":"hs256","typ":"JWT"}"#),
        ("alg a number", #"{"alg":256,"typ":"JWT"}"#),
        ("alg null", #"{"alg":null,"typ":"JWT"}"#),
        ("no alg", #"{"typ":"JWT"}"#),
        ("header not an object", #""HS256""#),
        ("header not JSON", "HS256"),
    ]

    /// Every kind of token: a server token (said, or by naming no one), a user token, a delivery-only token.
    static let tokenKinds: [(name: String, claims: String)] = [
        ("server", #"{"server":true}"#),
        ("server, no claims", "{}"),
        ("user", #"{"user_id":"alice"}"#),
        ("delivery", #"{"user_id":"alice","scope":"delivery","channel_cid":"messaging:ab","exp":4102444800}"#),
    ]

    static func hmacSigned(header: String, claims: String) -> String {
        func base64URL(_ data: some DataProtocol) -> String {
            Data(data).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        let signed = base64URL(Data(header.utf8)) + "." + base64URL(Data(claims.utf8))
        let mac = HMAC<SHA256>.authenticationCode(
            for: Data(signed.utf8), using: SymmetricKey(data: Data(TestKeys.apiSecret.utf8)))
        return signed + "." + base64URL(Data(mac))
    }

    @Test("only HS256: a header naming any other algorithm, or none, is 401 for every kind of token",
          arguments: tokenKinds.map(\.name))
    func onlyHS256(kind: String) async throws {
        let claims = try #require(Self.tokenKinds.first { $0.name == kind }).claims
        try await TestServer.run { server in
            try await setUp(server)
            let body = #"{"latest_delivered_messages": [{"cid": "messaging:ab", "id": "ab1"}]}"#
            // The same claims under HS256's own header are taken: the table tests the header alone.
            let good = Self.hmacSigned(header: #"{"alg":"HS256","typ":"JWT"}"#, claims: claims)
            let taken = try await server.call(.post, "/channels/delivered?user_id=alice", body: body, token: good)
            #expect(taken.status == 201 || taken.status == 200, "\(kind) under HS256: \(taken.body)")
            for (name, header) in Self.foreignHeaders {
                let token = Self.hmacSigned(header: header, claims: claims)
                let reply = try await server.call(.post, "/channels/delivered?user_id=alice", body: body, token: token)
                #expect(reply.status == 401, "\(kind), \(name): \(reply.body)")
                try reply.expectError(401, code: 5)
            }
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

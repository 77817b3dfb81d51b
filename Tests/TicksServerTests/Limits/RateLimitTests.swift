import Foundation
import HTTPTypes
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// Stream's rate limits: per endpoint, per user (user tokens), per app
/// (server tokens), per address (no valid token), with the headers on every
/// answer and 429 with code 9 past the limit.
@Suite("Rate limits")
struct RateLimitTests {
    static let limit = HTTPField.Name("X-RateLimit-Limit")!
    static let remaining = HTTPField.Name("X-RateLimit-Remaining")!
    static let reset = HTTPField.Name("X-RateLimit-Reset")!

    /// MarkRead: 3 a minute per user, 5 per app.
    static var tight: RateLimits {
        var limits = RateLimits()
        try! limits.set("MarkRead=3/5")
        return limits
    }

    /// The wall time the windows are read from, standing still: a call counts in the window it
    /// was made in however long a loaded machine takes over the test (a minute passed between
    /// calls once, and the window slid). Windows moving is `slidingWindow`'s, on given times.
    static let frozenAt = Timestamp(microseconds: 1_800_000_030_000_000)
    static var frozen: TimeSource { TimeSource(clock: ManualClock(), wallNow: { frozenAt }) }

    func setUp(_ server: TestServer) async throws {
        try await server.upsert("alice", "bob")
        try await server.createChannel("messaging:r", members: ["alice", "bob"])
        try await server.send("messaging:r", id: "r1", from: "alice")
    }

    func markRead(_ server: TestServer, as user: String?) async throws -> Reply {
        try await server.call(
            .post, "/channels/messaging/r/read", body: #"{"user_id": "\#(user ?? "bob")"}"#,
            token: try await server.optionalToken(user))
    }

    @Test("one user hammering one endpoint gets 429 with code 9; the headers count down on every answer")
    func userLimit() async throws {
        try await TestServer.run(rateLimits: Self.tight, time: Self.frozen) { server in
            try await setUp(server)
            for expected in [2, 1, 0] {
                // The window ends within a minute of the call (the server's wall time stands still).
                let sent = Self.frozenAt.microseconds / 1_000_000
                let reply = try await markRead(server, as: "bob")
                let answered = sent
                #expect(reply.status == 200, "\(reply.body)")
                #expect(reply.headers[Self.limit] == "3")
                #expect(reply.headers[Self.remaining] == String(expected))
                let reset = try #require(reply.headers[Self.reset].flatMap { Int64($0) })
                #expect(reset > sent && reset <= answered + 61)
            }
            let refused = try await markRead(server, as: "bob")
            try refused.expectError(429, code: 9)
            #expect(refused.headers[Self.remaining] == "0")
            // Another user, another endpoint and the server token count apart.
            #expect(try await markRead(server, as: "alice").status == 200)
            #expect(try await server.call(.get, "/messages/r1", token: try await server.token("bob")).status == 200)
            #expect(try await markRead(server, as: nil).headers[Self.limit] == "5")
        }
    }

    @Test("server tokens count per app: five calls for any users, then 429")
    func appLimit() async throws {
        try await TestServer.run(rateLimits: Self.tight, time: Self.frozen) { server in
            try await setUp(server)
            for user in ["bob", "alice", "bob", "alice", "bob"] {
                let reply = try await server.call(.post, "/channels/messaging/r/read", body: #"{"user_id": "\#(user)"}"#)
                #expect(reply.status == 200)
            }
            try await server.call(.post, "/channels/messaging/r/read", body: #"{"user_id": "alice"}"#)
                .expectError(429, code: 9)
        }
    }

    @Test("errors carry the headers too: 400, 401, 404 and 405")
    func headersOnErrors() async throws {
        try await TestServer.run { server in
            for reply in [
                try await server.call(.post, "/users", body: "{"),
                try await server.call(.get, "/messages/x1", token: "forged"),
                try await server.call(.get, "/nowhere"),
                try await server.call(.delete, "/users"),
                try await server.call(.get, "/health"),
            ] {
                #expect(reply.headers[Self.limit] != nil, "\(reply.status) \(reply.body)")
                #expect(reply.headers[Self.remaining] != nil)
                #expect(reply.headers[Self.reset] != nil)
            }
        }
    }

    @Test("requests without a valid token count against their address, so forged tokens are limited too")
    func unauthenticatedByAddress() async throws {
        var limits = RateLimits()
        try limits.set("GetMessage=2")
        try await TestServer.run(.standard, .live, rateLimits: limits, time: Self.frozen) { server in
            #expect(try await server.call(.get, "/messages/x1", token: "forged-1").status == 401)
            #expect(try await server.call(.get, "/messages/x1", token: "forged-2").status == 401)
            try await server.call(.get, "/messages/x1", token: "forged-3").expectError(429, code: 9)
        }
    }

    /// A delivery-only token of bob's for messaging:r (docs/webhooks.md).
    func deliveryToken(_ server: TestServer) async throws -> String {
        try await server.services.authority.deliveryToken(
            for: "bob", in: ChannelID(type: "messaging", id: "r"), expiresIn: .seconds(600))
    }

    /// A token for `user` signed with another secret: refused (401).
    func forgedToken(for user: String) async throws -> String {
        let other = await TokenAuthority(
            credentials: try Credentials(apiKey: TestKeys.apiKey, apiSecret: String(TestKeys.apiSecret.reversed())))
        return try await other.userToken(for: user)
    }

    @Test(
        "60 calls a leaked delivery-only token or forged tokens get refused leave the user's own budget whole",
        arguments: StoreKind.all)
    func refusedCallsSpendNoUserBudget(kind: StoreKind) async throws {
        // The budgets' minutes run on the server's wall clock, frozen here: a loaded machine that
        // takes minutes over the calls cannot start a new window midway (a 2026-12-02 run with two
        // suites beside stress-ng counted 200 refusals and no 429).
        try await TestServer.run(kind, time: Self.frozen) { server in
            try await setUp(server)
            let patch = #"{"users": [{"id": "bob", "set": {"name": "Bobby"}}]}"#
            let delivery = try await deliveryToken(server)
            let forged = try await forgedToken(for: "bob")
            // Each spends a budget of its own (the forged one its address's), not bob's: refused
            // 60 times, then 429.
            for (token, status, code) in [(delivery, 403, 17), (forged, 401, 5)] {
                var refusals = 0
                while refusals < 200 {
                    let reply = try await server.call(.patch, "/users", body: patch, token: token)
                    if reply.status == 429 {
                        try reply.expectError(429, code: 9)
                        break
                    }
                    try reply.expectError(status, code: code)
                    refusals += 1
                }
                #expect(refusals == 60, "\(status): \(refusals) refusals")
            }
            let own = try await server.call(.patch, "/users", body: patch, token: try await server.token("bob"))
            #expect(own.status == 200, "\(own.body)")
            #expect(own.headers[Self.remaining] == "59")
            #expect(try own.json()["users"]["bob"]["name"].string == "Bobby")
            // What the token may do, it still does, counted apart from bob's own marks.
            let delivered = #"{"latest_delivered_messages": [{"cid": "messaging:r", "id": "r1"}]}"#
            let marked = try await server.call(.post, "/channels/delivered", body: delivered, token: delivery)
            #expect((200..<300).contains(marked.status), "\(marked.body)")
            let quotas = try await server.ok(
                .get, "/rate_limits?web=true&endpoints=MarkDelivered", token: try await server.token("bob"))
            #expect(quotas["web"]["MarkDelivered"]["remaining"].int == 300)
        }
    }

    /// `GET /connect` as a client sends it, on a new connection: the raw answer
    /// (the head, then any frames), read until it holds what `done` waits for
    /// or nothing more comes for 10 s.
    static func connect(
        port: Int, as user: String, token: String, until done: (String) -> Bool = { $0.hasSuffix("}") }
    ) async throws -> String {
        let connection = try RawConnection(port: port)
        defer { connection.close() }
        #expect(connection.send(RawConnection.connectRequest(userID: user, token: token)))
        // Until `done` or the server closes: it always does one or the other (a 429 and close, an
        // error frame and close, or the health.check), so the deadline only catches a server that hangs.
        return await connection.read(until: done, within: Patience.wait)
    }

    @Test(
        "connects refused for a delivery-only or a forged token leave the user's own connects alone",
        arguments: StoreKind.all)
    func refusedConnectsSpendNoUserBudget(kind: StoreKind) async throws {
        var limits = RateLimits()
        try limits.set("Connect=5")
        try await TestServer.run(kind, .live, rateLimits: limits, time: Self.frozen) { server in
            try await setUp(server)
            let port = try #require(server.livePort)
            for token in [try await deliveryToken(server), try await forgedToken(for: "bob")] {
                // Refused after the upgrade, as Stream does (an error frame, then close), at least 5
                // times (more if they straddle a minute); then that token's budget (the address's, for
                // a forged one) is spent.
                var refusals = 0
                while refusals < 20 {
                    let answer = try await Self.connect(port: port, as: "bob", token: token) {
                        $0.contains(#""error""#) || $0.hasPrefix("HTTP/1.1 4") && $0.hasSuffix("}")
                    }
                    if answer.hasPrefix("HTTP/1.1 429") { break }
                    #expect(answer.hasPrefix("HTTP/1.1 101"), "\(answer.prefix(300))")
                    #expect(answer.contains(#""error""#) && !answer.contains("health.check"), "\(answer)")
                    refusals += 1
                }
                #expect((5..<20).contains(refusals), "\(refusals) refusals")
            }
            let own = try await Self.connect(port: port, as: "bob", token: try await server.token("bob")) {
                $0.contains("health.check")
            }
            #expect(own.hasPrefix("HTTP/1.1 101"), "\(own.prefix(300))")
            #expect(own.contains("health.check"), "\(own)")
            #expect(own.lowercased().contains("x-ratelimit-remaining: 4"), "\(own.prefix(300))")
        }
    }

    @Test("a connect past its limit is refused before the upgrade: 429, code 9 and the X-RateLimit headers")
    func connectPastTheLimit() async throws {
        var limits = RateLimits()
        try limits.set("Connect=2")
        try await TestServer.run(.standard, .live, rateLimits: limits, time: Self.frozen) { server in
            try await server.upsert("bob")
            let port = try #require(server.livePort)
            let token = try await server.token("bob")
            let first = try await Self.connect(port: port, as: "bob", token: token) { $0.contains("health.check") }
            #expect(first.hasPrefix("HTTP/1.1 101"), "\(first.prefix(300))")
            // The 101 carries the headers too.
            #expect(first.lowercased().contains("x-ratelimit-remaining: 1\r\n"), "\(first.prefix(300))")
            // Connects until one is refused (the third, unless they straddle a minute).
            var refused = ""
            for _ in 0..<10 {
                refused = try await Self.connect(port: port, as: "bob", token: token) {
                    $0.contains("health.check") || $0.hasSuffix("}")
                }
                if !refused.hasPrefix("HTTP/1.1 101") { break }
            }
            #expect(refused.hasPrefix("HTTP/1.1 429"), "\(refused.prefix(300))")
            let head = refused.components(separatedBy: "\r\n\r\n").first?.lowercased() ?? ""
            #expect(head.contains("x-ratelimit-limit: 2\r\n"), "\(head)")
            #expect(head.contains("x-ratelimit-remaining: 0\r\n"), "\(head)")
            #expect(head.contains("x-ratelimit-reset: "), "\(head)")
            #expect(head.contains("content-type: application/json"), "\(head)")
            let body = try JSON(parsing: try #require(refused.components(separatedBy: "\r\n\r\n").last))
            #expect(body["code"].int == 9)
            #expect(body["StatusCode"].int == 429)
            #expect(body["message"].string?.contains("too many Connect calls") == true, "\(body)")
            // The server goes on.
            #expect(try await server.call(.get, "/health").status == 200)
        }
    }

    @Test("--rate-limits off: no headers and no 429")
    func off() async throws {
        try await TestServer.run(rateLimits: .off) { server in
            try await setUp(server)
            for _ in 0..<400 {
                let reply = try await markRead(server, as: "bob")
                #expect(reply.status == 200)
                #expect(reply.headers[Self.limit] == nil)
            }
        }
    }

    @Test("GET /app: the app's settings, channel types and limits; the rate limits in force are GET /rate_limits'")
    func app() async throws {
        var limits = ServerLimits.patient
        limits.maxConnectionsPerUser = 7
        try await TestServer.run(limits: limits, rateLimits: Self.tight, time: Self.frozen) { server in
            let app = try await server.ok(.get, "/app")["app"]
            #expect(app["name"].string == TestKeys.apiKey)
            #expect(app["channel_configs"]["messaging"]["read_events"].bool == true)
            #expect(app["channel_configs"]["livestream"]["read_events"].bool == false)
            #expect(!app["rate_limits"].exists)
            let quotas = try await server.ok(.get, "/rate_limits?server_side=true&web=true&endpoints=MarkRead,SendMessage")
            #expect(quotas["web"]["MarkRead"]["limit"].int == 3)
            #expect(quotas["server_side"]["MarkRead"]["limit"].int == 5)
            #expect(quotas["web"]["SendMessage"]["limit"].int == 300)
            #expect(app["limits"]["max_connections_per_user"].int == 7)
            #expect(app["limits"]["max_body_bytes"].int == 1 << 20)
            #expect(app["limits"]["max_custom_data_bytes"].int == 5 * 1024)
        }
    }

    @Test("GET /rate_limits as Stream answers it: per platform and endpoint, remaining calls counted down")
    func quotas() async throws {
        try await TestServer.run(rateLimits: Self.tight, time: Self.frozen) { server in
            try await setUp(server)
            _ = try await markRead(server, as: "bob")
            let bob = try await server.token("bob")
            let mine = try await server.ok(.get, "/rate_limits?web=true&endpoints=MarkRead,SendMessage", token: bob)
            #expect(mine["web"]["MarkRead"]["limit"].int == 3)
            #expect(mine["web"]["MarkRead"]["remaining"].int == 2)
            #expect(mine["web"]["SendMessage"]["remaining"].int == 300)
            #expect(!mine["server_side"].exists)
            #expect(!mine["web"]["GetMessage"].exists)
            _ = try await markRead(server, as: nil)
            let all = try await server.ok(.get, "/rate_limits")
            #expect(all["server_side"]["MarkRead"]["limit"].int == 5)
            #expect(all["server_side"]["MarkRead"]["remaining"].int == 4)
            for platform in ["android", "ios", "web"] { #expect(all[platform]["MarkRead"]["limit"].int == 3) }
            try await server.call(.get, "/rate_limits?endpoints=Nope").expectError(400, code: 4)
            // An endpoint named twice is reported once (it used to trap on a duplicate key).
            let twice = try await server.ok(.get, "/rate_limits?server_side=true&endpoints=MarkRead,MarkRead")
            #expect(twice["server_side"].keys == ["MarkRead"])
        }
    }

    @Test("--rate-limit NAME=USER[/SERVER] parses, and refuses what it cannot")
    func specifications() throws {
        var limits = RateLimits()
        try limits.set("SendMessage=10")
        #expect(limits.limits[.sendMessage] == .init(user: 10, serverSide: 10_000))
        try limits.set("SendMessage=20/30")
        #expect(limits.limits[.sendMessage] == .init(user: 20, serverSide: 30))
        for bad in ["SendMessage", "Nope=1", "SendMessage=x", "SendMessage=-1", "SendMessage=1/2/3", "=5"] {
            #expect(throws: RateLimitSpecificationError.self) { try limits.set(bad) }
        }
    }
}

/// The sliding window itself, on a clock of the test's choosing.
@Suite("Rate limiter")
struct RateLimiterTests {
    static func limiter(_ spec: String, maxKeys: Int = 100_000) throws -> RateLimiter {
        var limits = RateLimits()
        try limits.set(spec)
        return RateLimiter(limits: limits, maxKeys: maxKeys)
    }

    @Test("the previous window counts in proportion to how much of it the sliding window still covers")
    func slidingWindow() throws {
        let limiter = try Self.limiter("MarkRead=10")
        let start = Date(timeIntervalSince1970: 1_800_000_000)  // a window boundary (divisible by 60)
        for second in 0..<10 {
            #expect(limiter.check(.markRead, by: .user("a"), at: start + Double(second)).allowed)
        }
        #expect(!limiter.check(.markRead, by: .user("a"), at: start + 30).allowed)
        // Half-way through the next window, half of the previous one's 10 calls still count.
        let halfWay = start + 90
        #expect(limiter.peek(.markRead, by: .user("a"), at: halfWay).remaining == 5)
        for _ in 0..<5 { #expect(limiter.check(.markRead, by: .user("a"), at: halfWay).allowed) }
        #expect(!limiter.check(.markRead, by: .user("a"), at: halfWay).allowed)
        // Two windows later, everything has slid out.
        #expect(limiter.peek(.markRead, by: .user("a"), at: start + 180).remaining == 10)
        #expect(limiter.check(.markRead, by: .user("a"), at: start + 180).reset == 1_800_000_240)
    }

    @Test("bounded: past maxKeys, new identities share one counter instead of growing the table")
    func boundedKeys() throws {
        // 16 shards of one key each.
        let limiter = try Self.limiter("MarkRead=2", maxKeys: 16)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        var refused = 0
        for index in 0..<1000 where !limiter.check(.markRead, by: .user("u\(index)"), at: now).allowed {
            refused += 1
        }
        // Most of the thousand identities landed on full shards and shared the overflow counters.
        #expect(refused > 900)
    }

    @Test("docs/limits.md's table of default limits names every endpoint once, with the limits it has")
    func documentedDefaults() throws {
        let docs = URL(filePath: #filePath).deletingLastPathComponent().appending(path: "../../../docs/limits.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        // The table that starts with "| endpoints |" and ends at the first line that is not a row.
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let table = lines.drop { !$0.hasPrefix("| endpoints |") }.prefix { $0.hasPrefix("|") }
        #expect(!table.isEmpty, "docs/limits.md has no table of endpoints")
        var documented: [String: RateLimits.Limit] = [:]
        for line in table where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 3, let user = Int(cells[1].replacing(",", with: "")),
                let server = Int(cells[2].replacing(",", with: ""))
            else { continue }
            for name in cells[0].split(separator: ",") {
                let name = name.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "`"))
                #expect(documented[name] == nil, "\(name) is in the table twice")
                documented[name] = RateLimits.Limit(user: user, serverSide: server)
            }
        }
        for endpoint in APIEndpoint.allCases {
            #expect(documented[endpoint.rawValue] == RateLimits.defaults[endpoint], "\(endpoint.rawValue)")
        }
        #expect(Set(documented.keys) == Set(APIEndpoint.allCases.map(\.rawValue)))
    }
}

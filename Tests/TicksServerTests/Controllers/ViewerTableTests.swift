import Foundation
import HTTPTypes
import Testing
import TicksProtocol
import TicksTestSupport

@testable import TicksServer

/// docs/api.md, "Who sees whose counts and reads", row by row: every HTTP
/// answer that carries a user's unread counts, read states, cursors or
/// receipts, asked by every kind of viewer, with what one rule says the
/// answer may tell of finn, who hides his reads (R10) and has 2 unread.
///
/// The rule: a user's counts go to that user and to a server token; their
/// reads, when private, to that user alone (a server token acting as the
/// user sees what the user sees; `unread_batch`, a server's own view of
/// several users' counts, shows their cursors too). The socket's, the
/// webhooks' and `POST /sync`'s events keep R10 by `ReceiptVisibility`
/// (`ReceiptHearingTableTests`); `/sync` is a row here as well.
@Suite("Whose counts and reads each answer tells: one table, both stores")
struct ViewerTableTests {
    /// Who asks.
    enum Viewer: String, CaseIterable, Sendable {
        /// finn's own token.
        case finn
        /// A member who shares reads.
        case alice
        /// Not a member of the channel.
        case dave
        /// A server token naming no user.
        case server
        /// A server token acting as finn (`user_id=finn`) where the call takes one.
        case serverAsFinn

        var token: String? { self == .server || self == .serverAsFinn ? nil : rawValue }
        var isServer: Bool { token == nil }
        /// `user_id=finn` for calls that act as a user.
        var actingAs: String? { self == .serverAsFinn ? "finn" : nil }
    }

    enum Road: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case usersV1, usersV2, upsertV2, partialUpdateV2
        case unread, unreadV2, unreadBatch, unreadBatchV2, explainUnread
        case channelQuery, channelQueryV2, queryChannels, queryChannelsV2
        case receipts, sync

        var testDescription: String { rawValue }

        /// The answer can hold finn's unread counts.
        var carriesCounts: Bool { ![.usersV1, .receipts, .sync].contains(self) }
        /// The answer can hold finn's reads (a cursor, a read time, a read event).
        var carriesReads: Bool { ![.usersV1, .usersV2, .upsertV2, .partialUpdateV2].contains(self) }
        /// A server token acting as a user (`user_id`) gets that user's own view.
        var actsAs: Bool { ![.usersV1, .usersV2, .upsertV2, .partialUpdateV2, .unreadBatch, .unreadBatchV2, .receipts].contains(self) }
        /// A server token naming no one is told users' counts.
        var serverSeesCounts: Bool { [.usersV2, .upsertV2, .partialUpdateV2, .unreadBatch, .unreadBatchV2].contains(self) }
        /// Refused to user tokens whoever they name.
        var serverOnly: Bool { self == .unreadBatch || self == .unreadBatchV2 }
    }

    /// What an answer told of finn.
    struct Told: Equatable, CustomStringConvertible {
        /// His unread count (2).
        var counts = false
        /// That he read (his cursor, a read time, a read event).
        var reads = false

        var description: String { "counts \(counts), reads \(reads)" }
    }

    /// The rule, for every row and viewer.
    static func expected(_ road: Road, _ viewer: Viewer) -> Told {
        if road.serverOnly && !viewer.isServer { return Told() }
        let ownView = viewer == .finn || (viewer == .serverAsFinn && road.actsAs)
        return Told(
            counts: road.carriesCounts && (ownView || (viewer.isServer && road.serverSeesCounts)),
            reads: road.carriesReads && (ownView || (viewer.isServer && road.serverOnly)))
    }

    static let cid = "messaging:vt"
    static let finnsPrivacy = #""privacy_settings": {"read_receipts": {"enabled": false}}"#

    /// alice sends three messages; bob reads them all; finn, who hides his reads, reads the first.
    func cast(_ server: TestServer) async throws -> Timestamp {
        let before = Timestamp(microseconds: Timestamp.now().microseconds - 60_000_000)
        try await server.upsert("alice", "bob", "dave", "finn", privateReads: ["finn"])
        try await server.createChannel(Self.cid, members: ["alice", "bob", "finn"])
        for id in ["vt1", "vt2", "vt3"] { try await server.send(Self.cid, id: id, from: "alice") }
        try await server.markRead(Self.cid, "bob")
        try await server.markRead(Self.cid, "finn", upTo: "vt1")
        return before
    }

    /// Asks `road` as `viewer`; what the answer told of finn.
    func ask(_ road: Road, as viewer: Viewer, on server: TestServer, since: Timestamp) async throws -> Told {
        let token = try await server.optionalToken(viewer.token)
        let acting = viewer.actingAs.map { "user_id=\($0)" }
        func query(_ parts: String?...) -> String {
            let given = parts.compactMap { $0 }
            return given.isEmpty ? "" : "?" + given.joined(separator: "&")
        }
        func get(_ path: String) async throws -> JSON? {
            let reply = try await server.call(.get, path, token: token)
            return (200..<300).contains(reply.status) ? try reply.json() : nil
        }
        func post(_ path: String, _ body: String, method: HTTPRequest.Method = .post) async throws -> JSON? {
            let reply = try await server.call(method, path, body: body, token: token)
            return (200..<300).contains(reply.status) ? try reply.json() : nil
        }
        let usersPayload = "payload=" + #"{"filter_conditions":{"id":{"$in":["finn"]}}}"#
            .addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        func finnsRead(in channel: JSON) -> Told {
            guard let read = channel["read"].array.first(where: { $0["user"]["id"].string == "finn" }) else {
                return Told()
            }
            return Told(counts: read["unread_messages"].int == 2, reads: read["last_read"].exists)
        }
        func counts(_ unread: JSON?) -> Told {
            guard let unread else { return Told() }
            return Told(
                counts: unread["total_unread_count"].int == 2,
                reads: unread["channels"].array.contains { $0["last_read"].exists })
        }
        let actingBody = viewer.actingAs.map { #", "user_id": "\#($0)""# } ?? ""
        switch road {
        case .usersV1, .usersV2:
            let prefix = road == .usersV1 ? "" : "/api/v2"
            let user = try await get(prefix + "/users?" + usersPayload)?["users"][0]
            return Told(counts: user?["unread_count"].int == 2)
        case .upsertV2:
            let body = #"{"users": {"finn": {"id": "finn", "name": "Finn", \#(Self.finnsPrivacy)}}}"#
            return Told(counts: try await post("/api/v2/users", body)?["users"]["finn"]["unread_count"].int == 2)
        case .partialUpdateV2:
            let body = #"{"users": [{"id": "finn", "set": {"name": "Finn"}}]}"#
            let answer = try await post("/api/v2/users", body, method: .patch)
            return Told(counts: answer?["users"]["finn"]["unread_count"].int == 2)
        case .unread, .unreadV2:
            // A user names whom they ask about; a server token must (or is refused).
            let named = viewer.isServer ? acting : "user_id=finn"
            return counts(try await get((road == .unread ? "/unread" : "/api/v2/chat/unread") + query(named)))
        case .unreadBatch, .unreadBatchV2:
            let path = road == .unreadBatch ? "/unread_batch" : "/api/v2/chat/unread_batch"
            return counts(try await post(path, #"{"user_ids": ["finn"]}"#)?["counts_by_user"]["finn"])
        case .explainUnread:
            let named = viewer.isServer ? acting : "user_id=finn"
            guard let answer = try await get("/unread/explain" + query("cid=\(Self.cid)", named)) else { return Told() }
            return Told(counts: answer["unread_count"].int == 2, reads: answer["last_read"].exists)
        case .channelQuery, .channelQueryV2:
            let path = (road == .channelQuery ? "" : "/api/v2/chat") + "/channels/messaging/vt/query"
            guard let state = try await post(path, "{" + actingBody.dropFirst(1) + "}") else { return Told() }
            return finnsRead(in: state)
        case .queryChannels, .queryChannelsV2:
            let path = road == .queryChannels ? "/channels" : "/api/v2/chat/channels"
            let body = #"{"filter_conditions": {"cid": "\#(Self.cid)"}\#(actingBody)}"#
            guard let answer = try await post(path, body), answer["channels"].array.count == 1 else { return Told() }
            return finnsRead(in: answer["channels"][0])
        case .receipts:
            guard let answer = try await get("/messages/vt1/receipts" + query(acting)) else { return Told() }
            let finn = answer["receipts"].array.first { $0["user"]["id"].string == "finn" }
            return Told(reads: finn?["read_at"].exists == true)
        case .sync:
            let body = #"{"channel_cids": ["\#(Self.cid)"], "last_sync_at": "\#(since)"\#(actingBody)}"#
            guard let answer = try await post("/sync", body) else { return Told() }
            let readTypes: Set<String> = ["message.read", "notification.mark_read"]
            let told = answer["events"].array.contains { (event: JSON) -> Bool in
                let type = event["type"].string ?? ""
                return readTypes.contains(type) && event["user"]["id"].string == "finn"
            }
            return Told(reads: told)
        }
    }

    @Test("each row tells finn's counts and reads to exactly the viewers the rule names",
          arguments: StoreKind.all, Road.allCases)
    func row(kind: StoreKind, road: Road) async throws {
        try await TestServer.run(kind) { server in
            let since = try await cast(server)
            for viewer in Viewer.allCases {
                let told = try await ask(road, as: viewer, on: server, since: since)
                #expect(told == Self.expected(road, viewer), "\(road) asked by \(viewer)")
            }
        }
    }

    /// The rows can tell: each answer that may carry finn's counts or reads
    /// does carry them for the viewer the rule allows (else the table would pass by saying nothing).
    @Test("every row tells someone: the table cannot pass by answering nothing")
    func everyRowTellsSomeone() {
        for road in Road.allCases {
            let told = Viewer.allCases.map { Self.expected(road, $0) }
            if road.carriesCounts { #expect(told.contains { $0.counts }, "\(road)") }
            if road.carriesReads { #expect(told.contains { $0.reads }, "\(road)") }
        }
    }
}

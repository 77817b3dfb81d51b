import Foundation
import Testing
import TicksProtocol

@testable import TicksServer

/// docs/api.md, "Permissions", cell by cell: every (token) × (the acting
/// user's place in the channel) × (their global role) × (action), each with
/// the outcome one rule gives, checked by status code and by effect — a
/// refused call changes nothing and shows nothing, an allowed one does what
/// it says.
@Suite("Permissions: every cell of the table")
struct PermissionTableTests {
    /// Who calls: the server token acting for the user, or the user's own token.
    enum Token: String, CaseIterable, Sendable {
        case server, user
    }

    /// The acting user's place in the channel.
    enum Place: String, CaseIterable, Sendable {
        /// An ordinary member.
        case member
        /// A member with the channel role moderator.
        case channelModerator
        /// Created the channel, as one of its members, and still is one.
        case creator
        /// Created the channel as a member, then removed by one of its moderators.
        case formerCreator
        /// Never a member.
        case nonMember

        var isMember: Bool { self == .member || self == .channelModerator || self == .creator }
    }

    /// The acting user's global role.
    enum Role: String, CaseIterable, Sendable {
        case user, moderator, admin
    }

    enum Action: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case create, update, truncate, delete, addMembers, removeMembers
        case readChannel, readMessages, readReceipts, readMembers
        case send, markRead, markUnread, markDelivered, markThreadsRead
        /// `POST /messages/{id}/played` of the owner's voice note (R14).
        case markPlayed
        /// `GET /unread/explain` and `POST /unread/recount`.
        case explainUnread, recountUnread
        /// `PATCH /app` (R15's setting).
        case updateApp

        var testDescription: String { rawValue }
    }

    struct Cell: CustomStringConvertible {
        var token: Token
        var place: Place
        var role: Role
        var action: Action

        var description: String { "\(token) token, \(place), role \(role): \(action)" }

        /// Every cell of `action`'s rows.
        static func all(_ action: Action) -> [Cell] {
            Token.allCases.flatMap { token in
                Place.allCases.flatMap { place in
                    Role.allCases.map { role in Cell(token: token, place: place, role: role, action: action) }
                }
            }
        }
    }

    /// The rule, as docs/api.md states it.
    static func allowed(_ cell: Cell) -> Bool {
        // App-wide power is the server token's: it may do everything.
        if cell.token == .server { return true }
        // `POST /threads/read` names no channel: any user marks their own threads, which are
        // in channels they belong to; in any other it finds nothing to mark.
        if cell.action == .markThreadsRead { return true }
        // Recounting the kept counts is the app's own backend's: never a user token's.
        if cell.action == .recountUnread { return false }
        // The app's settings are the app's own backend's too.
        if cell.action == .updateApp { return false }
        // A user token acts only in channels its user belongs to (and cannot create one
        // without being among its members): being its creator, or an admin, grants nothing outside.
        guard cell.place.isMember else { return false }
        switch cell.action {
        case .create, .readChannel, .readMessages, .readReceipts, .readMembers, .send, .markRead, .markUnread,
            .markDelivered, .markThreadsRead, .explainUnread, .markPlayed:
            // What every member may do.
            return true
        case .recountUnread, .updateApp:
            return false
        case .update, .truncate, .delete, .addMembers, .removeMembers:
            // What managers may do: the channel's creator, its moderators, admins.
            return cell.place == .creator || cell.place == .channelModerator || cell.role == .admin
        }
    }

    @Test("each cell's status and effect follow the one rule", arguments: StoreKind.all, Action.allCases)
    func table(kind: StoreKind, action: Action) async throws {
        try await TestServer.run(kind) { server in
            for (index, cell) in Cell.all(action).enumerated() {
                try await check(cell, prefix: "\(action.rawValue)\(index)", server)
            }
        }
    }

    /// The people of one cell's channel, all fresh.
    struct Cast {
        let prefix: String
        var owner: String { "\(prefix)-owner" }
        var bob: String { "\(prefix)-bob" }
        var newcomer: String { "\(prefix)-new" }
        var actor: String { "\(prefix)-actor" }
        var channelID: String { "\(prefix)-ch" }
        var cid: String { "messaging:\(channelID)" }
        var path: String { "/channels/messaging/\(channelID)" }
        var message: String { "\(prefix)-m1" }
        var voiceNote: String { "\(prefix)-v1" }
    }

    func check(_ cell: Cell, prefix: String, _ server: TestServer) async throws {
        let cast = Cast(prefix: prefix)
        let expected = Self.allowed(cell)
        try await server.ok(
            .post, "/users",
            """
            {"users": {"\(cast.owner)": {"id": "\(cast.owner)"}, "\(cast.bob)": {"id": "\(cast.bob)"},
             "\(cast.newcomer)": {"id": "\(cast.newcomer)"}, "\(cast.actor)": {"id": "\(cast.actor)", "role": "\(cell.role)"}}}
            """)
        if cell.action != .create { try await setUpChannel(cell, cast, server) }
        let token = cell.token == .user ? try await server.token(cast.actor) : nil
        let reply = try await act(cell, cast, token: token, server)
        let comment: Comment = "\(cell) → \(reply.status) \(reply.body)"
        if expected {
            #expect((200..<300).contains(reply.status), comment)
        } else {
            #expect(reply.status == 403, comment)
            #expect((try? reply.json()["code"].int) == 17, comment)
        }
        try await checkEffect(cell, cast, allowed: expected, reply: reply, server, comment)
    }

    /// The channel of the cell: owner, bob and (by `place`) the actor; one message from the owner.
    func setUpChannel(_ cell: Cell, _ cast: Cast, _ server: TestServer) async throws {
        switch cell.place {
        case .member, .channelModerator:
            try await server.createChannel(cast.cid, members: [cast.owner, cast.bob, cast.actor], createdBy: cast.owner)
            if cell.place == .channelModerator {
                try await server.ok(.post, cast.path, #"{"add_moderators": ["\#(cast.actor)"]}"#)
            }
        case .creator, .formerCreator:
            try await server.createChannel(cast.cid, members: [cast.actor, cast.owner, cast.bob], createdBy: cast.actor)
            if cell.place == .formerCreator {
                // A moderator removes the creator.
                try await server.ok(.post, cast.path, #"{"add_moderators": ["\#(cast.owner)"]}"#)
                try await server.ok(
                    .post, cast.path, #"{"remove_members": ["\#(cast.actor)"]}"#, token: try await server.token(cast.owner))
            }
        case .nonMember:
            try await server.createChannel(cast.cid, members: [cast.owner, cast.bob], createdBy: cast.owner)
        }
        try await server.send(cast.cid, id: cast.message, from: cast.owner, text: "secret")
        if cell.action == .updateApp {
            _ = try await server.store.updateAppOptions(AppOptions.Change(reciprocalReadReceipts: false))
        }
        if cell.action == .markPlayed {
            try await server.sendVoiceNote(cast.cid, id: cast.voiceNote, from: cast.owner)
        }
        if cell.action == .markUnread, cell.place.isMember {
            try await server.markRead(cast.cid, cast.actor)
        }
        if cell.action == .markThreadsRead {
            // A thread with a reply unread for the actor (who joins it by replying, when a member).
            for (id, user) in [("\(cast.prefix)-r1", cast.actor), ("\(cast.prefix)-r2", cast.bob)] {
                try await server.ok(
                    .post, "\(cast.path)/message",
                    #"{"message": {"id": "\#(id)", "text": "re", "parent_id": "\#(cast.message)", "user_id": "\#(user)"}}"#)
            }
            let threads = try #require(try await server.store.unreadCounts(of: [cast.actor])[cast.actor]).threads
            #expect(threads.map(\.unread) == (cell.place.isMember ? [1] : []), "\(cell): set-up")
        }
        #expect(try await members(cast, server).contains(cast.actor) == cell.place.isMember, "\(cell): set-up")
    }

    /// The call of the cell, as the actor (the server token names them).
    func act(_ cell: Cell, _ cast: Cast, token: String?, _ server: TestServer) async throws -> Reply {
        let actor = cast.actor
        let asUser = #""user_id": "\#(actor)""#
        switch cell.action {
        case .create:
            // Among the first members when the actor is to be one.
            let members = cell.place.isMember ? [actor, cast.owner] : [cast.owner, cast.bob]
            let list = members.map { "\"\($0)\"" }.joined(separator: ", ")
            return try await server.call(
                .post, "\(cast.path)/query",
                body: #"{"data": {"members": [\#(list)], "created_by": {"id": "\#(actor)"}}}"#, token: token)
        case .update:
            return try await server.call(.post, cast.path, body: #"{"data": {"color": "red"}, \#(asUser)}"#, token: token)
        case .truncate:
            return try await server.call(.post, "\(cast.path)/truncate", body: "{\(asUser)}", token: token)
        case .delete:
            return try await server.call(.delete, cast.path, token: token)
        case .addMembers:
            return try await server.call(
                .post, cast.path, body: #"{"add_members": ["\#(actor)", "\#(cast.newcomer)"], \#(asUser)}"#, token: token)
        case .removeMembers:
            return try await server.call(
                .post, cast.path, body: #"{"remove_members": ["\#(cast.bob)"], \#(asUser)}"#, token: token)
        case .readChannel:
            return try await server.call(.post, "\(cast.path)/query", body: #"{"user": {"id": "\#(actor)"}}"#, token: token)
        case .readMessages:
            return try await server.call(.get, "\(cast.path)/messages?ids=\(cast.message)", token: token)
        case .readReceipts:
            return try await server.call(.get, "/messages/\(cast.message)/receipts", token: token)
        case .readMembers:
            let payload = #"{"type":"messaging","id":"\#(cast.channelID)","user_id":"\#(actor)"}"#
            let encoded = payload.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? payload
            return try await server.call(.get, "/members?payload=\(encoded)", token: token)
        case .send:
            return try await server.call(
                .post, "\(cast.path)/message",
                body: #"{"message": {"id": "\#(cast.prefix)-m2", "text": "hi", "user": {"id": "\#(actor)"}}}"#, token: token)
        case .markRead:
            return try await server.call(.post, "\(cast.path)/read", body: #"{"user": {"id": "\#(actor)"}}"#, token: token)
        case .markUnread:
            return try await server.call(
                .post, "\(cast.path)/unread", body: #"{"user": {"id": "\#(actor)"}, "message_id": "\#(cast.message)"}"#,
                token: token)
        case .explainUnread:
            return try await server.call(.get, "/unread/explain?cid=\(cast.cid)&user_id=\(actor)", token: token)
        case .recountUnread:
            return try await server.call(.post, "/unread/recount", body: #"{"user_ids": ["\#(actor)"]}"#, token: token)
        case .markDelivered:
            return try await server.call(
                .post, "/channels/delivered?user_id=\(actor)",
                body: #"{"latest_delivered_messages": [{"cid": "\#(cast.cid)", "id": "\#(cast.message)"}], \#(asUser)}"#,
                token: token)
        case .markThreadsRead:
            return try await server.call(.post, "/threads/read", body: "{\(asUser)}", token: token)
        case .updateApp:
            return try await server.call(.patch, "/app", body: #"{"reciprocal_read_receipts": true}"#, token: token)
        case .markPlayed:
            return try await server.call(.post, "/messages/\(cast.voiceNote)/played", body: "{\(asUser)}", token: token)
        }
    }

    func members(_ cast: Cast, _ server: TestServer) async throws -> [String] {
        try await server.state(cast.cid)["members"].array.compactMap { $0["user_id"].string }
    }

    /// What the call did, or — refused — that it did nothing and showed nothing.
    func checkEffect(
        _ cell: Cell, _ cast: Cast, allowed: Bool, reply: Reply, _ server: TestServer, _ comment: Comment
    ) async throws {
        let store = server.store
        if !allowed {
            #expect(!reply.body.contains("secret") && !reply.body.contains(cast.message), comment)
        }
        switch cell.action {
        case .create:
            let made = try await store.channel(ChannelID(type: "messaging", id: cast.channelID))
            #expect((made != nil) == allowed, comment)
            if let made { #expect(made.createdBy == cast.actor, comment) }
        case .update:
            let channel = try #require(try await store.channel(ChannelID(type: "messaging", id: cast.channelID)), comment)
            #expect((channel.custom["color"] == .string("red")) == allowed, comment)
        case .truncate:
            let messages = try await server.state(cast.cid)["messages"].array.compactMap { $0["id"].string }
            #expect(messages == (allowed ? [] : [cast.message]), comment)
        case .delete:
            #expect((try await store.channel(ChannelID(type: "messaging", id: cast.channelID)) == nil) == allowed, comment)
        case .addMembers:
            let members = try await members(cast, server)
            #expect(members.contains(cast.newcomer) == allowed, comment)
            #expect(members.contains(cast.actor) == (allowed || cell.place.isMember), comment)
        case .removeMembers:
            #expect(try await members(cast, server).contains(cast.bob) == !allowed, comment)
        case .readChannel:
            let shown = allowed ? try reply.json()["messages"].array.compactMap { $0["text"].string } : []
            #expect(shown == (allowed ? ["secret"] : []), comment)
        case .readMessages:
            let shown = allowed ? try reply.json()["messages"].array.compactMap { $0["id"].string } : []
            #expect(shown == (allowed ? [cast.message] : []), comment)
        case .readReceipts:
            #expect(try reply.json()["receipts"].exists == allowed, comment)
        case .readMembers:
            let shown = allowed ? try reply.json()["members"].array.compactMap { $0["user_id"].string } : []
            #expect(shown.contains(cast.owner) == allowed, comment)
        case .send:
            #expect((try await store.message(id: "\(cast.prefix)-m2") != nil) == allowed, comment)
        case .markRead, .markUnread, .markDelivered:
            try await checkMark(cell, cast, allowed: allowed, server, comment)
        case .markThreadsRead:
            // The member's thread is read; no one else had any.
            #expect(try reply.json()["marked_threads_count"].int == (cell.place.isMember ? 1 : 0), comment)
            #expect(try await server.store.unreadCounts(of: [cast.actor])[cast.actor]?.threads == [], comment)
        case .markPlayed:
            // A member's play is kept; a non-member's — refused, or accepted from a server token — is not.
            let receipts = try #require(try await store.receipts(forMessage: cast.voiceNote), comment)
            let played = receipts.entries.filter { $0.playedAt != nil }.map(\.userID)
            #expect(played == (cell.place.isMember ? [cast.actor] : []), comment)
        case .explainUnread:
            // A member's count explained (the owner's message, after their cursor); a server
            // token asking for a non-member gets no read state and nothing counted.
            guard allowed else { return }
            let answer = try reply.json()
            #expect(answer["member"].bool == cell.place.isMember, comment)
            #expect(answer["unread_count"].int == (cell.place.isMember ? 1 : 0), comment)
            let listed = answer["messages"].array.compactMap { $0["id"].string }
            #expect(listed == (cell.place.isMember ? [cast.message] : []), comment)
        case .recountUnread:
            // Nothing had drifted: a recount checks the actor and changes nothing.
            if allowed {
                let answer = try reply.json()
                #expect(answer["users_checked"].int == 1 && answer["fixed"].array.isEmpty, comment)
            }
            let channel = try #require(try await store.channel(ChannelID(type: "messaging", id: cast.channelID)), comment)
            let unread = try await store.member(cast.actor, of: channel)?.unread
            #expect(unread == (cell.place.isMember ? 1 : nil), comment)
        case .updateApp:
            #expect(try await store.appOptions().reciprocalReadReceipts == allowed, comment)
        }
    }

    /// A member's mark moves their state; a mark for a non-member — refused
    /// for a user token, accepted for a server token — leaves them without any.
    func checkMark(_ cell: Cell, _ cast: Cast, allowed: Bool, _ server: TestServer, _ comment: Comment) async throws {
        let channel = try #require(try await server.store.channel(ChannelID(type: "messaging", id: cast.channelID)), comment)
        let state = try await server.store.member(cast.actor, of: channel)
        guard cell.place.isMember else {
            #expect(state == nil, comment)
            return
        }
        let member = try #require(state, comment)
        switch cell.action {
        case .markRead: #expect(member.unread == 0 && member.lastReadMessageID == cast.message, comment)
        case .markUnread: #expect(member.unread == 1, comment)
        default: #expect(member.lastDeliveredMessageID == cast.message, comment)
        }
    }

    @Test("the conversation of two others cannot be taken over (issue 22, item 1)", arguments: StoreKind.all)
    func takeover(kind: StoreKind) async throws {
        try await TestServer.run(kind) { server in
            try await server.upsert("dm1", "dm2", "spy")
            let spy = try await server.token("spy")
            // Making the distinct channel of two others: refused, nothing made.
            let body = #"{"data": {"members": ["dm1", "dm2"]}}"#
            try await server.call(.post, "/channels/messaging/query", body: body, token: spy).expectError(403, code: 17)
            let id = ChannelsController.distinctChannelID(members: ["dm1", "dm2"])
            #expect(try await server.store.channel(ChannelID(type: "messaging", id: id)) == nil)
            // Their own channel, made by one of them.
            let made = try await server.call(.post, "/channels/messaging/query", body: body, token: try await server.token("dm1"))
            #expect(made.status == 201)
            #expect(try made.json()["channel"]["created_by"]["id"].string == "dm1")
            try await server.send("messaging:\(id)", id: "dm-1", from: "dm2", text: "between us")
            // The spy can neither join nor read.
            let encoded = id.replacingOccurrences(of: "!", with: "%21")
            try await server.call(.post, "/channels/messaging/\(encoded)", body: #"{"add_members": ["spy"]}"#, token: spy)
                .expectError(403, code: 17)
            let read = try await server.call(.post, "/channels/messaging/\(encoded)/query", body: "{}", token: spy)
            try read.expectError(403, code: 17)
            #expect(!read.body.contains("between us"))
            let members = try await server.state("messaging:\(id)")["members"].array.compactMap { $0["user_id"].string }
            #expect(members == ["dm1", "dm2"])
        }
    }
}

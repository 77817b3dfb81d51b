import Foundation
import Hummingbird
import TicksProtocol

/// `POST /users`, `PATCH /users`, `GET /users`, `DELETE /users/{id}` and
/// `POST /users/delete`; all but `DELETE` in API v2 too (`/api/v2/users`),
/// answering v2's `FullUserResponse` (`FullUser`).
struct UsersController {
    let store: any TicksStore
    let events: EventPublisher
    let limits: ServerLimits
    static let maxUsersPerCall = 100

    func addRoutes(to group: RouterGroup<TicksRequestContext>) {
        group.on(.updateUsers, use: upsert)
        group.on(.queryUsers, use: query)
        group.on(.updateUsersPartial, use: updatePartial)
        group.on(.deleteUser, use: delete)
        group.on(.deleteUsers, use: deleteMany)
    }

    struct DeletedUser: Encodable {
        var user: User
    }

    /// `DELETE /users/{user_id}[?hard_delete=true][&mark_messages_deleted=true]`
    /// (server tokens): the user leaves every channel, and their read state,
    /// receipts and thread read state go with them (R6); their messages are
    /// deleted (never unread again) with `mark_messages_deleted` or
    /// `hard_delete`; `hard_delete` removes the user too.
    @Sendable func delete(_ request: Request, context: TicksRequestContext) async throws -> Response {
        guard case .server = try context.requirePrincipal() else {
            throw APIError.forbidden("deleting users needs a server token")
        }
        let userID = try context.pathParameter("user_id")
        try requireValidID(userID, "user_id")
        let hard = try booleanParameter(request.queryParameter("hard_delete"), "hard_delete")
        let messages = try booleanParameter(request.queryParameter("mark_messages_deleted"), "mark_messages_deleted")
        guard let user = try await store.users(ids: [userID])[userID] else {
            throw APIError.notFound("user '\(userID)' does not exist")
        }
        _ = try await store.deleteUser(userID, hard: hard, messages: messages, now: .now())
        return try context.respond(DeletedUser(user: user))
    }

    /// How `POST /users/delete` deletes, from Stream's `user`, `messages` and
    /// `conversations` modes (`soft`, `pruning`, `hard`; none when absent or `""`).
    struct DeleteUsersRequest: Decodable {
        var userIDs: [String]
        var user: String?
        var messages: String?
        var conversations: String?
        var newChannelOwnerID: String?
        var newCallOwnerID: String?

        enum CodingKeys: String, CodingKey {
            case userIDs = "user_ids"
            case user, messages, conversations
            case newChannelOwnerID = "new_channel_owner_id"
            case newCallOwnerID = "new_call_owner_id"
        }
    }

    /// What `POST /users/delete` does to each user, as Ticks can do it.
    struct BulkDeletion: Equatable {
        var hard: Bool
        var messages: Bool
        /// Delete the user's conversations (channels of two members), hard or not; nil keeps them.
        var conversations: Bool?

        init(_ body: DeleteUsersRequest) throws {
            func mode(_ value: String?, _ name: String) throws -> String? {
                switch value {
                case nil, "": return nil
                case "soft", "hard": return value
                case "pruning":
                    throw APIError.input("\(name): pruning is not supported: Ticks deletes soft or hard")
                default: throw APIError.input("\(name) must be soft, pruning or hard")
                }
            }
            let user = try mode(body.user, "user")
            let messages = try mode(body.messages, "messages")
            let conversations = try mode(body.conversations, "conversations")
            if user == "hard", messages != "hard" || conversations != "hard" {
                throw APIError.input("user: hard needs messages: hard and conversations: hard")
            }
            if messages == "hard", user != "hard" {
                throw APIError.input("messages: hard needs user: hard: Ticks hard-deletes messages with their sender")
            }
            if let owner = body.newChannelOwnerID, !owner.isEmpty {
                throw APIError.input(
                    "new_channel_owner_id is not supported: a deleted user's channels keep their creator")
            }
            hard = user == "hard"
            self.messages = messages != nil
            self.conversations = conversations.map { $0 == "hard" }
        }
    }

    /// `POST /users/delete` (server tokens): deletes 1 to 100 users as
    /// `DELETE /users/{id}` does, their conversations first when asked, and
    /// answers with a task whose result says, per user, how it went. The
    /// deletions are done before the answer; the task records them.
    @Sendable func deleteMany(_ request: Request, context: TicksRequestContext) async throws -> Response {
        guard case .server = try context.requirePrincipal() else {
            throw APIError.forbidden("deleting users needs a server token")
        }
        var request = request
        let body = try await request.decodeJSON(DeleteUsersRequest.self)
        guard (1...Self.maxUsersPerCall).contains(body.userIDs.count) else {
            throw APIError.input("user_ids must name 1 to \(Self.maxUsersPerCall) users")
        }
        for userID in body.userIDs { try requireValidID(userID, "user_ids") }
        if let owner = body.newCallOwnerID, !owner.isEmpty { try requireValidID(owner, "new_call_owner_id") }
        let deletion = try BulkDeletion(body)
        let deleter = ChannelDeleter(store: store, events: events)
        var task = CompletedTask()
        for userID in body.userIDs.uniqued() {
            do {
                if let hard = deletion.conversations {
                    for channel in try await channels(of: userID) where channel.memberCount == 2 {
                        _ = try await deleter.deleteConversation(channel, of: userID, hard: hard)
                    }
                }
                _ = try await store.deleteUser(userID, hard: deletion.hard, messages: deletion.messages, now: .now())
                task.succeeded(userID)
            } catch StoreError.unknownUser {
                task.failed(userID, "user '\(userID)' does not exist")
            }
        }
        return try await task.save(in: store, answering: context)
    }

    /// Every channel `userID` is a member of, a page at a time.
    private func channels(of userID: String) async throws -> [ChannelRecord] {
        let page = 100
        var found: [ChannelRecord] = []
        while true {
            let next = try await store.channels(
                matching: ChannelFilter(requiredMember: userID), sort: ChannelSort.newestFirst, limit: page,
                offset: found.count)
            found += next
            if next.count < page { return found }
        }
    }

    struct PartialUsersRequest: Decodable {
        var users: [Entry]

        struct Entry: Decodable {
            var id: String
            var update: PartialUpdate

            enum CodingKeys: String, CodingKey { case id }

            init(from decoder: any Decoder) throws {
                id = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .id)
                update = try PartialUpdate(from: decoder)
            }
        }
    }

    /// The user fields a partial update may not touch.
    static let fixedFields: Set<String> = ["id", "created_at", "updated_at", "last_active", "online"]

    /// `PATCH /users`: `set` and `unset` of each user's fields (a user token
    /// only its own, and never its role).
    @Sendable func updatePartial(_ request: Request, context: TicksRequestContext) async throws -> Response {
        var request = request
        let body = try await request.decodeJSON(PartialUsersRequest.self)
        guard (1...Self.maxUsersPerCall).contains(body.users.count) else {
            throw APIError.input("users must name 1 to \(Self.maxUsersPerCall) users")
        }
        guard Set(body.users.map(\.id)).count == body.users.count else {
            throw APIError.input("users names a user twice")
        }
        let isServer = if case .server = try context.requirePrincipal() { true } else { false }
        var edits: [UserEdit] = []
        for entry in body.users {
            try requireValidID(entry.id, "user id")
            _ = try context.actingUser(named: entry.id)
            try entry.update.validate("user", reserved: Self.fixedFields)
            if !isServer, entry.update.set["role"] != nil || entry.update.unset.contains("role") {
                throw APIError.forbidden("user '\(entry.id)' may not change their role; only a server token may")
            }
            let (update, limits) = (entry.update, limits)
            edits.append(
                UserEdit(id: entry.id) { stored in
                    var fields = try JSONCoding.object(stored)
                    fields = update.applied(to: fields)
                    let user: User
                    do {
                        user = try JSONCoding.decode(User.self, from: fields)
                    } catch let error as DecodingError {
                        throw APIError.input("user '\(stored.id)': \(error.readableDescription)")
                    }
                    try UserInput.validate(user, limits: limits)
                    return user
                })
        }
        let users = try await store.updateUsers(edits, now: .now())
        let viewer = try context.requirePrincipal()
        return try context.respond(try await UsersByID(full(users, in: context.apiVersion, for: viewer)))
    }

    struct UpsertRequest: Decodable {
        var users: [String: User]
    }

    /// Stream's answer to an upsert or partial update: the users by id (v2
    /// adds `membership_deletion_task_id`, empty: Ticks' upserts start no task).
    struct UsersByID: Encodable {
        var users: [String: FullUser]

        init(_ users: [FullUser]) {
            self.users = Dictionary(uniqueKeysWithValues: users.map { ($0.user.id, $0) })
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: AnyCodingKey.self)
            try c.encode(users, forKey: AnyCodingKey("users"))
            if encoder.apiVersion == .v2 { try c.encode("", forKey: AnyCodingKey("membership_deletion_task_id")) }
        }
    }

    /// A user as v2's `FullUserResponse` writes it: in v1 the user alone; in
    /// v2 also the fields that shape requires beside it: no devices or mutes
    /// (Ticks keeps none), and the user's own unread counts.
    struct FullUser: Encodable {
        var user: User
        var unread: UnreadCounts?

        func encode(to encoder: any Encoder) throws {
            try user.encode(to: encoder)
            guard encoder.apiVersion == .v2 else { return }
            var c = encoder.container(keyedBy: AnyCodingKey.self)
            for list in ["devices", "mutes", "channel_mutes"] {
                try c.encode([JSONValue](), forKey: AnyCodingKey(list))
            }
            let messages = unread?.totals.messages ?? 0
            try c.encode(messages, forKey: AnyCodingKey("unread_count"))
            try c.encode(messages, forKey: AnyCodingKey("total_unread_count"))
            try c.encode(unread?.totals.channels ?? 0, forKey: AnyCodingKey("unread_channels"))
            try c.encode(unread?.threads.count ?? 0, forKey: AnyCodingKey("unread_threads"))
        }
    }

    /// `users` as answers in `version` to `viewer`: in v2 with unread counts,
    /// read in one call. Counts are their own user's: a user token gets its
    /// own, a server token everyone's, and anyone else's read as 0 (v2's
    /// shape requires the fields). Another user's counts would tell when
    /// they read, which R10 keeps to them (docs/api.md, "Who sees whose counts").
    func full(_ users: [User], in version: APIVersion, for viewer: Principal) async throws -> [FullUser] {
        guard version == .v2, !users.isEmpty else { return users.map { FullUser(user: $0) } }
        let counted = users.map(\.id).filter { Self.seesCounts(of: $0, viewer) }
        let counts = counted.isEmpty ? [:] : try await store.unreadCounts(of: counted)
        return users.map { FullUser(user: $0, unread: counts[$0.id]) }
    }

    /// Whether `viewer` may see `userID`'s unread counts: their own, or a server token.
    static func seesCounts(of userID: String, _ viewer: Principal) -> Bool {
        switch viewer {
        case .server: true
        case .user(let own): own == userID
        }
    }

    @Sendable func upsert(_ request: Request, context: TicksRequestContext) async throws -> Response {
        var request = request
        let body = try await request.decodeJSON(UpsertRequest.self)
        guard !body.users.isEmpty else { throw APIError.input("users must not be empty") }
        guard body.users.count <= Self.maxUsersPerCall else {
            throw APIError.input("at most \(Self.maxUsersPerCall) users per call")
        }
        var users = Array(body.users.values)
        for (key, user) in body.users {
            try UserInput.validate(user, limits: limits)
            guard key == user.id else { throw APIError.input("users.\(key.prefix(64)) has id '\(user.id)'") }
            // A user token may only update its own user.
            _ = try context.actingUser(named: user.id)
        }
        if case .user(let own) = try context.requirePrincipal() {
            // Only a server token gives roles: a user keeps theirs, and may not name another.
            let stored = try await store.users(ids: [own])[own]
            for index in users.indices {
                let role = stored?.role
                if let asked = users[index].role, asked != (role ?? "user") {
                    throw APIError.forbidden("user '\(own)' may not change their role; only a server token may")
                }
                users[index].role = role
            }
        }
        let stored = try await store.upsertUsers(users, now: .now())
        let viewer = try context.requirePrincipal()
        return try context.respond(try await UsersByID(full(stored, in: context.apiVersion, for: viewer)))
    }

    struct QueryPayload: Decodable {
        var filterConditions: [String: FilterValue]

        enum CodingKeys: String, CodingKey { case filterConditions = "filter_conditions" }
    }

    struct UserList: Encodable {
        var users: [FullUser]
    }

    @Sendable func query(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let viewer = try context.requirePrincipal()
        guard let payload = request.queryParameter("payload") else {
            throw APIError.input("payload is required: ?payload={\"filter_conditions\": {\"id\": {\"$in\": [...]}}}")
        }
        let query: QueryPayload
        do {
            query = try JSONCoding.decoder(context.apiVersion)
                .decode(QueryPayload.self, from: Data(String(payload).utf8))
        } catch let error as DecodingError {
            throw APIError.input("payload: \(error.readableDescription)")
        }
        if let unsupported = query.filterConditions.keys.first(where: { $0 != "id" }) {
            throw APIError.input("filtering users on '\(unsupported.prefix(64))' is not supported; filter on id")
        }
        let ids = try filterValues(
            query.filterConditions["id"]?.values ?? [], of: "id", rule: Identifier.id, limits: limits)
        let found = try await store.users(ids: ids)
        let users = try await full(ids.uniqued().compactMap { found[$0] }, in: context.apiVersion, for: viewer)
        return try context.respond(UserList(users: users))
    }
}

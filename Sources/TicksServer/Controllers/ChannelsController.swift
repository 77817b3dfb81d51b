import Foundation
import Hummingbird
import TicksProtocol
import TicksReceipts

/// Channels, their members, messages and the read/delivered marks.
struct ChannelsController {
    let store: any TicksStore
    let hub: ConnectionHub
    let events: EventPublisher
    let limits: ServerLimits

    var receipts: Receipts { Receipts(store: store, events: events) }

    static let defaultMessageLimit = 25
    static let maxMessageLimit = 300
    static let maxChannelsPerQuery = 30

    func addRoutes(to group: RouterGroup<TicksRequestContext>) {
        group.on(.queryChannels, use: queryChannels)
        group.on(.markChannelsRead, use: markAllRead)
        group.on(.markDelivered, use: markDelivered)
        group.on(.getOrCreateChannel, use: queryChannel)
        group.on(.updateChannel, use: updateChannel)
        group.on(.sendMessage, use: sendMessage)
        group.on(.markRead, use: markRead)
        group.on(.markUnread, use: markUnread)
        addLifecycleRoutes(to: group)
    }

    // MARK: Channel query

    struct ChannelData: Decodable {
        var members: [MemberRef]?
        var createdBy: UserRef?
        var createdByID: String?
        var custom: [String: JSONValue]

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: AnyCodingKey.self)
            members = try container.decodeIfPresent([MemberRef].self, forKey: AnyCodingKey("members"))
            createdBy = try container.decodeIfPresent(UserRef.self, forKey: AnyCodingKey("created_by"))
            createdByID = try container.decodeIfPresent(String.self, forKey: AnyCodingKey("created_by_id"))
            custom = try container.customFields(excluding: Channel.reserved)
        }
    }

    struct Pagination: Decodable {
        var limit: Int?
        var idLt: String?

        enum CodingKeys: String, CodingKey {
            case limit
            case idLt = "id_lt"
        }
    }

    struct QueryRequest: Decodable {
        var data: ChannelData?
        var messages: Pagination?
        var user: UserRef?
        var userID: String?

        enum CodingKeys: String, CodingKey {
            case data, messages, user
            case userID = "user_id"
        }
    }

    @Sendable func queryChannel(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let (type, id) = try channelPath(context)
        var request = request
        let body = try await request.decodeJSON(QueryRequest.self)
        return try await queryChannel(type: type, id: id, body: body, context: context)
    }

    /// A channel id that cannot be used: `/channels/{type}/query` is the
    /// distinct-channel route, so a channel named `query` could never be
    /// updated or deleted.
    static let reservedChannelIDs: Set<String> = ["query"]

    /// Gets the channel `type:id`, or creates it with `body.data`.
    func queryChannel(type: String, id: String, body: QueryRequest, context: TicksRequestContext) async throws
        -> Response
    {
        guard !Self.reservedChannelIDs.contains(id) else {
            throw APIError.input("channel id '\(id)' is reserved: POST /channels/{type}/query makes a distinct channel")
        }
        let viewer = try context.actingUser(
            named: body.user?.id, body.userID, body.data?.createdBy?.id, body.data?.createdByID)
        // Every id named, whether or not this call creates the channel.
        try (body.data?.members ?? []).forEach { try requireValidID($0.userID, "member id") }
        let limit = try messageLimit(body.messages?.limit)
        var created = false
        let channel: ChannelRecord
        if let existing = try await store.channel(type: type, id: id) {
            channel = existing
            try await ChannelPermissions.require(.read, in: channel, context: context, store: store)
        } else {
            let memberIDs = (body.data?.members ?? []).map(\.userID)
            guard memberIDs.count <= ServerLimits.maxMembersPerCall else {
                throw APIError.input("at most \(ServerLimits.maxMembersPerCall) members when creating a channel")
            }
            try memberIDs.forEach { try requireValidID($0, "member id") }
            try requireCustomData(body.data?.custom ?? [:], of: "channel \(type):\(id)", limits: limits)
            let principal = try context.requirePrincipal()
            let isMember = viewer.map(memberIDs.contains) ?? false
            try ChannelPermissions.require(
                [.create], in: "\(type):\(id)", as: principal,
                standing: ChannelPermissions.standing(of: principal, isMember: isMember))
            let result = try await store.createChannel(
                type: type, id: id, createdBy: viewer, memberIDs: memberIDs, custom: body.data?.custom ?? [:],
                now: .now())
            channel = result.channel
            created = result.created
            if !created { try await ChannelPermissions.require(.read, in: channel, context: context, store: store) }
        }
        if let before = body.messages?.idLt { try requireValidID(before, "messages.id_lt") }
        let snapshot = try await store.snapshot(of: channel, messageLimit: limit, beforeMessageID: body.messages?.idLt)
        if created {
            // Every member's devices learn of the channel, the creator's other devices too.
            for state in snapshot.members {
                let member = Presenter.member(state, of: snapshot.channel, users: snapshot.users)
                try events.membershipNotice(
                    .notificationAddedToChannel, member: member, snapshot: snapshot, at: snapshot.channel.createdAt)
            }
        }
        let state = Presenter.channelState(
            snapshot, viewer: viewer, watcherCount: hub.connectedCount(among: snapshot.members.map(\.userID)))
        return try context.respond(state, status: created ? .created : .ok)
    }

    struct QueryChannelsRequest: Decodable {
        var filterConditions: [String: FilterValue]?
        var limit: Int?
        var offset: Int?
        var messageLimit: Int?
        var userID: String?
        var user: UserRef?
        var sort: [SortKey]?

        struct SortKey: Decodable {
            var field: String
            var direction: Int?
        }

        enum CodingKeys: String, CodingKey {
            case filterConditions = "filter_conditions"
            case limit, offset, user, sort
            case messageLimit = "message_limit"
            case userID = "user_id"
        }
    }

    struct ChannelList: Encodable {
        var channels: [ChannelState]
    }

    @Sendable func queryChannels(_ request: Request, context: TicksRequestContext) async throws -> Response {
        var request = request
        let body = try await request.decodeJSON(QueryChannelsRequest.self)
        let viewer = try context.actingUser(named: body.userID, body.user?.id)
        var filter = try ChannelFilter(conditions: body.filterConditions ?? [:], limits: limits)
        if case .user(let own) = try context.requirePrincipal() { filter.requiredMember = own }
        let limit = body.limit ?? 10
        guard (1...Self.maxChannelsPerQuery).contains(limit) else {
            throw APIError.input("limit must be between 1 and \(Self.maxChannelsPerQuery)")
        }
        let offset = body.offset ?? 0
        guard offset >= 0 else { throw APIError.input("offset must not be negative") }
        let messageLimit = try messageLimit(body.messageLimit)
        var states: [ChannelState] = []
        // An empty `$in` matches nothing: no query to run.
        let sort = try Self.channelSort(body.sort ?? [])
        let channels =
            filter.matchesNothing
            ? [] : try await store.channels(matching: filter, sort: sort, limit: limit, offset: offset)
        for channel in channels {
            let snapshot = try await store.snapshot(of: channel, messageLimit: messageLimit, beforeMessageID: nil)
            states.append(
                Presenter.channelState(
                    snapshot, viewer: viewer, watcherCount: hub.connectedCount(among: snapshot.members.map(\.userID))))
        }
        return try context.respond(ChannelList(channels: states))
    }

    /// Stream's `sort`: `[{field, direction}]`, 1 ascending, -1 descending
    /// (the default); none at all is the newest message first.
    static func channelSort(_ keys: [QueryChannelsRequest.SortKey]) throws -> [ChannelSort] {
        guard keys.count <= ChannelSort.Field.allCases.count else {
            throw APIError.input("sort has \(keys.count) keys; at most \(ChannelSort.Field.allCases.count)")
        }
        let sort = try keys.map { key in
            guard let field = ChannelSort.Field(rawValue: key.field) else {
                let fields = ChannelSort.Field.allCases.map(\.rawValue).joined(separator: ", ")
                throw APIError.input("sorting channels on '\(key.field.prefix(64))' is not supported: use \(fields)")
            }
            switch key.direction ?? -1 {
            case -1: return ChannelSort(field, descending: true)
            case 1: return ChannelSort(field, descending: false)
            default: throw APIError.input("a sort direction is 1 or -1")
            }
        }
        return sort.isEmpty ? ChannelSort.newestFirst : sort
    }

    // MARK: Members

    struct UpdateRequest: Decodable {
        var addMembers: [MemberRef]?
        var removeMembers: [MemberRef]?
        var addModerators: [String]?
        var demoteModerators: [String]?
        var data: ChannelData?
        var userID: String?
        var user: UserRef?

        enum CodingKeys: String, CodingKey {
            case data
            case addMembers = "add_members"
            case removeMembers = "remove_members"
            case addModerators = "add_moderators"
            case demoteModerators = "demote_moderators"
            case userID = "user_id"
            case user
        }
    }

    struct UpdateResponse: Encodable {
        var channel: Channel
        var members: [Member]

        /// The channel and its members as `snapshot` has them.
        init(_ snapshot: ChannelSnapshot) {
            channel = Presenter.channel(snapshot.channel, config: snapshot.config, users: snapshot.users)
            members = snapshot.members.map { Presenter.member($0, of: snapshot.channel, users: snapshot.users) }
        }
    }

    /// `POST /channels/{type}/{id}`: replace the channel's custom data
    /// (`data`: what it does not name goes), add and remove members, promote
    /// and demote moderators — as far as `ChannelPermissions` lets the caller.
    @Sendable func updateChannel(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let channel = try await pathChannel(context)
        var request = request
        let body = try await request.decodeJSON(UpdateRequest.self)
        // Ignored (a channel keeps its creator), but an id all the same.
        for creator in [body.data?.createdByID, body.data?.createdBy?.id].compactMap({ $0 }) {
            try requireValidID(creator, "data.created_by")
        }
        let actingUserID = try context.actingUser(named: body.userID, body.user?.id)
        let adding = (body.addMembers ?? []).map(\.userID)
        let removing = (body.removeMembers ?? []).map(\.userID)
        let promoting = body.addModerators ?? []
        let demoting = body.demoteModerators ?? []
        guard adding.count + removing.count + promoting.count + demoting.count <= ServerLimits.maxMembersPerCall else {
            throw APIError.input("at most \(ServerLimits.maxMembersPerCall) members per call")
        }
        try (adding + removing + promoting + demoting).forEach { try requireValidID($0, "member id") }
        let change = ChannelPermissions.Change(
            adding: adding, removing: removing, changesModerators: !(promoting + demoting).isEmpty,
            changesData: body.data != nil)
        try await ChannelPermissions.require(
            change.actions(by: actingUserID), in: channel, context: context, store: store)
        if let data = body.data {
            guard data.members == nil else {
                throw APIError.input("data.members cannot change an existing channel's members: use add_members")
            }
            try requireCustomData(data.custom, of: "channel \(channel.cid)", limits: limits)
        }
        if !adding.isEmpty {
            // Checked before changing anything, so a call past the limit changes nothing
            // (the store checks again as it adds, for calls that race).
            var change = 0
            for userID in Set(adding).union(removing) {
                let isMember = try await store.member(userID, of: channel) != nil
                if isMember, removing.contains(userID) { change -= 1 }
                if !isMember, !removing.contains(userID) { change += 1 }
            }
            try StoreRules.requireRoom(for: change, in: channel, maxMembers: limits.maxChannelMembers)
        }
        let now = Timestamp.now()
        // Removals first, so swapping members fits a full channel.
        let removed = removing.isEmpty ? [] : try await store.removeMembers(removing, from: channel, now: now)
        let added =
            adding.isEmpty
            ? [] : try await store.addMembers(adding, to: channel, maxMembers: limits.maxChannelMembers, now: now)
        if !promoting.isEmpty { _ = try await store.setChannelRole(.moderator, of: promoting, in: channel, now: now) }
        if !demoting.isEmpty { _ = try await store.setChannelRole(.member, of: demoting, in: channel, now: now) }
        if let custom = body.data?.custom {
            _ = try await store.updateChannelData(channel, now: now) { _ in custom }
        }

        let snapshot = try await store.snapshot(of: channel, messageLimit: 0, beforeMessageID: nil)
        if body.data != nil { try announceUpdate(snapshot, by: actingUserID) }
        let users = try await store.users(ids: snapshot.members.map(\.userID) + removed)
        let memberIDs = snapshot.members.map(\.userID)
        for state in added {
            let member = Presenter.member(state, of: snapshot.channel, users: users)
            try events.membership(.memberAdded, member: member, channel: snapshot.channel, recipients: memberIDs, at: now)
            try events.membershipNotice(.notificationAddedToChannel, member: member, snapshot: snapshot, at: now)
        }
        for userID in removed {
            let member = Member(user: Presenter.user(userID, users), createdAt: now)
            try events.membership(.memberRemoved, member: member, channel: snapshot.channel, recipients: memberIDs, at: now)
            try events.membershipNotice(.notificationRemovedFromChannel, member: member, snapshot: snapshot, at: now)
        }
        return try context.respond(UpdateResponse(snapshot))
    }

    // MARK: Messages

    struct MessageInput: Decodable {
        var id: String?
        var text: String?
        var user: UserRef?
        var userID: String?
        var custom: [String: JSONValue]
        var parentID: String?
        var showInChannel: Bool?

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: AnyCodingKey.self)
            id = try container.decodeIfPresent(String.self, forKey: AnyCodingKey("id"))
            text = try container.decodeIfPresent(String.self, forKey: AnyCodingKey("text"))
            parentID = try container.decodeIfPresent(String.self, forKey: AnyCodingKey("parent_id"))
            showInChannel = try container.decodeIfPresent(Bool.self, forKey: AnyCodingKey("show_in_channel"))
            user = try container.decodeIfPresent(UserRef.self, forKey: AnyCodingKey("user"))
            userID = try container.decodeIfPresent(String.self, forKey: AnyCodingKey("user_id"))
            custom = try container.customFields(excluding: Message.reserved)
        }
    }

    struct SendRequest: Decodable {
        var message: MessageInput
        var userID: String?

        enum CodingKeys: String, CodingKey {
            case message
            case userID = "user_id"
        }
    }

    struct MessageResponse: Encodable {
        var message: Message
    }

    @Sendable func sendMessage(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let channel = try await loadChannel(context, to: .send)
        var request = request
        let body = try await request.decodeJSON(SendRequest.self)
        let author = try context.requireActingUser(named: body.message.user?.id, body.message.userID, body.userID)
        guard let config = try await store.channelType(named: channel.type) else {
            throw APIError.notFound("channel type '\(channel.type)' does not exist")
        }
        let text = body.message.text ?? ""
        guard !text.isEmpty else { throw APIError.input("message.text must not be empty") }
        try requireStorableText(text, "message.text")
        // Counted in Unicode scalars, so the length bounds the bytes too (a
        // character may hold any number of combining marks).
        let length = text.unicodeScalars.count
        guard length <= config.maxMessageLength else {
            throw APIError.input(
                "message.text is \(length) characters; channel type '\(config.name)' allows \(config.maxMessageLength)")
        }
        let id = body.message.id ?? UUID().uuidString.lowercased()
        try requireValidID(id, "message id")
        try requireCustomData(body.message.custom, of: "message '\(id)'", limits: limits)
        if let parentID = body.message.parentID {
            try requireValidID(parentID, "message.parent_id")
            guard config.replies else { throw APIError.input("channel type '\(config.name)' has replies off") }
        }
        let outcome = try await store.sendMessage(
            NewMessage(
                id: id, userID: author, text: text, custom: body.message.custom, parentID: body.message.parentID,
                showInChannel: body.message.parentID != nil && body.message.showInChannel == true,
                byServer: context.principal == .server),
            to: channel, now: .now())
        // A message id belongs to its author: their retry is idempotent (R11); anyone else's is refused.
        guard outcome.message.userID == author else {
            throw APIError.conflict("message id '\(id)' is already used by another user's message")
        }
        let users = try await store.users(ids: [outcome.message.userID])
        if outcome.created {
            try events.messageNew(outcome, channel: channel, users: users)
        }
        return try context.respond(
            MessageResponse(message: Presenter.message(outcome.message, users: users)),
            status: outcome.created ? .created : .ok)
    }

    // MARK: Read, unread, delivered

    struct MarkReadRequest: Decodable {
        var user: UserRef?
        var userID: String?
        var messageID: String?
        var threadID: String?

        enum CodingKeys: String, CodingKey {
            case user
            case userID = "user_id"
            case messageID = "message_id"
            case threadID = "thread_id"
        }
    }

    struct EventResponse: Encodable {
        var event: Event?
    }

    @Sendable func markRead(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let (type, id) = try channelPath(context)
        _ = try context.requirePrincipal()
        var request = request
        let body = try await request.decodeJSON(MarkReadRequest.self)
        let reader = try context.requireActingUser(named: body.user?.id, body.userID)
        let event = try await marking(context) {
            if let threadID = body.threadID {
                return try await receipts.markThreadRead(reader, in: ChannelID(type: type, id: id), parentID: threadID)
            }
            return try await receipts.markRead(reader, in: ChannelID(type: type, id: id), upTo: body.messageID)
        }
        return try context.respond(EventResponse(event: event))
    }

    /// Runs a mark for a reader whom the store finds not to be a member: the
    /// rule refuses it for a user token (403), and lets a server token make
    /// it with no effect (nil), as Stream does, which keeps read state for
    /// members only.
    func marking<Outcome: Sendable>(
        _ context: TicksRequestContext, _ mark: () async throws -> Outcome
    ) async throws -> Outcome? {
        do {
            return try await mark()
        } catch StoreError.notMember(_, let cid) {
            try requireMarkByNonMember(in: cid, context)
            return nil
        }
    }

    /// Throws 403 unless the caller may mark for a user who is not a member of channel `cid`.
    func requireMarkByNonMember(in cid: String?, _ context: TicksRequestContext) throws {
        let principal = try context.requirePrincipal()
        try ChannelPermissions.require(
            [.mark], in: cid ?? "this channel", as: principal,
            standing: ChannelPermissions.standing(of: principal, isMember: false))
    }

    @Sendable func markUnread(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let channel = try await loadChannel(context, to: .mark)
        var request = request
        let body = try await request.decodeJSON(MarkReadRequest.self)
        let reader = try context.requireActingUser(named: body.user?.id, body.userID)
        guard let messageID = body.messageID else { throw APIError.input("message_id is required") }
        try requireValidID(messageID, "message_id")
        let outcome = try await marking(context) {
            try await store.markUnread(reader, in: channel, from: messageID, now: .now())
        }
        if let outcome { try events.markedUnread(outcome) }
        return try context.respond(Empty())
    }

    @Sendable func markAllRead(_ request: Request, context: TicksRequestContext) async throws -> Response {
        var request = request
        let body = try await request.decodeJSON(ActingUserFields.self)
        let reader = try context.requireActingUser(named: body.user?.id, body.userID)
        for outcome in try await store.markAllRead(reader, audience: events.audience, now: .now()) {
            try events.cursorMoved(outcome)
        }
        return try context.respond(Empty())
    }

    struct MarkDeliveredRequest: Decodable {
        var latestDeliveredMessages: [Receipts.DeliveredEntry]
        var userID: String?
        var user: UserRef?

        enum CodingKeys: String, CodingKey {
            case latestDeliveredMessages = "latest_delivered_messages"
            case userID = "user_id"
            case user
        }
    }

    @Sendable func markDelivered(_ request: Request, context: TicksRequestContext) async throws -> Response {
        var request = request
        let body = try await request.decodeJSON(MarkDeliveredRequest.self)
        let queryUser = request.queryParameter("user_id")
        let named = body.userID ?? body.user?.id
        if let queryUser, let named, queryUser != named {
            throw APIError.input("user_id in the query ('\(queryUser)') and the body ('\(named)') differ")
        }
        let reader = try context.requireActingUser(named: body.userID, body.user?.id, queryUser)
        if let scope = context.deliveryOnly,
            let other = body.latestDeliveredMessages.first(where: { $0.cid != scope.description })
        {
            throw APIError.forbidden("this delivery-only token is for channel \(scope), not \(other.cid.prefix(130))")
        }
        // Entries for channels the reader is not a member of: refused for a user
        // token; for a server token, left out and the rest marked.
        var entries = body.latestDeliveredMessages
        while true {
            do {
                try await receipts.markDelivered(reader, entries)
                break
            } catch StoreError.notMember(let userID, let cid) {
                try requireMarkByNonMember(in: cid, context)
                let before = entries.count
                entries.removeAll { ChannelID(cid: $0.cid)?.description == cid }
                guard entries.count < before else { throw StoreError.notMember(userID: userID, cid: cid) }
                if entries.isEmpty { break }
            }
        }
        return try context.respond(Empty())
    }

    // MARK: Helpers

    func channelPath(_ context: TicksRequestContext) throws -> (type: String, id: String) {
        let type = try requireID(try context.pathParameter("type"), Identifier.channelTypeName, "channel type")
        let id = try requireID(try context.pathParameter("id"), Identifier.channelID, "channel id")
        return (type, id)
    }

    /// The channel of the path, for an action every member may take; a user token must belong to it.
    func loadChannel(_ context: TicksRequestContext, to action: ChannelPermissions.Action) async throws
        -> ChannelRecord
    {
        let (type, id) = try channelPath(context)
        return try await receipts.channel(type: type, id: id, for: try context.requirePrincipal(), to: action)
    }

    func messageLimit(_ limit: Int?) throws -> Int {
        let limit = limit ?? Self.defaultMessageLimit
        guard (0...Self.maxMessageLimit).contains(limit) else {
            throw APIError.input("messages.limit must be between 0 and \(Self.maxMessageLimit)")
        }
        return limit
    }
}

import Foundation
import Hummingbird
import TicksProtocol

/// docs/api.md, "Members": querying a channel's members and updating one.
extension ChannelsController {
    // MARK: Members

    struct MembersQuery: Decodable {
        var type: String
        var id: String?
        var members: [MemberRef]?
        var filterConditions: [String: MemberCondition]?
        var sort: [ChannelsController.QueryChannelsRequest.SortKey]?
        var limit: WholeNumber?
        var offset: WholeNumber?
        var userID: String?
        var user: UserRef?

        enum CodingKeys: String, CodingKey {
            case type, id, members, sort, limit, offset, user
            case filterConditions = "filter_conditions"
            case userID = "user_id"
        }
    }

    /// A members query's condition on one field: a value, `$eq` or `$in`
    /// (on `id` and `user_id`), or Stream's `{"$autocomplete": "j"}` (on `name`).
    struct MemberCondition: Decodable {
        var values: [String]?
        var autocomplete: String?

        init(from decoder: any Decoder) throws {
            if let container = try? decoder.container(keyedBy: AnyCodingKey.self), container.allKeys.count == 1,
                let key = container.allKeys.first, key.stringValue == "$autocomplete"
            {
                autocomplete = try container.decode(String.self, forKey: key)
                return
            }
            values = try FilterValue(from: decoder).values
        }
    }

    /// Whether `name` matches `$autocomplete: prefix`, as Stream matches it:
    /// one of its words begins with `prefix`, whatever the case.
    static func autocompletes(_ name: String?, _ prefix: String) -> Bool {
        guard let name else { return false }
        let words = name.split(whereSeparator: { $0.isWhitespace || $0.isPunctuation })
        return ([Substring(name)] + words).contains {
            $0.range(of: prefix, options: [.anchored, .caseInsensitive, .diacriticInsensitive]) != nil
        }
    }

    struct MemberList: Encodable {
        var members: [Member]
    }

    static let maxMembersPerQuery = 300

    /// `GET /members?payload={"type", "id", "filter_conditions", "limit", "offset"}`:
    /// a channel's members in join order, filtered on `id` / `user_id`.
    @Sendable func queryMembers(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let query: MembersQuery = try decodePayload(request)
        _ = try context.actingUser(named: query.userID, query.user?.id)
        try requireID(query.type, Identifier.channelTypeName, "type")
        try (query.members ?? []).forEach { try requireValidID($0.userID, "member id") }
        let id: String
        if let named = query.id {
            id = named
        } else if let members = query.members, Set(members.map(\.userID)).count >= 2 {
            id = Self.distinctChannelID(members: members.map(\.userID))
        } else {
            throw APIError.input("name the channel: id, or members for a distinct channel")
        }
        try requireID(id, Identifier.channelID, "channel id")
        var among: [String]?
        var namePrefix: String?
        for (field, condition) in query.filterConditions ?? [:] {
            switch (field, condition.values, condition.autocomplete) {
            case ("id", let values?, _), ("user_id", let values?, _):
                let named = try filterValues(values, of: field, rule: Identifier.id, limits: limits)
                among = among.map { Set($0).intersection(named).sorted() } ?? named
            case ("name", _, let prefix?):
                guard !prefix.isEmpty, prefix.count <= 255 else {
                    throw APIError.input("name's $autocomplete must be 1 to 255 characters")
                }
                namePrefix = prefix
            default:
                throw APIError.input(
                    "filtering members on '\(field.prefix(64))' that way is not supported: "
                        + "filter on id or user_id (a value, $eq, $in) or on name ($autocomplete)")
            }
        }
        // Members come in the order they joined: Stream's `created_at` ascending.
        let sort = query.sort ?? []
        for key in sort { _ = try withinBounds(key.direction, "sort.direction", -1...1) }
        guard sort.allSatisfy({ $0.field == "created_at" && ($0.direction?.value ?? 1) == 1 }), sort.count <= 1 else {
            throw APIError.input(
                "members are answered in the order they joined: sort on created_at, direction 1, or give no sort")
        }
        let limit = try withinBounds(query.limit, "limit", 1...Self.maxMembersPerQuery) ?? 100
        let offset = try withinBounds(query.offset, "offset", 0...ServerLimits.maxOffset) ?? 0
        let principal = try context.requirePrincipal()
        let channel = try await receipts.channel(ChannelID(type: query.type, id: id), for: principal, to: .read)
        let states: [MemberState]
        if among?.isEmpty == true {
            states = []
        } else if let namePrefix {
            states = try await members(of: channel, among: among, named: namePrefix, limit: limit, offset: offset)
        } else {
            states = try await store.members(of: channel, among: among, limit: limit, offset: offset)
        }
        let users = try await store.users(ids: states.map(\.userID))
        return try context.respond(MemberList(members: states.map { Presenter.member($0, of: channel, users: users) }))
    }

    /// A page of the members (among `among`) whose user's name autocompletes
    /// `prefix`, in join order: the channel's members read a page at a time
    /// until the page asked for is full.
    func members(of channel: ChannelRecord, among: [String]?, named prefix: String, limit: Int, offset: Int)
        async throws -> [MemberState]
    {
        var matched: [MemberState] = []
        var read = 0
        while matched.count < offset + limit {
            let page = try await store.members(
                of: channel, among: among, limit: Self.maxMembersPerQuery, offset: read)
            let users = try await store.users(ids: page.map(\.userID))
            matched += page.filter { Self.autocompletes(users[$0.userID]?.name, prefix) }
            read += page.count
            if page.count < Self.maxMembersPerQuery { break }
        }
        return Array(matched.dropFirst(offset).prefix(limit))
    }

    struct MemberResponse: Encodable {
        var channelMember: Member

        enum CodingKeys: String, CodingKey { case channelMember = "channel_member" }
    }

    /// `PATCH /channels/{type}/{id}/member/{user_id}`: a member's custom data
    /// (any member for themselves; managers for anyone), and `channel_role`
    /// (managers only).
    @Sendable func updateMemberPartial(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let channel = try await pathChannel(context)
        // v1 names the member in the path, v2 in the query.
        let memberID =
            try context.apiVersion == .v1
            ? context.pathParameter("user_id")
            : request.queryParameter("user_id") ?? { throw APIError.input("user_id is required in the query") }()
        try requireValidID(memberID, "user_id")
        var request = request
        var update = try await request.decodeJSON(PartialUpdate.self)
        try update.validate("member", reserved: Member.reserved, allowed: ["channel_role"])
        guard !update.unset.contains("channel_role") else { throw APIError.input("channel_role cannot be unset") }
        var role: ChannelRole?
        if let asked = update.set.removeValue(forKey: "channel_role") {
            guard case .string(let name) = asked, let parsed = ChannelRole(rawValue: name) else {
                throw APIError.input("channel_role must be channel_member or channel_moderator")
            }
            role = parsed
        }
        let actingUserID = try context.actingUser(named: nil)
        let action: ChannelPermissions.Action =
            role == nil && actingUserID == memberID ? .updateOwnMembership : .manageMembers
        try await ChannelPermissions.require(action, in: channel, context: context, store: store)
        guard let current = try await store.member(memberID, of: channel) else {
            throw APIError.notFound("user '\(memberID)' is not a member of channel \(channel.cid)")
        }
        try requireCustomData(update.applied(to: current.custom), of: "member '\(memberID)'", limits: limits)
        let changes = update
        var state = try await store.updateMember(memberID, of: channel) { changes.applied(to: $0) }
        if let role, role != state.channelRole {
            _ = try await store.setChannelRole(role, of: [memberID], in: channel, now: .now())
            state.channelRole = role
        }
        let users = try await store.users(ids: [memberID])
        let member = Presenter.member(state, of: channel, users: users)
        let event = ChangeEvents.member(.memberUpdated, member, in: channel.cid, at: .now())
        try events.send(event, to: try await store.memberIDs(of: channel))
        return try context.respond(MemberResponse(channelMember: member))
    }
}

extension ChannelsController {
    /// The channel of the path (404 when missing), when `ChannelPermissions`
    /// lets the caller take `actions` in it (403 otherwise).
    func managedChannel(_ context: TicksRequestContext, for actions: [ChannelPermissions.Action]) async throws
        -> ChannelRecord
    {
        let channel = try await pathChannel(context)
        try await ChannelPermissions.require(actions, in: channel, context: context, store: store)
        return channel
    }

    /// The channel of the path (404 when missing), for a call that asks
    /// `ChannelPermissions` once it knows what it will do.
    func pathChannel(_ context: TicksRequestContext) async throws -> ChannelRecord {
        let cid = try channelPath(context)
        guard let channel = try await store.channel(cid) else {
            throw APIError.notFound("channel \(cid) does not exist")
        }
        return channel
    }
}

/// A JSON object in the `payload` query parameter (Stream's GET queries).
func decodePayload<Payload: Decodable>(_ request: Request) throws -> Payload {
    guard let payload = request.queryParameter("payload") else { throw APIError.input("payload is required") }
    do {
        return try JSONDecoder().decode(Payload.self, from: Data(payload.utf8))
    } catch let error as DecodingError {
        throw APIError.input("payload: \(error.readableDescription)")
    }
}

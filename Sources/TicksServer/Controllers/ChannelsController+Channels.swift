import Crypto
import Foundation
import Hummingbird
import TicksProtocol

/// docs/api.md, "Channels": getting or creating a channel (by id or by its
/// members), listing channels, updating (members too), truncating and
/// deleting them, and the tasks a deletion of several leaves. What each does
/// to read state and receipts is the store's (docs/receipt-rules.md).
extension ChannelsController {
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
            custom = try container.customFields(excluding: Channel.reserved, in: decoder.apiVersion)
        }
    }

    /// A channel query's `messages`: its limit and at most one of Stream's page keys.
    struct Pagination: Decodable {
        var limit: WholeNumber?
        var idLt: String?
        var idLte: String?
        var idGt: String?
        var idGte: String?
        var idAround: String?
        var createdAtAround: Timestamp?

        enum CodingKeys: String, CodingKey {
            case limit
            case idLt = "id_lt"
            case idLte = "id_lte"
            case idGt = "id_gt"
            case idGte = "id_gte"
            case idAround = "id_around"
            case createdAtAround = "created_at_around"
        }

        /// The page asked for, its ids checked; 400 when more than one key names it.
        func page() throws -> MessagePage {
            var pages: [(String, MessagePage)] = []
            for (name, id, page) in [
                ("id_lt", idLt, { MessagePage.before($0, inclusive: false) }),
                ("id_lte", idLte, { .before($0, inclusive: true) }),
                ("id_gt", idGt, { .after($0, inclusive: false) }),
                ("id_gte", idGte, { .after($0, inclusive: true) }),
                ("id_around", idAround, { .around($0) }),
            ] as [(String, String?, (String) -> MessagePage)] {
                guard let id else { continue }
                try requireValidID(id, "messages.\(name)")
                pages.append((name, page(id)))
            }
            if let createdAtAround { pages.append(("created_at_around", .aroundTime(createdAtAround))) }
            guard pages.count <= 1 else {
                throw APIError.input(
                    "messages names its page with one of id_lt, id_lte, id_gt, id_gte, id_around and created_at_around, not \(pages.map(\.0).joined(separator: " and "))")
            }
            return pages.first?.1 ?? .newest
        }
    }

    /// A page of the watchers (`watchers: {limit, offset}`).
    struct WatcherPage: Decodable {
        var limit: WholeNumber?
        var offset: WholeNumber?
    }

    struct QueryRequest: Decodable {
        var data: ChannelData?
        var messages: Pagination?
        var user: UserRef?
        var userID: String?
        /// Makes the connection named by `connection_id` a watcher.
        var watch: Bool?
        var watchers: WatcherPage?
        /// Where the query string has none (Stream's JavaScript SDK puts it there, newer SDKs in the body).
        var connectionID: String?

        enum CodingKeys: String, CodingKey {
            case data, messages, user, watch, watchers
            case userID = "user_id"
            case connectionID = "connection_id"
        }
    }

    @Sendable func queryChannel(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let cid = try channelPath(context)
        var request = request
        let body = try await request.decodeJSON(QueryRequest.self)
        return try await queryChannel(
            cid, body: body, connection: try connectionID(of: request, body: body.connectionID), context: context)
    }

    /// The `connection_id` of the query string (Stream's JavaScript SDK sends
    /// it there), else of the body, checked.
    func connectionID(of request: Request, body: String?) throws -> String? {
        guard let id = request.queryParameter("connection_id") ?? body else { return nil }
        try requireValidID(id, "connection_id")
        return id
    }

    /// Watchers shown in one answer, at most.
    static let maxWatchersPerPage = 100

    /// `watchers: {limit, offset}`, checked (before anything is made or watched).
    func watcherPage(_ page: WatcherPage?) throws -> (limit: Int, offset: Int)? {
        guard let page else { return nil }
        return (
            try withinBounds(page.limit, "watchers.limit", 0...Self.maxWatchersPerPage) ?? 25,
            try withinBounds(page.offset, "watchers.offset", 0...ServerLimits.maxOffset) ?? 0
        )
    }

    /// Makes `connection` (the viewer's) watch `cid` when the query asks to
    /// watch: before the channel's state is read, so that no event published
    /// after that read misses it (docs/events.md, "Watching"). Returns the
    /// watch started on this node, to take back if the request then fails.
    func startWatching(_ cid: ChannelID, viewer: String?, watch: Bool?, connection: String?) throws
        -> ConnectionHub.WatchStarted?
    {
        guard watch == true, let connection, let viewer else { return nil }
        do throws(ConnectionHub.WatchRefusal) {
            return try events.watch(
                WatchChange(connection: connection, user: viewer, cid: cid.description, watching: true))
        } catch {
            switch error {
            case .tooMany(let limit):
                throw APIError.input(
                    "the connections of user '\(viewer)' watch \(limit) channels already: stop watching some (POST /channels/{type}/{id}/stop-watching)")
            case .unknownConnection:
                return nil  // not thrown: a connection not here is told through the bus
            }
        }
    }

    /// `watcher_count`, and the page of `watchers` asked for, from this node's connections.
    func watchers(of cid: ChannelID, members: [String], page: (limit: Int, offset: Int)?) -> (count: Int, page: [String]?) {
        let watchers = hub.watchers(of: cid.description, among: members)
        guard let page else { return (watchers.count, nil) }
        return (watchers.count, Array(watchers.sorted().dropFirst(page.offset).prefix(page.limit)))
    }

    /// A channel id that cannot be used: `/channels/{type}/query` is the
    /// distinct-channel route, so a channel named `query` could never be
    /// updated or deleted.
    static let reservedChannelIDs: Set<String> = ["query"]

    /// Gets the channel `cid`, or creates it with `body.data`.
    func queryChannel(_ cid: ChannelID, body: QueryRequest, connection: String?, context: TicksRequestContext)
        async throws -> Response
    {
        guard !Self.reservedChannelIDs.contains(cid.id) else {
            throw APIError.input("channel id '\(cid.id)' is reserved: POST /channels/{type}/query makes a distinct channel")
        }
        let viewer = try context.actingUser(
            named: body.user?.id, body.userID, body.data?.createdBy?.id, body.data?.createdByID)
        // Every id named, whether or not this call creates the channel.
        try (body.data?.members ?? []).forEach { try requireValidID($0.userID, "member id") }
        let limit = try messageLimit(body.messages?.limit, "messages.limit")
        let page = try body.messages?.page() ?? .newest
        let watcherPage = try watcherPage(body.watchers)
        var created = false
        let channel: ChannelRecord
        // The watch starts before the state is read; a request that fails after it takes it back.
        let started: ConnectionHub.WatchStarted?
        if let existing = try await store.channel(cid) {
            channel = existing
            try await ChannelPermissions.require(.read, in: channel, context: context, store: store)
            started = try startWatching(cid, viewer: viewer, watch: body.watch, connection: connection)
        } else {
            let memberIDs = (body.data?.members ?? []).map(\.userID)
            guard memberIDs.count <= ServerLimits.maxMembersPerCall else {
                throw APIError.input("at most \(ServerLimits.maxMembersPerCall) members when creating a channel")
            }
            try memberIDs.forEach { try requireValidID($0, "member id") }
            try requireCustomData(body.data?.custom ?? [:], of: "channel \(cid)", limits: limits)
            if let anchor = page.messageID {
                throw APIError.input("messages names message '\(anchor)', and channel \(cid) has none yet: this call creates it")
            }
            let principal = try context.requirePrincipal()
            let isMember = viewer.map(memberIDs.contains) ?? false
            try ChannelPermissions.require(
                [.create], in: cid, as: principal,
                standing: ChannelPermissions.standing(of: principal, isMember: isMember))
            // Before anything is made: a watch refused (too many) makes no channel.
            started = try startWatching(cid, viewer: viewer, watch: body.watch, connection: connection)
            do {
                let result = try await store.createChannel(
                    cid, createdBy: viewer, memberIDs: memberIDs, custom: body.data?.custom ?? [:],
                    now: .now())
                channel = result.channel
                created = result.created
                if !created { try await ChannelPermissions.require(.read, in: channel, context: context, store: store) }
            } catch {
                started.map(hub.unwatch)
                throw error
            }
        }
        let snapshot: ChannelSnapshot
        do {
            snapshot = try await store.snapshot(of: channel, messageLimit: limit, page: page)
        } catch {
            started.map(hub.unwatch)
            throw error
        }
        if created {
            // Every member's devices learn of the channel, the creator's other devices too.
            for state in snapshot.members {
                let member = Presenter.member(state, of: snapshot.channel, users: snapshot.users)
                try events.membershipNotice(
                    .notificationAddedToChannel, member: member, snapshot: snapshot, at: snapshot.channel.createdAt)
            }
        }
        let watching = watchers(of: cid, members: snapshot.members.map(\.userID), page: watcherPage)
        var state = Presenter.channelState(
            snapshot, viewer: viewer, capabilities: ChannelPermissions.ownCapabilities(of: viewer, in: snapshot),
            watcherCount: watching.count,
            allReached: try await allReached(in: snapshot, by: viewer),
            seesReadsAsDeliveries: try await receipts.seesReadsAsDeliveries(viewer, known: snapshot.users))
        state.watchers = watching.page.map { $0.map { Presenter.user($0, snapshot.users) } }
        return try context.respond(state, status: created ? .created : .ok)
    }

    struct QueryChannelsRequest: Decodable {
        var filterConditions: [String: FilterValue]?
        var limit: WholeNumber?
        var offset: WholeNumber?
        var messageLimit: WholeNumber?
        var userID: String?
        var user: UserRef?
        var sort: [SortKey]?
        /// Makes the connection named by `connection_id` watch every channel listed.
        var watch: Bool?
        var connectionID: String?

        struct SortKey: Decodable {
            var field: String
            var direction: WholeNumber?
        }

        enum CodingKeys: String, CodingKey {
            case filterConditions = "filter_conditions"
            case limit, offset, user, sort, watch
            case messageLimit = "message_limit"
            case connectionID = "connection_id"
            case userID = "user_id"
        }
    }

    struct ChannelList: Encodable {
        var channels: [ChannelState]
    }

    @Sendable func queryChannels(_ request: Request, context: TicksRequestContext) async throws -> Response {
        var request = request
        let body = try await request.decodeJSON(QueryChannelsRequest.self)
        let connection = try connectionID(of: request, body: body.connectionID)
        let viewer = try context.actingUser(named: body.userID, body.user?.id)
        var filter = try ChannelFilter(conditions: body.filterConditions ?? [:], limits: limits)
        if case .user(let own) = try context.requirePrincipal() { filter.requiredMember = own }
        let limit = try withinBounds(body.limit, "limit", 1...Self.maxChannelsPerQuery) ?? 10
        let offset = try withinBounds(body.offset, "offset", 0...ServerLimits.maxOffset) ?? 0
        let messageLimit = try messageLimit(body.messageLimit, "message_limit")
        var states: [ChannelState] = []
        // An empty `$in` matches nothing: no query to run.
        let sort = try Self.channelSort(body.sort ?? [])
        let channels =
            filter.matchesNothing
            ? [] : try await store.channels(matching: filter, sort: sort, limit: limit, offset: offset)
        // R15 is the viewer's, the same in every channel: asked once.
        let seesReadsAsDeliveries = try await receipts.seesReadsAsDeliveries(viewer)
        // A list that fails part way takes back the watches it started, as a single channel's query does
        // (a connection's first watch would otherwise leave it hearing notifications only).
        var started: [ConnectionHub.WatchStarted] = []
        do {
            for channel in channels {
                if let watch = try startWatching(channel.cid, viewer: viewer, watch: body.watch, connection: connection) {
                    started.append(watch)
                }
                let snapshot = try await store.snapshot(of: channel, messageLimit: messageLimit, page: .newest)
                let watching = watchers(of: channel.cid, members: snapshot.members.map(\.userID), page: nil)
                states.append(
                    Presenter.channelState(
                        snapshot, viewer: viewer,
                        capabilities: ChannelPermissions.ownCapabilities(of: viewer, in: snapshot),
                        watcherCount: watching.count,
                        allReached: try await allReached(in: snapshot, by: viewer),
                        seesReadsAsDeliveries: seesReadsAsDeliveries))
            }
        } catch {
            hub.unwatch(started)
            throw error
        }
        return try context.respond(ChannelList(channels: states))
    }

    /// How far the viewer's own messages are read by all and delivered to all (R13): for a member only.
    func allReached(in snapshot: ChannelSnapshot, by viewer: String?) async throws -> AllReachedUpTo {
        guard let viewer, snapshot.members.contains(where: { $0.userID == viewer }) else { return AllReachedUpTo() }
        return try await store.allReached(in: snapshot.channel, by: viewer)
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
            switch try withinBounds(key.direction, "sort.direction", -1...1) ?? -1 {
            case 1: return ChannelSort(field, descending: false)
            case -1: return ChannelSort(field, descending: true)
            default: throw APIError.input("sort.direction is 1 (ascending) or -1 (descending), not 0")
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
            _ = try await store.updateChannelData(channel, by: actingUserID, now: now) { _ in custom }
        }

        let snapshot = try await store.snapshot(of: channel, messageLimit: 0, page: .newest)
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

    // MARK: Distinct channels

    /// The id of the distinct channel of these members (Stream's form,
    /// `!members-` and 43 characters): a hash of the sorted, unique ids, so
    /// the same members always name the same channel, in any order.
    static func distinctChannelID(members: [String]) -> String {
        let key = Set(members).sorted().joined(separator: ",")
        let digest = Data(SHA256.hash(data: Data(key.utf8)))
        let base64 = digest.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        return "!members-" + base64
    }

    /// `POST /channels/{type}/query`: the channel of exactly `data.members`,
    /// made on first use.
    @Sendable func queryDistinctChannel(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let type = try requireID(try context.pathParameter("type"), Identifier.channelTypeName, "channel type")
        var request = request
        let body = try await request.decodeJSON(QueryRequest.self)
        let members = (body.data?.members ?? []).map(\.userID).uniqued()
        guard members.count >= 2 else {
            throw APIError.input("a channel without an id needs data.members: at least 2 users, whose channel it is")
        }
        try members.forEach { try requireValidID($0, "member id") }
        return try await queryChannel(
            ChannelID(type: type, id: Self.distinctChannelID(members: members)), body: body,
            connection: try connectionID(of: request, body: body.connectionID), context: context)
    }

    // MARK: Updating

    /// `PATCH /channels/{type}/{id}`: sets and unsets custom fields.
    @Sendable func updateChannelPartial(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let channel = try await managedChannel(context, for: [.update])
        var request = request
        let body = try await request.decodeJSON(PartialUpdateRequest.self)
        let actingUserID = try context.actingUser(named: body.acting.user?.id, body.acting.userID)
        try body.update.validate("channel", reserved: Channel.reserved)
        let update = body.update
        try requireCustomData(update.applied(to: channel.custom), of: "channel \(channel.cid)", limits: limits)
        let updated = try await store.updateChannelData(channel, by: actingUserID, now: .now()) {
            update.applied(to: $0)
        }
        let snapshot = try await store.snapshot(of: updated, messageLimit: 0, page: .newest)
        try announceUpdate(snapshot, by: actingUserID)
        return try context.respond(UpdateResponse(snapshot))
    }

    /// `channel.updated` to the members of the channel as `snapshot` has it.
    func announceUpdate(_ snapshot: ChannelSnapshot, by actingUserID: String?) throws {
        let event = ChangeEvents.channel(
            .channelUpdated, snapshot.channel, config: snapshot.config, users: snapshot.users, by: actingUserID,
            at: snapshot.channel.updatedAt)
        try events.send(event, to: snapshot.members.map(\.userID))
    }

    // MARK: Truncating and deleting

    struct TruncateRequest: Decodable {
        var hardDelete: Bool?
        var skipPush: Bool?
        var truncatedAt: String?
        var message: JSONValue?
        var userID: String?
        var user: UserRef?

        enum CodingKeys: String, CodingKey {
            case hardDelete = "hard_delete"
            case skipPush = "skip_push"
            case truncatedAt = "truncated_at"
            case message
            case userID = "user_id"
            case user
        }
    }

    struct ChannelResponse: Encodable {
        var channel: Channel
    }

    /// `POST /channels/{type}/{id}/truncate`: every message so far is gone
    /// from the channel, and with them every unread count and receipt.
    @Sendable func truncateChannel(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let channel = try await managedChannel(context, for: [.truncate])
        var request = request
        let body = try await request.decodeJSON(TruncateRequest.self)
        let actingUserID = try context.actingUser(named: body.userID, body.user?.id)
        guard body.truncatedAt == nil else {
            throw APIError.input("truncated_at is not supported: a truncation removes every message sent so far")
        }
        if let message = body.message, message != .null {
            throw APIError.input("message is not supported with a truncation: send it afterwards")
        }
        let truncated = try await store.truncateChannel(
            channel, hard: body.hardDelete ?? false, by: actingUserID, now: .now())
        let snapshot = try await store.snapshot(of: truncated, messageLimit: 0, page: .newest)
        let event = ChangeEvents.channel(
            .channelTruncated, snapshot.channel, config: snapshot.config, users: snapshot.users, by: actingUserID,
            at: truncated.truncatedAt ?? .now())
        try events.send(event, to: snapshot.members.map(\.userID))
        return try context.respond(ChannelResponse(channel: event.channel!), status: .created)
    }

    /// `DELETE /channels/{type}/{id}[?hard_delete=true]`.
    @Sendable func deleteChannel(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let hard = try booleanParameter(request.queryParameter("hard_delete"), "hard_delete")
        let channel = try await managedChannel(context, for: hard ? [.delete, .hardDelete] : [.delete])
        let actingUserID = try context.actingUser(named: nil)
        let presented = try await deleter.delete(channel, hard: hard, by: actingUserID)
        return try context.respond(ChannelResponse(channel: presented))
    }

    struct DeleteChannelsRequest: Decodable {
        var cids: [String]
        var hardDelete: Bool?

        enum CodingKeys: String, CodingKey {
            case cids
            case hardDelete = "hard_delete"
        }
    }

    /// `POST /channels/delete` (server tokens): deletes up to 100 channels and
    /// answers with a task whose result says, per cid, how it went. The
    /// deletions are done before the answer; the task records them.
    @Sendable func deleteChannels(_ request: Request, context: TicksRequestContext) async throws -> Response {
        guard case .server = try context.requirePrincipal() else {
            throw APIError.forbidden("deleting channels in bulk needs a server token")
        }
        var request = request
        let body = try await request.decodeJSON(DeleteChannelsRequest.self)
        guard (1...ServerLimits.maxMembersPerCall).contains(body.cids.count) else {
            throw APIError.input("cids must name 1 to \(ServerLimits.maxMembersPerCall) channels")
        }
        let cids = try body.cids.uniqued().map { try requireCID($0, "cid") }
        var task = CompletedTask()
        for cid in cids {
            if let channel = try await store.channel(cid) {
                _ = try await deleter.delete(channel, hard: body.hardDelete ?? false, by: nil)
                task.succeeded("\(cid)")
            } else {
                task.failed("\(cid)", "channel \(cid) does not exist")
            }
        }
        return try await task.save(in: store, answering: context)
    }

    struct TaskResponse: Encodable {
        var taskID: String
        var status: String
        var createdAt: Timestamp
        var updatedAt: Timestamp
        var result: [String: JSONValue]

        enum CodingKeys: String, CodingKey {
            case taskID = "task_id"
            case status
            case createdAt = "created_at"
            case updatedAt = "updated_at"
            case result
        }
    }

    /// `GET /tasks/{id}` (server tokens).
    @Sendable func getTask(_ request: Request, context: TicksRequestContext) async throws -> Response {
        guard case .server = try context.requirePrincipal() else {
            throw APIError.forbidden("tasks need a server token")
        }
        let id = try context.pathParameter("id")
        try requireValidID(id, "task id")
        guard let task = try await store.task(id: id) else { throw APIError.notFound("task '\(id)' does not exist") }
        return try context.respond(
            TaskResponse(
                taskID: task.id, status: task.status, createdAt: task.createdAt, updatedAt: task.updatedAt,
                result: task.result))
    }
}

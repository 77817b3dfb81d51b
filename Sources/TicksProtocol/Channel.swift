/// The configuration of a channel type (Stream's `config`).
public struct ChannelConfig: Codable, Sendable, Equatable {
    public var name: String
    public var readEvents: Bool
    public var deliveryEvents: Bool
    public var typingEvents: Bool
    public var connectEvents: Bool
    public var reactions: Bool
    public var replies: Bool
    public var quotes: Bool
    public var search: Bool
    public var mutes: Bool
    public var urlEnrichment: Bool
    public var messageRetention: String
    public var maxMessageLength: Int
    /// Whether members may mark voice notes and videos played (R14; types stored before it have it on).
    public var playedEvents = true
    /// The slash commands the type offers (Stream's `commands`).
    public var commands: [Command] = Command.all
    /// Who may do what in channels of the type, as Stream's policies describe it.
    public var permissions: [Policy] = Policy.ticksRules
    public var createdAt: Timestamp
    public var updatedAt: Timestamp

    public init(
        name: String, readEvents: Bool, deliveryEvents: Bool, typingEvents: Bool = true,
        connectEvents: Bool = true, reactions: Bool = true, replies: Bool = true, quotes: Bool = true,
        search: Bool = true, mutes: Bool = true, urlEnrichment: Bool = true,
        messageRetention: String = "infinite", maxMessageLength: Int = ChannelConfig.defaultMaxMessageLength,
        createdAt: Timestamp, updatedAt: Timestamp
    ) {
        self.name = name
        self.readEvents = readEvents
        self.deliveryEvents = deliveryEvents
        self.typingEvents = typingEvents
        self.connectEvents = connectEvents
        self.reactions = reactions
        self.replies = replies
        self.quotes = quotes
        self.search = search
        self.mutes = mutes
        self.urlEnrichment = urlEnrichment
        self.messageRetention = messageRetention
        self.maxMessageLength = maxMessageLength
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    public static let defaultMaxMessageLength = 5000
    /// The upper bound a channel type may set for `max_message_length`.
    public static let maxMessageLengthLimit = 20000

    enum CodingKeys: String, CodingKey {
        case name
        case readEvents = "read_events"
        case deliveryEvents = "delivery_events"
        case typingEvents = "typing_events"
        case connectEvents = "connect_events"
        case reactions, replies, quotes, search, mutes
        case urlEnrichment = "url_enrichment"
        case messageRetention = "message_retention"
        case maxMessageLength = "max_message_length"
        case playedEvents = "played_events"
        case commands, permissions
        case createdAt = "created_at"
        case updatedAt = "updated_at"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        readEvents = try c.decode(Bool.self, forKey: .readEvents)
        deliveryEvents = try c.decode(Bool.self, forKey: .deliveryEvents)
        typingEvents = try c.decode(Bool.self, forKey: .typingEvents)
        connectEvents = try c.decode(Bool.self, forKey: .connectEvents)
        reactions = try c.decode(Bool.self, forKey: .reactions)
        replies = try c.decode(Bool.self, forKey: .replies)
        quotes = try c.decode(Bool.self, forKey: .quotes)
        search = try c.decode(Bool.self, forKey: .search)
        mutes = try c.decode(Bool.self, forKey: .mutes)
        urlEnrichment = try c.decode(Bool.self, forKey: .urlEnrichment)
        messageRetention = try c.decode(String.self, forKey: .messageRetention)
        maxMessageLength = try c.decode(Int.self, forKey: .maxMessageLength)
        playedEvents = try c.decodeIfPresent(Bool.self, forKey: .playedEvents) ?? true
        // Types stored before commands and permissions were kept have the defaults.
        commands = try c.decodeIfPresent([Command].self, forKey: .commands) ?? Command.all
        permissions = try c.decodeIfPresent([Policy].self, forKey: .permissions) ?? Policy.ticksRules
        createdAt = try c.decode(Timestamp.self, forKey: .createdAt)
        updatedAt = try c.decode(Timestamp.self, forKey: .updatedAt)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)
        try c.encode(readEvents, forKey: .readEvents)
        try c.encode(deliveryEvents, forKey: .deliveryEvents)
        try c.encode(typingEvents, forKey: .typingEvents)
        try c.encode(connectEvents, forKey: .connectEvents)
        try c.encode(reactions, forKey: .reactions)
        try c.encode(replies, forKey: .replies)
        try c.encode(quotes, forKey: .quotes)
        try c.encode(search, forKey: .search)
        try c.encode(mutes, forKey: .mutes)
        try c.encode(urlEnrichment, forKey: .urlEnrichment)
        try c.encode(messageRetention, forKey: .messageRetention)
        try c.encode(maxMessageLength, forKey: .maxMessageLength)
        try c.encode(playedEvents, forKey: .playedEvents)
        try c.encode(commands, forKey: .commands)
        try c.encode(permissions, forKey: .permissions)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(updatedAt, forKey: .updatedAt)
        guard encoder.apiVersion == .v2 else { return }
        // The rest of v2's 25 required settings: features Ticks does not have are off.
        var v2 = encoder.container(keyedBy: AnyCodingKey.self)
        try v2.encode("disabled", forKey: AnyCodingKey("automod"))
        try v2.encode("flag", forKey: AnyCodingKey("automod_behavior"))
        for off in Self.v2FeaturesOff { try v2.encode(false, forKey: AnyCodingKey(off)) }
        try v2.encode([String: [String]](), forKey: AnyCodingKey("grants"))
    }

    /// v2's channel-type settings for what Ticks does not do.
    static let v2FeaturesOff = [
        "uploads", "custom_events", "push_notifications", "reminders", "mark_messages_pending", "polls",
        "user_message_reminders", "shared_locations", "count_messages", "skip_last_msg_update_for_system_msgs",
    ]
}

/// A slash command a channel type offers (Stream's shape). Ticks keeps and
/// shows them; running them is the client's or the app's business.
public struct Command: Codable, Sendable, Equatable {
    public var name: String
    public var description: String
    public var args: String
    public var set: String

    public init(name: String, description: String, args: String, set: String) {
        self.name = name
        self.description = description
        self.args = args
        self.set = set
    }

    /// The commands a channel type may name (`"all"` names every one).
    public static let all: [Command] = [
        Command(name: "giphy", description: "Post a random gif to the channel", args: "[text]", set: "fun_set"),
        Command(name: "ban", description: "Ban a user", args: "[@username] [text]", set: "moderation_set"),
        Command(name: "unban", description: "Unban a user", args: "[@username]", set: "moderation_set"),
        Command(name: "mute", description: "Mute a user", args: "[@username]", set: "moderation_set"),
        Command(name: "unmute", description: "Unmute a user", args: "[@username]", set: "moderation_set"),
    ]
}

/// A permission policy (Stream's `PolicyRequest`): who (`roles`, or the
/// resource's `owner`) may or may not (`action`: Allow, Deny) act on
/// `resources`, the highest `priority` deciding.
public struct Policy: Codable, Sendable, Equatable {
    public var name: String
    public var action: String
    public var resources: [String]
    public var roles: [String]
    public var owner: Bool
    public var priority: Int

    public init(name: String, action: String, resources: [String], roles: [String], owner: Bool, priority: Int) {
        self.name = name
        self.action = action
        self.resources = resources
        self.roles = roles
        self.owner = owner
        self.priority = priority
    }

    /// The rules Ticks enforces, written as Stream's policies (the same for
    /// every channel type; see docs/concepts.md, "Who may do what"; the
    /// server applies them with `ChannelPermissions`).
    public static let ticksRules: [Policy] = [
        Policy(
            name: "Admin members can perform any action in their channels", action: "Allow", resources: ["*"],
            roles: ["admin"], owner: false, priority: 999),
        Policy(
            name: "Channel owners and moderators manage the channel", action: "Allow",
            resources: ["UpdateChannel", "UpdateChannelMembers", "TruncateChannel", "DeleteChannel", "DeleteMessage"],
            roles: ["channel_moderator"], owner: true, priority: 70),
        Policy(
            name: "Users can update and delete their own messages", action: "Allow",
            resources: ["UpdateMessage", "DeleteMessage"], roles: ["user"], owner: true, priority: 60),
        Policy(
            name: "Channel members read, send and mark read", action: "Allow",
            resources: ["ReadChannel", "CreateMessage", "CreateReply", "MarkRead"],
            roles: ["channel_member"], owner: false, priority: 50),
        Policy(
            name: "Deny all other actions", action: "Deny", resources: ["*"], roles: ["*"], owner: false, priority: 1),
    ]
}

/// The `channel` object inside a ChannelState.
public struct Channel: Codable, Sendable, Equatable {
    public var id: String
    public var type: String
    public var cid: ChannelID
    public var createdAt: Timestamp
    public var updatedAt: Timestamp
    public var createdBy: User?
    public var memberCount: Int
    public var lastMessageAt: Timestamp?
    public var config: ChannelConfig
    public var disabled: Bool = false
    public var frozen: Bool = false
    public var custom: [String: JSONValue]
    /// When the channel was last truncated (its messages before then are gone).
    public var truncatedAt: Timestamp?
    /// When the channel was deleted (in `channel.deleted` and the delete answer).
    public var deletedAt: Timestamp?
    /// What the viewer may do in the channel, named as Stream's client SDKs
    /// check it (Stream's `own_capabilities`); in answers for a viewer, not in events.
    public var ownCapabilities: [String]?

    public init(
        id: String, type: String, createdAt: Timestamp, updatedAt: Timestamp, createdBy: User?,
        memberCount: Int, lastMessageAt: Timestamp?, config: ChannelConfig, custom: [String: JSONValue]
    ) {
        self.id = id
        self.type = type
        self.cid = ChannelID(type: type, id: id)
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.createdBy = createdBy
        self.memberCount = memberCount
        self.lastMessageAt = lastMessageAt
        self.config = config
        self.custom = custom
    }

    /// Channel fields that are not custom data.
    public static let reserved: Set<String> = [
        "id", "type", "cid", "created_at", "updated_at", "created_by", "created_by_id", "member_count",
        "last_message_at", "config", "disabled", "frozen", "members", "team", "own_capabilities",
        "hidden", "truncated_at", "cooldown", "auto_translation_enabled", "auto_translation_language",
        "deleted_at", "truncated_by", "messages", "read",
    ]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        id = try c.decode(String.self, forKey: AnyCodingKey("id"))
        type = try c.decode(String.self, forKey: AnyCodingKey("type"))
        cid = try c.decode(ChannelID.self, forKey: AnyCodingKey("cid"))
        createdAt = try c.decode(Timestamp.self, forKey: AnyCodingKey("created_at"))
        updatedAt = try c.decode(Timestamp.self, forKey: AnyCodingKey("updated_at"))
        createdBy = try c.decodeIfPresent(User.self, forKey: AnyCodingKey("created_by"))
        memberCount = try c.decodeIfPresent(Int.self, forKey: AnyCodingKey("member_count")) ?? 0
        lastMessageAt = try c.decodeIfPresent(Timestamp.self, forKey: AnyCodingKey("last_message_at"))
        config = try c.decode(ChannelConfig.self, forKey: AnyCodingKey("config"))
        disabled = try c.decodeIfPresent(Bool.self, forKey: AnyCodingKey("disabled")) ?? false
        frozen = try c.decodeIfPresent(Bool.self, forKey: AnyCodingKey("frozen")) ?? false
        truncatedAt = try c.decodeIfPresent(Timestamp.self, forKey: AnyCodingKey("truncated_at"))
        deletedAt = try c.decodeIfPresent(Timestamp.self, forKey: AnyCodingKey("deleted_at"))
        ownCapabilities = try c.decodeIfPresent([String].self, forKey: AnyCodingKey("own_capabilities"))
        custom = try c.customFields(excluding: Self.reserved, in: decoder.apiVersion)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        try c.encode(id, forKey: AnyCodingKey("id"))
        try c.encode(type, forKey: AnyCodingKey("type"))
        try c.encode(cid, forKey: AnyCodingKey("cid"))
        try c.encode(createdAt, forKey: AnyCodingKey("created_at"))
        try c.encode(updatedAt, forKey: AnyCodingKey("updated_at"))
        try c.encodeIfPresent(createdBy, forKey: AnyCodingKey("created_by"))
        try c.encode(memberCount, forKey: AnyCodingKey("member_count"))
        try c.encodeIfPresent(lastMessageAt, forKey: AnyCodingKey("last_message_at"))
        try c.encode(config, forKey: AnyCodingKey("config"))
        try c.encode(disabled, forKey: AnyCodingKey("disabled"))
        try c.encode(frozen, forKey: AnyCodingKey("frozen"))
        try c.encodeIfPresent(truncatedAt, forKey: AnyCodingKey("truncated_at"))
        try c.encodeIfPresent(deletedAt, forKey: AnyCodingKey("deleted_at"))
        try c.encodeIfPresent(ownCapabilities, forKey: AnyCodingKey("own_capabilities"))
        try c.encodeCustom(custom, excluding: Self.reserved, in: encoder.apiVersion)
    }
}

/// A member's role in a channel (Stream's `channel_role`): moderators, like
/// the channel's creator, may add and remove members.
public enum ChannelRole: String, Codable, Sendable, CaseIterable {
    case member = "channel_member"
    case moderator = "channel_moderator"
}

/// A member of a channel.
public struct Member: Codable, Sendable, Equatable {
    public var userID: String
    public var user: User
    public var createdAt: Timestamp
    public var updatedAt: Timestamp
    public var role: String = "member"
    public var channelRole: String = "channel_member"
    public var banned: Bool = false
    public var shadowBanned: Bool = false
    /// Custom member data (partial member update), flattened into the object as Stream does.
    public var custom: [String: JSONValue] = [:]

    public init(user: User, createdAt: Timestamp) {
        self.userID = user.id
        self.user = user
        self.createdAt = createdAt
        self.updatedAt = createdAt
    }

    /// A member with their role: `role` is "owner" for the channel's creator,
    /// "moderator" for a channel moderator, else "member".
    public init(user: User, createdAt: Timestamp, channelRole: ChannelRole, isCreator: Bool) {
        self.init(user: user, createdAt: createdAt)
        self.channelRole = channelRole.rawValue
        self.role = isCreator ? "owner" : channelRole == .moderator ? "moderator" : "member"
    }

    enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case user
        case createdAt = "created_at"
        case updatedAt = "updated_at"
        case role
        case channelRole = "channel_role"
        case banned
        case shadowBanned = "shadow_banned"
    }

    /// Member fields that are not custom data.
    public static let reserved: Set<String> = [
        "user_id", "user", "created_at", "updated_at", "role", "channel_role", "banned", "shadow_banned",
        "notifications_muted", "status", "is_moderator", "invited", "invite_accepted_at", "invite_rejected_at",
        "ban_expires", "pinned_at", "archived_at", "deleted_at", "custom",
    ]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        userID = try c.decode(String.self, forKey: .userID)
        user = try c.decode(User.self, forKey: .user)
        createdAt = try c.decode(Timestamp.self, forKey: .createdAt)
        updatedAt = try c.decode(Timestamp.self, forKey: .updatedAt)
        role = try c.decodeIfPresent(String.self, forKey: .role) ?? "member"
        channelRole = try c.decodeIfPresent(String.self, forKey: .channelRole) ?? "channel_member"
        banned = try c.decodeIfPresent(Bool.self, forKey: .banned) ?? false
        shadowBanned = try c.decodeIfPresent(Bool.self, forKey: .shadowBanned) ?? false
        custom = try decoder.container(keyedBy: AnyCodingKey.self)
            .customFields(excluding: Self.reserved, in: decoder.apiVersion)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(userID, forKey: .userID)
        try c.encode(user, forKey: .user)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(updatedAt, forKey: .updatedAt)
        try c.encode(role, forKey: .role)
        try c.encode(channelRole, forKey: .channelRole)
        try c.encode(banned, forKey: .banned)
        try c.encode(shadowBanned, forKey: .shadowBanned)
        var extra = encoder.container(keyedBy: AnyCodingKey.self)
        try extra.encodeCustom(custom, excluding: Self.reserved, in: encoder.apiVersion)
        // Required by v2's ChannelMemberResponse; Ticks has no muting.
        if encoder.apiVersion == .v2 { try extra.encode(false, forKey: AnyCodingKey("notifications_muted")) }
    }
}

/// A member's read state as others may see it. Fields another member is not
/// allowed to see (R8, R10) are left out.
public struct ReadState: Codable, Sendable, Equatable {
    public var user: User
    public var lastRead: Timestamp?
    public var lastReadMessageID: String?
    public var unreadMessages: Int?
    public var firstUnreadMessageID: String?
    public var lastDeliveredAt: Timestamp?
    public var lastDeliveredMessageID: String?

    public init(
        user: User, lastRead: Timestamp?, lastReadMessageID: String?, unreadMessages: Int?,
        firstUnreadMessageID: String?, lastDeliveredAt: Timestamp?, lastDeliveredMessageID: String?
    ) {
        self.user = user
        self.lastRead = lastRead
        self.lastReadMessageID = lastReadMessageID
        self.unreadMessages = unreadMessages
        self.firstUnreadMessageID = firstUnreadMessageID
        self.lastDeliveredAt = lastDeliveredAt
        self.lastDeliveredMessageID = lastDeliveredMessageID
    }

    enum CodingKeys: String, CodingKey {
        case user
        case lastRead = "last_read"
        case lastReadMessageID = "last_read_message_id"
        case unreadMessages = "unread_messages"
        case firstUnreadMessageID = "first_unread_message_id"
        case lastDeliveredAt = "last_delivered_at"
        case lastDeliveredMessageID = "last_delivered_message_id"
    }
}

/// The answer to a channel query: everything a client needs to show a channel.
public struct ChannelState: Codable, Sendable, Equatable {
    public var channel: Channel
    public var members: [Member]
    public var messages: [Message]
    public var pinnedMessages: [Message] = []
    public var read: [ReadState]
    public var watcherCount: Int
    /// The users watching the channel, a page of them: only when the query asked (`watchers: {limit}`).
    public var watchers: [User]?
    public var membership: Member?
    /// The newest of the viewer's own messages every other member has read (R13); absent when none.
    public var readByAllUpTo: String?
    /// The newest of the viewer's own messages every other member has received (R13); absent when none.
    public var deliveredToAllUpTo: String?

    public init(
        channel: Channel, members: [Member], messages: [Message], read: [ReadState], watcherCount: Int,
        membership: Member?
    ) {
        self.channel = channel
        self.members = members
        self.messages = messages
        self.read = read
        self.watcherCount = watcherCount
        self.membership = membership
    }

    enum CodingKeys: String, CodingKey {
        case channel, members, messages
        case pinnedMessages = "pinned_messages"
        case read
        case watcherCount = "watcher_count"
        case watchers
        case membership
        case readByAllUpTo = "read_by_all_up_to"
        case deliveredToAllUpTo = "delivered_to_all_up_to"
    }

    /// v2 also has `threads` (Ticks lists none here), and its read states
    /// require `last_read` and `unread_messages`: one whose read the viewer
    /// may not see (R8, R10) is left out of `read` rather than made up.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        let v2 = encoder.apiVersion == .v2
        try c.encode(channel, forKey: .channel)
        try c.encode(members, forKey: .members)
        try c.encode(messages, forKey: .messages)
        try c.encode(pinnedMessages, forKey: .pinnedMessages)
        try c.encode(v2 ? read.filter { $0.lastRead != nil && $0.unreadMessages != nil } : read, forKey: .read)
        try c.encode(watcherCount, forKey: .watcherCount)
        try c.encodeIfPresent(watchers, forKey: .watchers)
        try c.encodeIfPresent(membership, forKey: .membership)
        try c.encodeIfPresent(readByAllUpTo, forKey: .readByAllUpTo)
        try c.encodeIfPresent(deliveredToAllUpTo, forKey: .deliveredToAllUpTo)
        if v2 {
            var extra = encoder.container(keyedBy: AnyCodingKey.self)
            try extra.encode([JSONValue](), forKey: AnyCodingKey("threads"))
        }
    }
}

/// One member's receipt for one message (Ticks' `GET /messages/{id}/receipts`).
public struct Receipt: Codable, Sendable, Equatable {
    public var user: User
    public var deliveredAt: Timestamp?
    public var readAt: Timestamp?
    /// With `deliveredAt`: false when the receipt log no longer holds the move
    /// that delivered the message (it was pruned, `--receipt-log-retention`),
    /// so `deliveredAt` is an upper bound — the message had been delivered by
    /// then. Nil from servers that do not send it: exact.
    public var deliveredAtExact: Bool?
    /// The same for `readAt`: false when it is an upper bound ("read by").
    public var readAtExact: Bool?
    /// When the member first played the message (R14); nil when not, or not for this viewer.
    public var playedAt: Timestamp?

    public init(
        user: User, deliveredAt: Timestamp?, readAt: Timestamp?, deliveredAtExact: Bool? = nil,
        readAtExact: Bool? = nil, playedAt: Timestamp? = nil
    ) {
        self.playedAt = playedAt
        self.user = user
        self.deliveredAt = deliveredAt
        self.readAt = readAt
        self.deliveredAtExact = deliveredAtExact
        self.readAtExact = readAtExact
    }

    enum CodingKeys: String, CodingKey {
        case user
        case deliveredAt = "delivered_at"
        case readAt = "read_at"
        case deliveredAtExact = "delivered_at_exact"
        case readAtExact = "read_at_exact"
        case playedAt = "played_at"
    }
}

public struct ReceiptsResponse: Codable, Sendable, Equatable {
    /// The message's channel (absent from answers of servers before it was added).
    public var cid: ChannelID?
    public var receipts: [Receipt]
    public var readCount: Int
    public var deliveredCount: Int
    /// Whether every member but the author has read it, as the caller may know (R13; absent from older servers).
    public var readByAll: Bool?
    /// Whether every member but the author has received it (R13).
    public var deliveredToAll: Bool?
    /// How many members played it, as the caller may know (R14; absent from older servers).
    public var playedCount: Int?

    public init(
        cid: ChannelID?, receipts: [Receipt], readCount: Int, deliveredCount: Int, readByAll: Bool? = nil,
        deliveredToAll: Bool? = nil, playedCount: Int? = nil
    ) {
        self.playedCount = playedCount
        self.cid = cid
        self.receipts = receipts
        self.readCount = readCount
        self.deliveredCount = deliveredCount
        self.readByAll = readByAll
        self.deliveredToAll = deliveredToAll
    }

    enum CodingKeys: String, CodingKey {
        case cid, receipts
        case readCount = "read_count"
        case deliveredCount = "delivered_count"
        case readByAll = "read_by_all"
        case deliveredToAll = "delivered_to_all"
        case playedCount = "played_count"
    }
}

/// What a channel list may be sorted by (`POST /channels`' `sort`), on the server and in the SDK alike.
public enum ChannelSortField: String, Sendable, Hashable, CaseIterable {
    /// The newest message's time, or the creation time of a channel without messages.
    case lastMessageAt = "last_message_at"
    /// The later of `lastMessageAt` and `updatedAt`.
    case lastUpdated = "last_updated"
    case createdAt = "created_at"
    case updatedAt = "updated_at"
    case memberCount = "member_count"
    /// The channel's id, in byte order.
    case id
}

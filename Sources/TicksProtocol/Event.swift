/// The names of the events Ticks sends over the WebSocket.
public enum EventType: String, Codable, Sendable {
    case healthCheck = "health.check"
    case messageNew = "message.new"
    case messageDelivered = "message.delivered"
    case messageRead = "message.read"
    case notificationMarkRead = "notification.mark_read"
    case notificationMarkUnread = "notification.mark_unread"
    /// To a user's own connections: every thread of theirs was marked read
    /// (`POST /threads/read`). Ticks' own: Stream has no such event.
    case notificationMarkThreadsRead = "notification.mark_threads_read"
    case memberAdded = "member.added"
    case memberRemoved = "member.removed"
    case memberUpdated = "member.updated"
    case messageUpdated = "message.updated"
    case messageDeleted = "message.deleted"
    case channelUpdated = "channel.updated"
    case channelDeleted = "channel.deleted"
    case channelTruncated = "channel.truncated"
    /// To a user's own connections: they became a member of `channel`.
    case notificationAddedToChannel = "notification.added_to_channel"
    /// To a user's own connections: they are no longer a member of `channel`.
    case notificationRemovedFromChannel = "notification.removed_from_channel"
    /// To webhooks only (clients learn of a new channel from `notification.added_to_channel`).
    case channelCreated = "channel.created"
    /// To an author's own connections: every other member has now read their messages up to `message_id` (R13).
    case messageReadByAll = "message.read_by_all"
    /// To an author's own connections: every other member has now received their messages up to `message_id` (R13).
    case messageDeliveredToAll = "message.delivered_to_all"
    /// A member played a voice note or video (R14): `message_id`, `user`, `played_at`.
    case messagePlayed = "message.played"
    /// A member started typing (`POST /channels/{type}/{id}/event`); never stored.
    case typingStart = "typing.start"
    /// A member stopped typing.
    case typingStop = "typing.stop"
    /// To a member's connections that watch channels but not this one: a
    /// new message there, with the `channel` (docs/events.md, "Watching").
    case notificationMessageNew = "notification.message_new"

    /// Whether the event belongs to one channel's watchers (Stream's
    /// "clients watching the channel"); the others go to all of a user's connections.
    public var isChannelEvent: Bool {
        switch self {
        case .messageNew, .messageDelivered, .messageRead, .memberAdded, .memberRemoved, .memberUpdated,
            .messageUpdated, .messageDeleted, .channelUpdated, .channelTruncated, .messagePlayed, .typingStart,
            .typingStop:
            true
        case .healthCheck, .notificationMarkRead, .notificationMarkUnread, .notificationMarkThreadsRead,
            .channelDeleted, .notificationAddedToChannel, .notificationRemovedFromChannel, .channelCreated,
            .messageReadByAll, .messageDeliveredToAll, .notificationMessageNew:
            false
        }
    }
}

/// The logged-in user as the first `health.check` frame describes them.
public struct OwnUser: Codable, Sendable, Equatable {
    public var user: User
    public var totalUnreadCount: Int
    public var unreadChannels: Int
    public var unreadThreads: Int

    public init(user: User, totalUnreadCount: Int, unreadChannels: Int, unreadThreads: Int = 0) {
        self.user = user
        self.totalUnreadCount = totalUnreadCount
        self.unreadChannels = unreadChannels
        self.unreadThreads = unreadThreads
    }

    enum CodingKeys: String, CodingKey {
        case totalUnreadCount = "total_unread_count"
        case unreadCount = "unread_count"
        case unreadChannels = "unread_channels"
        case unreadThreads = "unread_threads"
        case devices, mutes
        case channelMutes = "channel_mutes"
    }

    public init(from decoder: any Decoder) throws {
        user = try User(from: decoder)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        totalUnreadCount = try c.decodeIfPresent(Int.self, forKey: .totalUnreadCount) ?? 0
        unreadChannels = try c.decodeIfPresent(Int.self, forKey: .unreadChannels) ?? 0
        unreadThreads = try c.decodeIfPresent(Int.self, forKey: .unreadThreads) ?? 0
    }

    /// Stream's `OwnUser`: the user, the counts, and the lists its client SDKs
    /// require (`devices`, `mutes`, `channel_mutes`), empty: Ticks keeps no
    /// devices or mutes. Stream's JavaScript client copies `mutes` and
    /// `channel_mutes` into its state and reads their `length` on every
    /// `message.new`: without them it threw on the first message from
    /// someone else (docs/compatibility.md).
    public func encode(to encoder: any Encoder) throws {
        try user.encode(to: encoder)
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(totalUnreadCount, forKey: .totalUnreadCount)
        try c.encode(totalUnreadCount, forKey: .unreadCount)
        try c.encode(unreadChannels, forKey: .unreadChannels)
        try c.encode(unreadThreads, forKey: .unreadThreads)
        for list in [CodingKeys.devices, .mutes, .channelMutes] {
            try c.encode([JSONValue](), forKey: list)
        }
    }
}

/// Every event Ticks sends: one flat shape, fields present where the event
/// type (docs/events.md, "Event types") has them.
public struct Event: Codable, Sendable, Equatable {
    public var type: EventType
    public var createdAt: Timestamp
    public var cid: ChannelID?
    public var channelType: String?
    public var channelID: String?
    public var user: User?
    public var connectionID: String?
    public var me: OwnUser?
    public var message: Message?
    public var member: Member?
    public var watcherCount: Int?
    public var unreadCount: Int?
    public var totalUnreadCount: Int?
    public var unreadChannels: Int?
    public var unreadMessages: Int?
    public var lastReadMessageID: String?
    public var lastReadAt: Timestamp?
    public var firstUnreadMessageID: String?
    public var lastDeliveredAt: Timestamp?
    public var lastDeliveredMessageID: String?
    /// The channel (`channel.updated`, `channel.deleted`, `channel.truncated`).
    public var channel: Channel?
    /// `message.deleted`: whether the message's content is gone for good.
    public var hardDelete: Bool?
    /// The message an event is about (`message.updated`, `message.deleted`).
    public var messageID: String?
    /// The thread a `message.read` marked read.
    public var thread: MessageThread?
    /// How many threads have unread replies (`notification.mark_threads_read`;
    /// Stream's name on its mark read events).
    public var unreadThreads: Int?
    /// The thread a `notification.mark_unread` marked unread (`thread_id` of mark unread).
    public var threadID: String?
    /// How many replies of that thread are unread now.
    public var unreadThreadMessages: Int?
    /// `message.played`: when the member first played the message (R14).
    public var playedAt: Timestamp?
    /// `typing.start` / `typing.stop`: the thread the member types in (its parent message).
    public var parentID: String?

    public init(type: EventType, createdAt: Timestamp, cid: ChannelID? = nil, user: User? = nil) {
        self.type = type
        self.createdAt = createdAt
        self.user = user
        self.cid = cid
        channelType = cid?.type
        channelID = cid?.id
    }

    enum CodingKeys: String, CodingKey {
        case type
        case createdAt = "created_at"
        case cid
        case channelType = "channel_type"
        case channelID = "channel_id"
        case user
        case connectionID = "connection_id"
        case me, message, member
        case watcherCount = "watcher_count"
        case unreadCount = "unread_count"
        case totalUnreadCount = "total_unread_count"
        case unreadChannels = "unread_channels"
        case unreadMessages = "unread_messages"
        case lastReadMessageID = "last_read_message_id"
        case lastReadAt = "last_read_at"
        case firstUnreadMessageID = "first_unread_message_id"
        case lastDeliveredAt = "last_delivered_at"
        case lastDeliveredMessageID = "last_delivered_message_id"
        case channel
        case hardDelete = "hard_delete"
        case messageID = "message_id"
        case thread
        case unreadThreads = "unread_threads"
        case threadID = "thread_id"
        case unreadThreadMessages = "unread_thread_messages"
        case playedAt = "played_at"
        case parentID = "parent_id"
    }
}

/// A thread as events describe it: its parent message and its channel.
public struct MessageThread: Codable, Sendable, Equatable {
    public var parentMessageID: String
    public var channelCID: String
    public var createdByUserID: String
    public var replyCount: Int
    public var createdAt: Timestamp

    public init(
        parentMessageID: String, channelCID: String, createdByUserID: String, replyCount: Int, createdAt: Timestamp
    ) {
        self.parentMessageID = parentMessageID
        self.channelCID = channelCID
        self.createdByUserID = createdByUserID
        self.replyCount = replyCount
        self.createdAt = createdAt
    }

    enum CodingKeys: String, CodingKey {
        case parentMessageID = "parent_message_id"
        case channelCID = "channel_cid"
        case createdByUserID = "created_by_user_id"
        case replyCount = "reply_count"
        case createdAt = "created_at"
    }
}

/// Stream's error body: the same six fields in both API versions, `details`
/// always an array (empty: Ticks names no fields by number).
public struct APIErrorBody: Codable, Sendable, Equatable {
    public var code: Int
    public var message: String
    public var statusCode: Int
    public var duration: String
    public var moreInfo: String
    public var details: [Int]

    public init(
        code: Int, message: String, statusCode: Int, duration: String, moreInfo: String = "", details: [Int] = []
    ) {
        self.code = code
        self.message = message
        self.statusCode = statusCode
        self.duration = duration
        self.moreInfo = moreInfo
        self.details = details
    }

    /// Reads a body without `details` too, as older Ticks servers send.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        code = try container.decode(Int.self, forKey: .code)
        message = try container.decode(String.self, forKey: .message)
        statusCode = try container.decode(Int.self, forKey: .statusCode)
        duration = try container.decode(String.self, forKey: .duration)
        moreInfo = try container.decodeIfPresent(String.self, forKey: .moreInfo) ?? ""
        details = try container.decodeIfPresent([Int].self, forKey: .details) ?? []
    }

    enum CodingKeys: String, CodingKey {
        case code, message
        case statusCode = "StatusCode"
        case duration
        case moreInfo = "more_info"
        case details
    }
}

import TicksProtocol
import TicksReceipts

// What callers hand the store: new rows, changes to apply and the rules that apply them, queries and their bounds.

/// A message to store.
public struct NewMessage: Sendable {
    public var id: String
    public var userID: String
    public var text: String
    public var custom: [String: JSONValue]
    /// A reply to this message of the channel (which must not be a reply itself).
    public var parentID: String? = nil
    /// A reply also shown in the channel.
    public var showInChannel = false
    /// Stream's attachments, as sent (bounded by the controller).
    public var attachments: [JSONValue] = []
    /// Sent with a server token, which acts with full permissions as Stream's
    /// do: the author need not be a member (they must exist), and then gets
    /// no read state — Stream keeps read state for members only.
    public var byServer = false

    public init(
        id: String, userID: String, text: String, custom: [String: JSONValue], parentID: String? = nil,
        showInChannel: Bool = false, attachments: [JSONValue] = [], byServer: Bool = false
    ) {
        self.attachments = attachments
        self.id = id
        self.userID = userID
        self.text = text
        self.custom = custom
        self.parentID = parentID
        self.showInChannel = showInChannel
        self.byServer = byServer
    }

    /// A reply shown only in its thread: it never counts in the channel.
    var threadOnly: Bool { parentID != nil && !showInChannel }
}

/// A mark delivered request entry.
public struct DeliveredTarget: Sendable, Equatable {
    public var channel: ChannelID
    public var messageID: String
}

/// The query of `POST /channels`.
public struct ChannelFilter: Sendable, Equatable {
    /// Only channels the acting user belongs to (user tokens).
    public var requiredMember: String?
    public var memberIn: [String]?
    public var cids: [ChannelID]?
    public var types: [String]?
    public var ids: [String]?
}

/// Where mark unread starts: a message of the channel still there
/// (`message_id`), or a time (`message_timestamp`, API v2): the first
/// message sent at or after it, in the channel's order.
public enum UnreadStart: Sendable, Equatable {
    case message(String)
    case time(Timestamp)
}

/// Which of a channel's messages a query answers (its `messages` object):
/// a page of at most the limit, oldest first, of the messages a channel
/// shows (not truncated away, not hard-deleted, not replies kept in their thread).
public enum MessagePage: Sendable, Equatable {
    /// The newest.
    case newest
    /// The newest before that message (`id_lt`), or up to it (`id_lte`).
    case before(String, inclusive: Bool)
    /// The oldest after that message (`id_gt`), or from it (`id_gte`).
    case after(String, inclusive: Bool)
    /// That message in the middle (`id_around`): up to half the page older, the rest from it on.
    case around(String)
    /// The same around the first message sent at or after that time (`created_at_around`).
    case aroundTime(Timestamp)

    /// The message the page is anchored on, if any.
    public var messageID: String? {
        switch self {
        case .newest, .aroundTime: nil
        case .before(let id, _), .after(let id, _), .around(let id): id
        }
    }
}

/// One key of `POST /channels`' `sort`; ties end with the newest channel first.
public struct ChannelSort: Sendable, Equatable {
    public typealias Field = ChannelSortField

    public var field: Field
    public var descending: Bool

    public init(_ field: Field, descending: Bool = true) {
        self.field = field
        self.descending = descending
    }

    /// Stream's and Ticks' default: the channel with the newest message first.
    public static let newestFirst = [ChannelSort(.lastMessageAt)]
}

/// How far back `POST /sync` reaches, and how many channels one call names
/// (the events one answer holds are `ServerLimits`').
public enum SyncLimits {
    /// A sync may ask about the last 30 days (as Stream's); records kept
    /// only for it (removed members) are forgotten after that.
    public static let horizon: Duration = .seconds(30 * 24 * 3600)
    /// Channels in one call.
    public static let channelsPerCall = 255
}

/// Changes to a channel type; nil fields stay as they are.
public struct ChannelTypePatch: Sendable, Decodable {
    public var readEvents: Bool?
    public var deliveryEvents: Bool?
    public var playedEvents: Bool?
    public var typingEvents: Bool?
    public var connectEvents: Bool?
    public var reactions: Bool?
    public var replies: Bool?
    public var quotes: Bool?
    public var search: Bool?
    public var mutes: Bool?
    public var urlEnrichment: Bool?
    public var maxMessageLength: WholeNumber?
    /// Command names (`"all"` for every one), as Stream's requests give them.
    public var commands: [String]?
    /// Refused when present: Ticks' permissions are fixed (`Policy.ticksRules`).
    public var permissions: JSONValue?

    enum CodingKeys: String, CodingKey {
        case commands, permissions
        case readEvents = "read_events"
        case deliveryEvents = "delivery_events"
        case playedEvents = "played_events"
        case typingEvents = "typing_events"
        case connectEvents = "connect_events"
        case reactions, replies, quotes, search, mutes
        case urlEnrichment = "url_enrichment"
        case maxMessageLength = "max_message_length"
    }

    func apply(to config: inout ChannelConfig) {
        if let readEvents { config.readEvents = readEvents }
        if let deliveryEvents { config.deliveryEvents = deliveryEvents }
        if let playedEvents { config.playedEvents = playedEvents }
        if let typingEvents { config.typingEvents = typingEvents }
        if let connectEvents { config.connectEvents = connectEvents }
        if let reactions { config.reactions = reactions }
        if let replies { config.replies = replies }
        if let quotes { config.quotes = quotes }
        if let search { config.search = search }
        if let mutes { config.mutes = mutes }
        if let urlEnrichment { config.urlEnrichment = urlEnrichment }
        if let maxMessageLength { config.maxMessageLength = maxMessageLength.value }
        if let commands {
            config.commands = commands.contains("all") ? Command.all : Command.all.filter { commands.contains($0.name) }
        }
    }
}

/// A message's new text and custom data (a full or partial update).
public struct MessageEdit: Sendable {
    public var text: String
    public var custom: [String: JSONValue]
}

/// A change to one user (`PATCH /users`), applied to the stored user inside the transaction.
public struct UserEdit: Sendable {
    public var id: String
    public var change: @Sendable (User) throws -> User
}

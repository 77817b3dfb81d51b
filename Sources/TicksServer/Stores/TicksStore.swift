import TicksProtocol
import TicksReceipts

/// A channel row: what identifies it and where its log ends.
public struct ChannelRecord: Sendable, Equatable {
    public var pk: Int64
    public var cid: ChannelID
    public var createdBy: String?
    public var custom: [String: JSONValue]
    public var lastSeq: Seq
    public var lastMessageAt: Timestamp?
    public var memberCount: Int
    public var createdAt: Timestamp
    public var updatedAt: Timestamp
    /// When the channel was last truncated; its messages up to `truncatedSeq` are gone.
    public var truncatedAt: Timestamp? = nil
    public var truncatedSeq: Seq = 0

    public var type: String { cid.type }
    public var id: String { cid.id }
}

/// A stored message.
public struct MessageRecord: Sendable, Equatable {
    public var id: String
    public var channelPK: Int64
    public var cid: ChannelID
    public var seq: Seq
    public var userID: String
    public var text: String
    public var custom: [String: JSONValue]
    public var createdAt: Timestamp
    /// When the text or custom data was last edited; nil when never.
    public var updatedAt: Timestamp? = nil
    /// When it was deleted; a soft-deleted message keeps its text, a hard-deleted one keeps nothing.
    public var deletedAt: Timestamp? = nil
    public var hardDeleted = false
    /// Whether it never counts as unread in the channel (deleted, or a reply shown only in its thread).
    public var hidden = false
    /// The thread's parent when it is a reply.
    public var parentID: String? = nil
    /// A reply also shown in the channel (counted there as any message).
    public var showInChannel = false
    /// Replies to it, when it is a thread's parent.
    public var replyCount = 0
    /// When its text last changed (an edit of custom data alone leaves it).
    public var textUpdatedAt: Timestamp? = nil
}

/// A member with their read state, the ids its cursors point at, and unread count.
public struct MemberState: Sendable, Equatable {
    public var userID: String
    public var joinedAt: Timestamp
    public var channelRole: ChannelRole
    public var cursors: Cursors
    public var readAt: Timestamp
    public var deliveredAt: Timestamp
    public var lastReadMessageID: String?
    public var lastDeliveredMessageID: String?
    public var unread: Int
    public var firstUnreadMessageID: String?
    /// The member's custom data (partial member update).
    public var custom: [String: JSONValue] = [:]
}

/// Totals over all of a user's channels (for `me` and notification events).
public struct UnreadTotals: Sendable, Equatable {
    public var messages: Int
    public var channels: Int
}

/// What a channel query returns before visibility rules are applied.
public struct ChannelSnapshot: Sendable {
    public var channel: ChannelRecord
    public var config: ChannelConfig
    public var members: [MemberState]
    /// Oldest first.
    public var messages: [MessageRecord]
    /// Every user named by the members, messages and `created_by`.
    public var users: [String: User]
}

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
    /// Sent with a server token, which acts with full permissions as Stream's
    /// do: the author need not be a member (they must exist), and then gets
    /// no read state — Stream keeps read state for members only.
    public var byServer = false

    public init(
        id: String, userID: String, text: String, custom: [String: JSONValue], parentID: String? = nil,
        showInChannel: Bool = false, byServer: Bool = false
    ) {
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

public struct SendOutcome: Sendable {
    public var message: MessageRecord
    /// False when the id was already stored in this channel (R11): nothing changed.
    public var created: Bool
    /// Every member's unread state after the message, for `message.new`.
    public var recipients: [RecipientUnread]
}

public struct RecipientUnread: Sendable, Equatable {
    public var userID: String
    public var channelUnread: Int
    public var totals: UnreadTotals
}

/// A cursor change of one member in one channel, committed.
public struct CursorOutcome: Sendable {
    public var channel: ChannelRecord
    public var config: ChannelConfig
    /// The member whose cursor moved.
    public var reader: User
    public var update: CursorUpdate
    public var state: MemberState
    public var totals: UnreadTotals
    public var at: Timestamp
    /// Who may be told of the move by the `MoveAudience`, read in the same
    /// transaction (before privacy and channel-type rules); empty when nothing moved.
    public var recipients: [String]
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

/// What changed in one channel after a time, as `userID` asks (`POST /sync`).
public struct ChannelChanges: Sendable {
    public enum Access: Sendable, Equatable {
        /// The user is a member: the fields below say what changed.
        case member
        /// The channel was deleted (soft), at that time.
        case deleted(at: Timestamp)
        /// No such channel (any more), or the user is not a member of it.
        case gone
    }

    public var access: Access
    public var channel: ChannelRecord?
    public var config: ChannelConfig?
    /// The messages stored after the time, oldest first, deleted ones included.
    public var newMessages: [MessageRecord] = []
    /// Messages from before it that were edited or deleted after it (edits first, each in time order).
    public var changedMessages: [MessageRecord] = []
    /// The read states of members who joined, read or received after it, and the user's own.
    public var members: [MemberState] = []
    /// Members who left after it.
    public var removals: [(userID: String, at: Timestamp)] = []
    public var users: [String: User] = [:]
    /// More than `limit` of one kind of change: too much to tell, the channel must be reloaded.
    public var tooMany = false

    public init(access: Access, channel: ChannelRecord? = nil, config: ChannelConfig? = nil) {
        self.access = access
        self.channel = channel
        self.config = config
    }
}

/// The per-member answer behind `GET /messages/{id}/receipts`.
public struct MessageReceipts: Sendable {
    public var message: MessageRecord
    public var channel: ChannelRecord
    public var config: ChannelConfig
    /// Every current member but the author who has received or read the message.
    public var entries: [Entry]
    public var users: [String: User]

    /// One member's receipt: when each cursor reached the message.
    public struct Entry: Sendable, Equatable {
        public var userID: String
        public var deliveredAt: Timestamp?
        public var readAt: Timestamp?
        /// False when the receipt log no longer holds the move that delivered
        /// the message: `deliveredAt` is then an upper bound (`ReceiptRules.reached`).
        public var deliveredExact = true
        /// The same for `readAt`.
        public var readExact = true
    }

    /// The entries from when each member's cursors reached the message (by
    /// user), the author left out.
    static func entries(read: [String: ReachedTime], delivered: [String: ReachedTime], author: String) -> [Entry] {
        Set(read.keys).union(delivered.keys).subtracting([author]).map { userID in
            Entry(
                userID: userID, deliveredAt: delivered[userID].map { Timestamp(microseconds: $0.at) },
                readAt: read[userID].map { Timestamp(microseconds: $0.at) },
                deliveredExact: delivered[userID]?.exact ?? true, readExact: read[userID]?.exact ?? true)
        }
    }
}

/// Changes to a channel type; nil fields stay as they are.
public struct ChannelTypePatch: Sendable, Decodable {
    public var readEvents: Bool?
    public var deliveryEvents: Bool?
    public var typingEvents: Bool?
    public var connectEvents: Bool?
    public var reactions: Bool?
    public var replies: Bool?
    public var quotes: Bool?
    public var search: Bool?
    public var mutes: Bool?
    public var urlEnrichment: Bool?
    public var maxMessageLength: Int?
    /// Command names (`"all"` for every one), as Stream's requests give them.
    public var commands: [String]?
    /// Refused when present: Ticks' permissions are fixed (`Policy.ticksRules`).
    public var permissions: JSONValue?

    enum CodingKeys: String, CodingKey {
        case commands, permissions
        case readEvents = "read_events"
        case deliveryEvents = "delivery_events"
        case typingEvents = "typing_events"
        case connectEvents = "connect_events"
        case reactions, replies, quotes, search, mutes
        case urlEnrichment = "url_enrichment"
        case maxMessageLength = "max_message_length"
    }

    func apply(to config: inout ChannelConfig) {
        if let readEvents { config.readEvents = readEvents }
        if let deliveryEvents { config.deliveryEvents = deliveryEvents }
        if let typingEvents { config.typingEvents = typingEvents }
        if let connectEvents { config.connectEvents = connectEvents }
        if let reactions { config.reactions = reactions }
        if let replies { config.replies = replies }
        if let quotes { config.quotes = quotes }
        if let search { config.search = search }
        if let mutes { config.mutes = mutes }
        if let urlEnrichment { config.urlEnrichment = urlEnrichment }
        if let maxMessageLength { config.maxMessageLength = maxMessageLength }
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

/// One channel's unread count for a user (`GET /unread`).
public struct ChannelUnread: Sendable, Equatable {
    public var channel: ChannelID
    public var unread: Int
    public var lastRead: Timestamp
    public var lastReadMessageID: String?
}

/// One thread's unread replies for a user.
public struct ThreadUnread: Sendable, Equatable {
    public var parentID: String
    public var unread: Int
    public var lastRead: Timestamp
    public var lastReadMessageID: String?
}

/// A user's unread counts: totals, the channels and threads with unread messages.
public struct UnreadCounts: Sendable, Equatable {
    public var totals: UnreadTotals
    public var channels: [ChannelUnread]
    public var threads: [ThreadUnread]
}

/// A thread marked read: its parent, when, and the reply the thread cursor is at.
public struct ThreadRead: Sendable {
    public var parent: MessageRecord
    public var readAt: Timestamp
    public var lastReadMessageID: String?
}

/// A background task's record (`GET /tasks/{id}`).
public struct StoredTask: Sendable, Equatable {
    public var id: String
    public var status: String
    public var result: [String: JSONValue]
    public var createdAt: Timestamp
    public var updatedAt: Timestamp
}

/// Where Ticks keeps its state. Every method that changes something commits
/// before it returns (R12); cursor moves follow `ReceiptRules` and cannot
/// regress under concurrent calls (R2).
public protocol TicksStore: Sendable {
    // Users
    func upsertUsers(_ users: [User], now: Timestamp) async throws -> [User]
    /// The users that exist among `ids`.
    func users(ids: [String]) async throws -> [String: User]

    // Channel types
    func channelTypes() async throws -> [ChannelConfig]
    func channelType(named name: String) async throws -> ChannelConfig?
    /// Throws a conflict when the name is taken.
    func createChannelType(_ config: ChannelConfig) async throws -> ChannelConfig
    func updateChannelType(named name: String, _ patch: ChannelTypePatch, now: Timestamp) async throws -> ChannelConfig

    // Channels and members
    func channel(_ cid: ChannelID) async throws -> ChannelRecord?
    /// The channel and whether `userID` is one of its members, in one look-up.
    func channel(_ cid: ChannelID, member userID: String) async throws
        -> (channel: ChannelRecord, isMember: Bool)?
    /// Creates the channel with its first members (R5) unless it exists; returns it and whether it was made.
    func createChannel(
        _ cid: ChannelID, createdBy: String?, memberIDs: [String], custom: [String: JSONValue], now: Timestamp
    ) async throws -> (channel: ChannelRecord, created: Bool)
    func snapshot(of channel: ChannelRecord, messageLimit: Int, beforeMessageID: String?) async throws -> ChannelSnapshot
    func channels(matching filter: ChannelFilter, sort: [ChannelSort], limit: Int, offset: Int) async throws
        -> [ChannelRecord]
    func isMember(_ userID: String, of channelPK: Int64) async throws -> Bool
    /// `userID`'s read state and role in `channel`; nil when they are not a member.
    func member(_ userID: String, of channel: ChannelRecord) async throws -> MemberState?
    /// Gives `role` to those of `userIDs` who are members; returns the states of those whose role changed.
    func setChannelRole(_ role: ChannelRole, of userIDs: [String], in channel: ChannelRecord, now: Timestamp)
        async throws -> [MemberState]
    /// Adds the users not yet members (R5); returns the new members' states.
    /// All or nothing: throws when the channel would have more than `maxMembers`.
    func addMembers(_ userIDs: [String], to channel: ChannelRecord, maxMembers: Int, now: Timestamp) async throws
        -> [MemberState]
    /// Removes members and drops their read state and receipt log (R6); returns those removed.
    func removeMembers(_ userIDs: [String], from channel: ChannelRecord, now: Timestamp) async throws -> [String]

    // Messages
    /// Stores a message (R4, R11); idempotent on the message id.
    func sendMessage(_ message: NewMessage, to channel: ChannelRecord, now: Timestamp) async throws -> SendOutcome
    /// The message if it is still there (not hard-deleted, truncated away or in a deleted channel).
    func message(id: String) async throws -> (message: MessageRecord, channel: ChannelRecord)?
    /// The messages among `ids` still there in `channel`, oldest first.
    func messages(ids: [String], in channel: ChannelRecord) async throws -> [MessageRecord]
    /// Replaces the text and custom data by what `edit` makes of the stored
    /// message (in the transaction); receipts do not change.
    func editMessage(id: String, now: Timestamp, _ edit: @escaping @Sendable (MessageRecord) throws -> MessageEdit)
        async throws -> MessageRecord
    /// Deletes a message (soft: marked deleted; hard: its content gone). It is
    /// never unread again: it leaves the unread counts of those who had not read it.
    func deleteMessage(id: String, hard: Bool, now: Timestamp) async throws -> MessageRecord

    // Channel lifecycle
    /// Hides every message so far; every member's cursors move to the last
    /// one (unread 0) and the receipt log is dropped. Hard: the content goes too.
    func truncateChannel(_ channel: ChannelRecord, hard: Bool, now: Timestamp) async throws -> ChannelRecord
    /// Deletes the channel with its members' read state and receipt log;
    /// returns who were members. Soft keeps its rows out of sight, hard removes them.
    func deleteChannel(_ channel: ChannelRecord, hard: Bool, now: Timestamp) async throws -> [String]
    /// Replaces the channel's custom data by what `edit` makes of it (in the transaction).
    func updateChannelData(
        _ channel: ChannelRecord, now: Timestamp,
        _ edit: @escaping @Sendable ([String: JSONValue]) throws -> [String: JSONValue]
    ) async throws -> ChannelRecord
    /// The ids of every member of the channel (who hears of a change to it).
    func memberIDs(of channel: ChannelRecord) async throws -> [String]
    /// A page of the channel's members among `userIDs` (every member when nil), in join order.
    func members(of channel: ChannelRecord, among userIDs: [String]?, limit: Int, offset: Int) async throws
        -> [MemberState]
    /// Replaces a member's custom data by what `edit` makes of it; `notMember` when they are not one.
    func updateMember(
        _ userID: String, of channel: ChannelRecord,
        _ edit: @escaping @Sendable ([String: JSONValue]) throws -> [String: JSONValue]
    ) async throws -> MemberState
    /// Applies each edit to its stored user (`unknownUser` when one is missing), all or nothing.
    func updateUsers(_ edits: [UserEdit], now: Timestamp) async throws -> [User]
    /// Deletes a user: memberships, read state, receipt log and thread read
    /// state go (R6); `messages` (or `hard`) deletes their messages, which
    /// leave every unread count; `hard` removes the user too. Returns the
    /// pks of the channels they were a member of.
    func deleteUser(_ userID: String, hard: Bool, messages: Bool, now: Timestamp) async throws -> [Int64]
    /// Unread counts of each user among `userIDs` that exists.
    func unreadCounts(of userIDs: [String]) async throws -> [String: UnreadCounts]
    /// Marks the thread of `parentID` read up to its newest reply for a member;
    /// the channel's cursors do not move.
    func markThreadRead(_ userID: String, in channel: ChannelRecord, parentID: String, now: Timestamp) async throws
        -> ThreadRead
    /// Up to `limit` replies to `parentID` before `beforeID` (when given), oldest first.
    func replies(to parentID: String, before beforeID: String?, limit: Int) async throws -> [MessageRecord]
    func saveTask(_ task: StoredTask) async throws
    func task(id: String) async throws -> StoredTask?

    // Cursors
    /// R1–R3: marks read up to `messageID`, or the newest message when nil.
    /// The store finds the channel and checks the membership itself
    /// (`channelNotFound`, `notMember`), in the same round trip as the move.
    func markRead(
        _ userID: String, in channel: ChannelID, upTo messageID: String?, audience: any MoveAudience, now: Timestamp
    ) async throws -> CursorOutcome
    func markUnread(_ userID: String, in channel: ChannelRecord, from messageID: String, now: Timestamp) async throws
        -> CursorOutcome
    /// Marks every channel of the user read; returns the channels whose cursors moved.
    func markAllRead(_ userID: String, audience: any MoveAudience, now: Timestamp) async throws -> [CursorOutcome]
    /// All-or-nothing: every target must name a message of a channel the user is a member of.
    func markDelivered(_ userID: String, _ targets: [DeliveredTarget], audience: any MoveAudience, now: Timestamp)
        async throws -> [CursorOutcome]
    func unreadTotals(of userID: String) async throws -> UnreadTotals
    func receipts(forMessage id: String) async throws -> MessageReceipts?
    /// The time of the oldest move the receipt log still holds (the first in
    /// log order); nil when it is empty. Retention (`ReceiptLogPruner`) keeps
    /// it within the window.
    func oldestReceiptMove() async throws -> Timestamp?
    /// What changed in the channel after `since`, in one snapshot; at most
    /// about `limit` of each kind of change (`tooMany` says when there were more).
    func changes(in cid: ChannelID, for userID: String, since: Timestamp, limit: Int) async throws -> ChannelChanges

    // Operations
    /// The database it keeps the state in.
    var kind: StoreKind { get }
    /// How many bytes the stored data takes (for `/metrics` and the storage benchmark).
    func storageBytes() async throws -> Int64
}

/// The databases a store can keep the state in.
public enum StoreKind: String, Sendable {
    /// One server's file (or memory, for tests).
    case sqlite
    /// Shared by every node of a cluster.
    case postgres
}

/// The raw receipt log of one member, oldest first (tests compare it with `ReceiptRules.reachedAt`).
protocol ReceiptLogReading {
    func loggedMoves(channelPK: Int64, userID: String, kind: CursorKind) async throws -> [LoggedMove]
}

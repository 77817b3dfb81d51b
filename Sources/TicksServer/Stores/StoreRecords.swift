import TicksProtocol
import TicksReceipts

// What the store answers: its rows as records, and the outcomes of its changes.

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
    /// Stream's attachments, as sent (`StoredJSON.messageFields`).
    public var attachments: [JSONValue] = []
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
    /// When the first message after the read cursor was sent; nil when there
    /// is none, or where the store did not read it (a channel's snapshot and
    /// a mark unread's outcome do: `NextMessageTimes`).
    public var nextAfterReadAt: Timestamp?
    /// The same after the delivered cursor.
    public var nextAfterDeliveredAt: Timestamp?

    /// Stream's `last_read`: the read state as a time, for clients that
    /// decide "read" by comparing it with each message's `created_at`
    /// (Stream's own do): the time of the last move, but always before the
    /// first message after the read cursor, so that exactly the messages up
    /// to the cursor compare as read (docs/compatibility.md, "Read state as a time").
    public var lastRead: Timestamp { Self.before(nextAfterReadAt, readAt) }

    /// `last_delivered_at`, in the same way: before the first message after the delivered cursor.
    public var lastDelivered: Timestamp { Self.before(nextAfterDeliveredAt, deliveredAt) }

    /// `time`, or, when that is not in an earlier millisecond than `next`,
    /// the microsecond before `next`'s millisecond: JavaScript's dates keep
    /// milliseconds, and Stream's JS client compares them with `>=`, so the
    /// microsecond before `next` itself read as `next` there.
    static func before(_ next: Timestamp?, _ time: Timestamp) -> Timestamp {
        guard let next else { return time }
        let millisecond = next.microseconds - ((next.microseconds % 1000) + 1000) % 1000
        guard millisecond <= time.microseconds else { return time }
        return Timestamp(microseconds: millisecond - 1)
    }
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

/// A member's play of a voice note or video (R14), as the store kept it.
public struct PlayOutcome: Sendable {
    public var message: MessageRecord
    public var channel: ChannelRecord
    public var config: ChannelConfig
    public var player: User
    /// When the member first played it: this call's time, or the kept one.
    public var playedAt: Timestamp
    /// False when an earlier play was kept (the call changes nothing, and tells nothing).
    public var created: Bool
    /// The privacy of the members and the author that R15 needs (a play is a read), read in the play's transaction.
    public var hearers = HearersPrivacy()
}

public struct SendOutcome: Sendable {
    public var message: MessageRecord
    /// False when the id was already stored in this channel (R11): nothing changed.
    public var created: Bool
    /// Every member's user id, in join order: whom `message.new` is for, read after the commit
    /// (`SQLStore.sendMessage`; none for a retry, which tells nothing). Their counts are read
    /// after the commit by each node for the members connected to it (`TicksStore.recipientCounts`),
    /// and in the transaction for a push receiver (`ChangeReads.recipientCounts`).
    public var recipients: [String]
    /// `message.new` is for every member, not listed (`recipients` empty): a send into a channel
    /// of more than `SQLStore.recipientsListedUpTo` members made in one call (PostgreSQL, counts by
    /// positions, so every node reads such entries). Each node finds its connected members as it
    /// reads their counts (`EventPublisher.membersHere`), and the bus carries no list.
    public var everyMember = false
    /// Others' messages that the author's cursors jumping to theirs (R4) made read by all (R13).
    public var reachedAll: [ReachedAll] = []
    /// The privacy of the authors told "read by all" that R15 needs, read in the send's transaction.
    public var hearers = HearersPrivacy()
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
    /// The messages the move made read by all or delivered to all (R13): the newest of each author.
    public var reachedAll: [ReachedAll] = []
    /// The privacy of those who may hear the move (`recipients`, the authors of `reachedAll`)
    /// that R15 needs, read in the move's transaction.
    public var hearers = HearersPrivacy()
}

/// What telling a change needs of its hearers' privacy, read in the change's own
/// transaction (`SQLStore.withHearers`), so that every road that tells the change
/// applies R15 as of its commit and no one looks users up after it: the app's
/// reciprocal read receipts, and of the hearers those who hide their reads (R10).
public struct HearersPrivacy: Sendable, Equatable {
    /// The app's reciprocal read receipts (R15) as the change's transaction saw them.
    public var reciprocal = false
    /// Of the change's hearers, those whose `privacy_settings.read_receipts` is off;
    /// read only when `reciprocal` (nothing else needs it), so empty when it is off.
    public var hidingReads: Set<String> = []

    public init(reciprocal: Bool = false, hidingReads: Set<String> = []) {
        self.reciprocal = reciprocal
        self.hidingReads = reciprocal ? hidingReads : []
    }
}

/// The newest message of `author` that became read by all (or delivered to
/// all, by `kind`) in one change (R13).
public struct ReachedAll: Sendable, Equatable {
    public var kind: CursorKind
    public var author: String
    public var messageID: String
    public var seq: Seq
}

/// The newest of a member's own messages that every other member has read
/// (delivered), as channel state tells them (R13); nil when none.
public struct AllReachedUpTo: Sendable, Equatable {
    public var read: String?
    public var delivered: String?
}

/// Who made the changes `POST /sync` tells (`v14-actors`), as the live
/// events name them: nil where the app acted, or the change is older than
/// the migration.
public struct ChangeActors: Sendable, Equatable {
    public var updatedBy: String?
    public var truncatedBy: String?
    public var deletedBy: String?
    /// Who last edited or deleted each changed message, by message id.
    public var messages: [String: String] = [:]

    /// Every user named, to be presented.
    var userIDs: [String] { [updatedBy, truncatedBy, deletedBy].compactMap { $0 } + messages.values }
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
    /// The user's own thread read states that moved after it, oldest first.
    public var threadReads: [ThreadRead] = []
    public var users: [String: User] = [:]
    /// More than `limit` of one kind of change: too much to tell, the channel must be reloaded.
    public var tooMany = false
    /// Who made the changes told (`v14-actors`).
    public var actors = ChangeActors()

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
    /// Whether every member but the author has read (received) it, as the others may know (R13).
    public var readByAll = false
    public var deliveredToAll = false

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
        /// When the member first played it (R14; `message_play`).
        public var playedAt: Timestamp? = nil
    }

    /// The entries from when each member's cursors reached the message (by
    /// user), the author left out.
    static func entries(
        read: [String: ReachedTime], delivered: [String: ReachedTime], played: [String: Timestamp] = [:], author: String
    ) -> [Entry] {
        Set(read.keys).union(delivered.keys).union(played.keys).subtracting([author]).map { userID in
            Entry(
                userID: userID, deliveredAt: delivered[userID].map { Timestamp(microseconds: $0.at) },
                readAt: read[userID].map { Timestamp(microseconds: $0.at) },
                deliveredExact: delivered[userID]?.exact ?? true, readExact: read[userID]?.exact ?? true,
                playedAt: played[userID])
        }
    }
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

/// Why a message after a member's read cursor counts as unread, or not
/// (R4, R7, "Threads"): `ReceiptRules.unreadRule`, with a hidden message told
/// apart as deleted or shown only in its thread.
public enum UnreadReason: String, Sendable, Equatable, CaseIterable {
    case counted
    case own
    case deleted
    case threadOnly = "thread_only"

    /// The reason of a message after the cursor (`rule` is never `.read` there).
    init(_ rule: UnreadRule, deleted: Bool) {
        switch rule {
        case .counted, .read: self = .counted
        case .own: self = .own
        case .hidden: self = deleted ? .deleted : .threadOnly
        }
    }
}

/// One message after a member's read cursor and its reason.
public struct ExplainedMessage: Sendable, Equatable {
    public var id: String
    public var seq: Seq
    public var createdAt: Timestamp
    public var reason: UnreadReason
}

/// A member's unread count in a channel as kept, and counted afresh from
/// the messages after their read cursor (`GET /unread/explain`).
public struct UnreadExplanation: Sendable, Equatable {
    /// `member.unread`: what `GET /unread` and channel states serve.
    public var kept: Int
    /// The messages after the cursor that R7 counts.
    public var counted: Int
    public var lastRead: Timestamp
    public var lastReadMessageID: String?
    /// How many messages are after the cursor, by reason (every reason present, 0 when none).
    public var byReason: [UnreadReason: Int]
    /// The newest of them (at most the limit asked for), oldest first.
    public var messages: [ExplainedMessage]
}

/// A kept count that a recount found wrong and set right (the users' totals
/// are sums of these, never kept: `StoreSQL.unreadSums`).
public struct UnreadFix: Sendable, Equatable {
    public enum Field: String, Sendable {
        /// `member.unread`.
        case unread
        /// `thread_read.unread`.
        case threadUnread = "thread_unread"
    }

    public var userID: String
    /// The channel of the member's or the thread's count.
    public var cid: ChannelID
    /// The thread's parent, for a thread's count.
    public var parentID: String?
    public var field: Field
    public var was: Int
    public var now: Int
}

/// What one recount of some users' kept counts found.
public struct UnreadRecount: Sendable, Equatable {
    /// The users that exist among those asked for (every user when none were named).
    public var usersChecked: Int
    /// The first `listedFixes` fixes made: a recount of every user holds no more in memory.
    public var fixes: [UnreadFix]
    /// How many counts were set right, listed or not.
    public var fixedCount: Int

    /// At most this many fixes are listed.
    public static let listedFixes = 1_000

    public init(usersChecked: Int, fixes: [UnreadFix]) {
        self.usersChecked = usersChecked
        self.fixes = Array(fixes.prefix(Self.listedFixes))
        fixedCount = fixes.count
    }

    /// This recount and `batch`, the next users'.
    mutating func add(_ batch: UnreadRecount) {
        usersChecked += batch.usersChecked
        fixes += batch.fixes.prefix(max(0, Self.listedFixes - fixes.count))
        fixedCount += batch.fixedCount
    }
}

/// A thread marked read: its parent, when, and the reply the thread cursor is at.
public struct ThreadRead: Sendable {
    public var parent: MessageRecord
    public var readAt: Timestamp
    public var lastReadMessageID: String?
    /// The members' privacy that R15 needs, read in the thread read's transaction.
    public var hearers = HearersPrivacy()
}

/// A thread marked unread (`markThreadUnread`): every reply in it is
/// unread again but the reader's own and deleted ones.
public struct ThreadMarkedUnread: Sendable, Equatable {
    public var parentID: String
    /// The thread's unread replies now.
    public var unread: Int
    /// How many of the reader's threads have unread replies now.
    public var unreadThreads: Int
}

/// Every thread of a user marked read (`markThreadsRead`): the parents of
/// the threads whose read state moved, and the user's channel totals, which
/// thread reads leave as they are.
public struct ThreadsRead: Sendable, Equatable {
    public var parentIDs: [String]
    public var totals: UnreadTotals
    /// How many threads have unread replies now (`total_unread_threads_count`).
    public var unreadThreads: Int
}

/// A background task's record (`GET /tasks/{id}`).
public struct StoredTask: Sendable, Equatable {
    public var id: String
    public var status: String
    public var result: [String: JSONValue]
    public var createdAt: Timestamp
    public var updatedAt: Timestamp
}

import TicksProtocol
import TicksReceipts

/// Where Ticks keeps its state. Every method that changes something commits
/// before it returns (R12); cursor moves follow `ReceiptRules` and cannot
/// regress under concurrent calls (R2).
public protocol TicksStore: Sendable {
    // Users
    func upsertUsers(_ users: [User], now: Timestamp) async throws -> [User]
    /// The users that exist among `ids`.
    func users(ids: [String]) async throws -> [String: User]

    // The app's settings (`PATCH /app`)
    func appOptions() async throws -> AppOptions
    func updateAppOptions(_ change: AppOptions.Change) async throws -> AppOptions

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
    /// The channel, its members with their read states, and the `page` of its messages (`messageLimit` at most).
    func snapshot(of channel: ChannelRecord, messageLimit: Int, page: MessagePage) async throws -> ChannelSnapshot
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
    /// `actor`: who edits, kept for `POST /sync` (nil: the app, naming no one); likewise below.
    func editMessage(
        id: String, by actor: String?, now: Timestamp, _ edit: @escaping @Sendable (MessageRecord) throws -> MessageEdit
    ) async throws -> MessageRecord
    /// Deletes a message (soft: marked deleted; hard: its content gone). It is
    /// never unread again: it leaves the unread counts of those who had not read it.
    func deleteMessage(id: String, hard: Bool, by actor: String?, now: Timestamp) async throws -> MessageRecord

    // Channel lifecycle
    /// Hides every message so far; every member's cursors move to the last
    /// one (unread 0) and the receipt log is dropped. Hard: the content goes too.
    func truncateChannel(_ channel: ChannelRecord, hard: Bool, by actor: String?, now: Timestamp) async throws
        -> ChannelRecord
    /// Deletes the channel with its members' read state and receipt log;
    /// returns who were members. Soft keeps its rows out of sight, hard removes them.
    func deleteChannel(_ channel: ChannelRecord, hard: Bool, by actor: String?, now: Timestamp) async throws -> [String]
    /// Deletes the channel as `deleteChannel` does if it is a conversation of
    /// `userID` (two members, one of them `userID`) when the store looks;
    /// nil, and nothing changed, if not.
    func deleteConversation(_ channel: ChannelRecord, of userID: String, hard: Bool, now: Timestamp)
        async throws -> [String]?
    /// Replaces the channel's custom data by what `edit` makes of it (in the transaction).
    func updateChannelData(
        _ channel: ChannelRecord, by actor: String?, now: Timestamp,
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
    /// `userID`'s unread count in `channel` as kept and as counted afresh from
    /// the messages after their read cursor, with the reason of each (the
    /// newest `limit` listed); nil when they are not a member.
    func explainUnread(of userID: String, in channel: ChannelRecord, listing limit: Int) async throws
        -> UnreadExplanation?
    /// Counts the kept unread counts of `userIDs` (every user when nil, a
    /// batch per transaction) afresh — members' and threads' (totals are their sums) — and sets
    /// right those that differ; returns what it set.
    func recountUnread(of userIDs: [String]?) async throws -> UnreadRecount
    /// Marks the thread of `parentID` read up to its newest reply for a member;
    /// the channel's cursors do not move.
    func markThreadRead(_ userID: String, in channel: ChannelRecord, parentID: String, now: Timestamp) async throws
        -> ThreadRead
    /// Marks every thread read state of the user read, in one statement: each
    /// moves to its thread's newest reply and its count becomes 0, in the
    /// channels they are a member of, for parents still there. nil when the
    /// user does not exist.
    /// Marks the thread of `parentID` unread for a member: every reply but
    /// their own and deleted ones (Stream marks the whole thread).
    func markThreadUnread(_ userID: String, in channel: ChannelRecord, parentID: String, now: Timestamp) async throws
        -> ThreadMarkedUnread
    func markThreadsRead(_ userID: String, now: Timestamp) async throws -> ThreadsRead?
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
    /// R7: moves the read cursor back to just before `start`, so it and
    /// every later message are unread again; never forward.
    func markUnread(_ userID: String, in channel: ChannelRecord, from start: UnreadStart, now: Timestamp) async throws
        -> CursorOutcome
    /// Marks every channel of the user read; returns the channels whose cursors moved.
    func markAllRead(_ userID: String, audience: any MoveAudience, now: Timestamp) async throws -> [CursorOutcome]
    /// All-or-nothing: every target must name a message of a channel the user is a member of.
    func markDelivered(_ userID: String, _ targets: [DeliveredTarget], audience: any MoveAudience, now: Timestamp)
        async throws -> [CursorOutcome]
    func unreadTotals(of userID: String) async throws -> UnreadTotals
    /// The counts `message.new` tells those of `userIDs` who are members of the channel `channelPK`
    /// (their count there and their totals), as they are now: read by each node, after the send
    /// committed, for the members connected to it (`EventPublisher.messageNew`). Every member's,
    /// in join order, when `userIDs` is nil (a node holding more users than the channel has members).
    func recipientCounts(in channelPK: Int64, among userIDs: [String]?) async throws -> [RecipientUnread]
    func receipts(forMessage id: String) async throws -> MessageReceipts?
    /// Keeps `userID`'s first play of `message` (R14): a later call finds it and changes nothing.
    /// The caller checked who may play it; throws `StoreError.schemaBefore` on a schema before `v13-played`.
    func markPlayed(_ message: MessageRecord, by userID: String, now: Timestamp) async throws -> PlayOutcome
    /// The newest of `author`'s messages in `channel` that every other member
    /// has read, and has received, as they may know it (R13).
    func allReached(in channel: ChannelRecord, by author: String) async throws -> AllReachedUpTo
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

extension TicksStore {
    /// Mark unread from a message (`message_id`).
    public func markUnread(_ userID: String, in channel: ChannelRecord, from messageID: String, now: Timestamp)
        async throws -> CursorOutcome
    {
        try await markUnread(userID, in: channel, from: .message(messageID), now: now)
    }
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

import TicksProtocol
import TicksReceipts

/// A change the store made, as its transaction left it: what a
/// `ChangeRecorder` is handed before the commit. The store knows nothing of
/// the events a change owes; the recorder builds them (the webhook outbox,
/// Webhooks/).
public enum StoreChange: Sendable {
    /// A message sent (`SendOutcome.created` false when a retry found it stored, R11).
    case messageSent(SendOutcome, in: ChannelRecord)
    case messageUpdated(MessageRecord)
    case messageDeleted(MessageRecord, hard: Bool)
    case channelCreated(ChannelRecord, at: Timestamp)
    case channelUpdated(ChannelRecord, at: Timestamp)
    case channelTruncated(ChannelRecord, at: Timestamp)
    case channelDeleted(ChannelRecord, at: Timestamp)
    case membersAdded([MemberState], to: ChannelRecord, at: Timestamp)
    /// The ids of the members who left.
    case membersRemoved([String], from: ChannelRecord, at: Timestamp)
    /// Read or delivered cursors moved forward (the committed moves only).
    case cursorsMoved([CursorOutcome])
    /// A member's read cursor moved back (mark unread).
    case markedUnread(CursorOutcome)
    /// A member first played a voice note or video (R14).
    case messagePlayed(PlayOutcome)
}

/// What a recorder needs read for a change, in the change's own transaction,
/// beyond the change itself (`ChangeRecorder.reads(for:)`).
struct ChangeReads: Sendable, Equatable {
    /// The users whose records it names.
    var users: [String] = []
    /// The channel type whose settings it names.
    var channelType: String?
    /// The channel whose members' counts it names (a push receiver's `message.new`).
    var recipientCounts: Int64?
}

/// What the store read for a change's `ChangeReads`, in the change's transaction.
struct ChangeContext: Sendable {
    /// The users asked for that exist.
    var users: [String: User] = [:]
    /// The channel type's settings, when asked for and it exists.
    var config: ChannelConfig?
    /// Every member's counts, in join order, when asked for (`ChangeReads.recipientCounts`).
    var recipients: [RecipientUnread] = []
}

/// What a change owes beyond the store's own rows, written in the change's
/// own transaction so nothing is lost between the commit and its telling
/// (the webhook outbox: docs/webhooks.md). The store hands every change to
/// it, reads what it asks for, and inserts the rows it returns; it writes
/// nothing itself and names no store program.
protocol ChangeRecorder: Sendable {
    /// What `change` needs read to know its rows; nil when it owes none (the store then reads nothing).
    func reads(for change: StoreChange) -> ChangeReads?
    /// The rows `change` owes: a function of the change and what the store read for it alone.
    func entries(for change: StoreChange, context: ChangeContext) throws -> [OutboxEntry]
    /// Rows were recorded and are committed: whoever reads them may look now.
    func committed()
}

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

/// What a change owes beyond the store's own rows, written in the change's
/// own transaction so nothing is lost between the commit and its telling
/// (the webhook outbox: docs/webhooks.md). The store hands every change to
/// it; it writes with the store's programs and tells its reader afterwards.
protocol ChangeRecorder: Sendable {
    /// The rows `change` owes, written by the program in the change's
    /// transaction; how many.
    func record(_ change: StoreChange, now: Timestamp) -> StoreProgram<Int>
    /// Rows were recorded and are committed: whoever reads them may look now.
    func committed()
}

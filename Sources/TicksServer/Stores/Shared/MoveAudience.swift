import TicksReceipts

/// Who may be told of a committed cursor move, as the store reads it in the
/// move's own transaction. The rule is Events' (`ReceiptAudience`): the store
/// applies it and knows nothing of events. PostgreSQL's one-statement move
/// computes the same in SQL from `fullChannelLimit` (`StoreSQL.moves`) and
/// checks the outcome against `source` and `recipients` on every row.
public protocol MoveAudience: Sendable {
    /// Channels of more members than this tell a move only to the authors it covered and the reader.
    var fullChannelLimit: Int { get }
    /// What to read for `update` in `channel`; nil when nothing moved.
    func source(of update: CursorUpdate, in channel: ChannelRecord) -> AudienceSource?
    /// The recipients from the ids `source` read.
    func recipients(_ ids: [String], from source: AudienceSource, reader: String) -> [String]
}

/// What a store reads, in the transaction that moved a cursor, to know who may hear of it.
public enum AudienceSource: Sendable, Equatable {
    /// Every member's id.
    case members
    /// The ids of the authors of the messages with `after < seq ≤ through`.
    case authors(after: Seq, through: Seq)
}

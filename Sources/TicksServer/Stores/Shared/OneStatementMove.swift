import TicksProtocol
import TicksReceipts

/// One mark read or delivered in a batch of PostgreSQL's `StoreSQL.moves`.
struct BatchedMove: Sendable {
    var kind: CursorKind
    var userID: String
    var channel: ChannelID
    /// Up to this message; nil: up to the newest.
    var messageID: String?
    var at: Timestamp
    var audience: any MoveAudience

    /// The member whose row the move locks: a batch holds each at most once.
    var member: String { "\(channel)/\(userID)" }
}

/// PostgreSQL's batched marks read and delivered (`StoreSQL.moves`), each
/// row decoded into the outcome the step-by-step program gives, and checked
/// against `ReceiptRules`: the cursors the SQL chose must be the rules'.
enum OneStatementMove {
    /// A move the statement left undone: its member's row changed while it waited (`StoreSQL.moves`).
    struct Stale: Error {}

    /// The batch as one statement: one outcome (or refusal, or `Stale`) per move, in order.
    static func program(_ moves: [BatchedMove]) -> StoreProgram<[Result<CursorOutcome?, any Error>]> {
        Step.rows(StoreSQL.moves(moves)).map { rows in
            guard rows.count == moves.count else {
                throw StoreError.inconsistent("\(rows.count) rows for a batch of \(moves.count) moves")
            }
            return zip(rows, moves).map { row, move in Result { try outcome(row, of: move) } }
        }
    }

    /// The outcome; nil for a delivered move the channel type ignores (R9) or one that moved nothing.
    static func outcome(_ row: any StoreRow, of move: BatchedMove) throws -> CursorOutcome? {
        let kind = move.kind
        let userID = move.userID
        guard try row.optionalInt(0) != nil else {
            throw kind == .read
                ? StoreError.channelNotFound(cid: move.channel)
                : StoreError.unknownChannel(move.channel)
        }
        if try row.bool(31) { throw Stale() }
        let found = try StoreRows.channel(row)
        let channel = found.channel
        let config = try StoreRules.requireConfig(found)
        // Membership first: a non-member learns nothing of the channel's messages.
        guard let readBefore = try row.optionalInt(14) else {
            throw StoreError.notMember(userID: userID, cid: channel.cid)
        }
        // Mark delivered accepts and ignores a message that is not there, as Stream does.
        if kind == .delivered, try row.optionalInt(13) == nil { return nil }
        let target = try StoreRules.requireSeq(try row.optionalInt(13), of: move.messageID ?? "", in: channel.cid)
        let before = Cursors(read: readBefore, delivered: try row.int(15))
        // Null when R9 ignored a delivered move.
        guard let readAfter = try row.optionalInt(16) else { return nil }
        let after = Cursors(read: readAfter, delivered: try row.int(17))
        let update =
            kind == .read
            ? ReceiptRules.markRead(before, upTo: target, newest: channel.lastSeq)
            : ReceiptRules.markDelivered(before, upTo: target, newest: channel.lastSeq)
        guard update.cursors == after else {
            throw StoreError.inconsistent(
                "the one-statement \(kind) moved \(before) to \(after); ReceiptRules say \(update.cursors)")
        }
        guard kind == .read || update.changed else { return nil }
        let state = MemberState(
            userID: userID, joinedAt: Timestamp(microseconds: try row.int(18)),
            channelRole: ChannelRole(rawValue: try row.text(19)) ?? .member, cursors: after,
            readAt: Timestamp(microseconds: try row.int(20)), deliveredAt: Timestamp(microseconds: try row.int(21)),
            lastReadMessageID: try row.optionalText(22), lastDeliveredMessageID: try row.optionalText(23),
            unread: Int(try row.int(24)), firstUnreadMessageID: try row.optionalText(25))
        var recipients: [String] = []
        if let source = move.audience.source(of: update, in: channel) {
            let column = source == .members ? 29 : 30
            let ids = try row.optionalText(column).map { $0.split(separator: ",").map(String.init) } ?? []
            recipients = move.audience.recipients(ids, from: source, reader: userID)
        }
        return CursorOutcome(
            channel: channel, config: config, reader: try row.optionalText(26).map(StoredJSON.user) ?? User(id: userID),
            update: update, state: state, totals: try StoreRows.totals(row, at: 27), at: move.at,
            recipients: recipients)
    }
}

import TicksProtocol
import TicksReceipts

/// Per-message receipts from the log of cursor moves.
extension SQLiteStore {
    public func receipts(forMessage id: String) async throws -> MessageReceipts? {
        try read { session in
            guard let row = try session.row(StoreSQL.message(id: id)) else { return nil }
            let found = try session.channel(pk: try row.int(0))
            guard let config = found.config else { return nil }
            let channel = found.channel
            let message = try StoreRows.message(row, cid: channel.cid)
            func reached(_ kind: CursorKind) throws -> [String: Int64] {
                var times: [String: Int64] = [:]
                for row in try session.rows(StoreSQL.reachedTimes(kind: kind, seq: message.seq, in: channel.pk)) {
                    if let at = try row.optionalInt(1) { times[try row.text(0)] = at }
                }
                return times
            }
            let entries = MessageReceipts.entries(
                read: try reached(.read), delivered: try reached(.delivered), author: message.userID)
            return MessageReceipts(
                message: message, channel: channel, config: config, entries: entries,
                users: try session.users(entries.map(\.userID)))
        }
    }
}

import TicksProtocol
import TicksReceipts

/// Per-message receipts from the log of cursor moves.
extension SQLStore {
    public func receipts(forMessage id: String) async throws -> MessageReceipts? {
        try await engine.read {
            Step.row(StoreSQL.messageThere(id: id)).then { row -> StoreProgram<MessageReceipts?> in
                guard let row else { return .done(nil) }
                let message = try StoreRows.messageWithChannel(row)
                return Fetch.channel(pk: message.channelPK).then { found in
                    guard let config = found.config else { return .done(nil) }
                    let pruned = self.schema.has(.receiptLogRetention)
                    return Self.reachedTimes(.read, of: message, pruned: pruned).then { read in
                        Self.reachedTimes(.delivered, of: message, pruned: pruned).then { delivered in
                            Self.playTimes(of: message, kept: self.schema.has(.played)).map { played in
                                MessageReceipts.entries(
                                    read: read, delivered: delivered, played: played, author: message.userID)
                            }
                        }
                    }.then { entries in
                        Fetch.users(entries.map(\.userID)).then { users in
                            Self.thresholds(
                                for: message.userID, in: message.channelPK, config: config,
                                kept: self.schema.has(.allMembers)
                            ).map { all in
                                var receipts = MessageReceipts(
                                    message: message, channel: found.channel, config: config, entries: entries,
                                    users: users)
                                receipts.readByAll = all[.read].map { $0 >= message.seq } ?? false
                                receipts.deliveredToAll = all[.delivered].map { $0 >= message.seq } ?? false
                                return receipts
                            }
                        }
                    }
                }
            }
        }
    }

    /// When each member's cursor of `kind` reached the message, by user: the
    /// time of the move, or an upper bound where the log was pruned past it
    /// (`ReceiptRules.reached`). `pruned`: whether the schema records where the log was pruned
    /// (`v10-receipt-log-retention`; a node held before it never prunes).
    static func reachedTimes(_ kind: CursorKind, of message: MessageRecord, pruned: Bool)
        -> StoreProgram<[String: ReachedTime]>
    {
        let query = StoreSQL.reachedTimes(kind: kind, seq: message.seq, in: message.channelPK, pruned: pruned)
        return Step.rows(query).map { rows in
            var times: [String: ReachedTime] = [:]
            for row in rows {
                times[try row.text(0)] = ReceiptRules.reached(
                    logged: try row.optionalInt(1), anchored: try row.optionalInt(2) != nil,
                    since: max(message.createdAt.microseconds, try row.int(3)), prunedBefore: try row.optionalInt(5),
                    cursorAt: try row.int(4))
            }
            return times
        }
    }
}

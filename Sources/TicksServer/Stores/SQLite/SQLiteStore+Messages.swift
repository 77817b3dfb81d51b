import TicksProtocol
import TicksReceipts

/// Sending and reading messages.
extension SQLiteStore {
    public func sendMessage(_ new: NewMessage, to channel: ChannelRecord, now: Timestamp) async throws
        -> SendOutcome
    {
        try await write { session in
            if let row = try session.row(StoreSQL.message(id: new.id)) {
                return try StoreRules.resend(of: try StoreRows.message(row, cid: channel.cid), to: channel)
            }
            guard try session.isMember(new.userID, of: channel.pk) else {
                throw StoreError.notMember(userID: new.userID, cid: channel.cid)
            }
            let current = try session.channel(pk: channel.pk).channel
            let createdAt = StoreRules.messageTime(now: now, after: current.lastMessageAt)
            let seq = current.lastSeq + 1
            try session.execute(StoreSQL.appendMessage(to: channel.pk, seq: seq, at: createdAt.microseconds))
            try session.execute(
                StoreSQL.insertMessage(
                    channelPK: channel.pk, seq: seq, message: new, custom: try JSONCoding.string(new.custom),
                    at: createdAt.microseconds))
            // R4: the author has read their own message, and everything before it.
            _ = try Self.applyRead(
                session, userID: new.userID, in: current, target: seq, newest: seq, now: createdAt)
            let totals = try session.rows(StoreSQL.unreadTotals(ofMembersOf: channel.pk))
            var totalsByUser: [String: UnreadTotals] = [:]
            for row in totals { totalsByUser[try row.text(0)] = try StoreRows.totals(row, at: 1) }
            let recipients = try session.memberStates(channel.pk).map { state in
                RecipientUnread(
                    userID: state.userID, channelUnread: state.unread,
                    totals: totalsByUser[state.userID] ?? UnreadTotals(messages: 0, channels: 0))
            }
            let message = MessageRecord(
                id: new.id, channelPK: channel.pk, cid: channel.cid, seq: seq, userID: new.userID, text: new.text,
                custom: new.custom, createdAt: createdAt)
            return SendOutcome(message: message, created: true, recipients: recipients)
        }
    }

    public func message(id: String) async throws -> MessageRecord? {
        try readOne { session in
            try session.row(StoreSQL.message(id: id)).map { row in
                try StoreRows.message(row, cid: "\(try row.text(7)):\(try row.text(8))")
            }
        }
    }
}

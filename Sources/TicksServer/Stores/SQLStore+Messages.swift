import TicksProtocol
import TicksReceipts

/// Sending and reading messages.
extension SQLStore {
    public func sendMessage(_ new: NewMessage, to channel: ChannelRecord, now: Timestamp) async throws
        -> SendOutcome
    {
        let custom = try JSONCoding.string(new.custom)
        do {
            return try await engine.write {
                // The channel's row lock (PostgreSQL) numbers its messages one at
                // a time, and a retried send with the same id waits here for the first (R11).
                Fetch.channel(pk: channel.pk, lock: true).then { found in
                    Step.row(StoreSQL.message(id: new.id)).then { stored in
                        if let stored {
                            return .done(try StoreRules.resend(of: try StoreRows.message(stored, cid: channel.cid), to: found.channel))
                        }
                        return Self.append(new, custom: custom, to: found.channel, now: now)
                    }
                }
            }
        } catch StoreEngineError.uniqueViolation {
            // The id was taken in another channel at the same moment (through another node).
            throw StoreError.messageIDInOtherChannel(new.id)
        }
    }

    /// Stores a new message after the channel's last, and reads every member's unread state after it.
    static func append(_ new: NewMessage, custom: String, to channel: ChannelRecord, now: Timestamp)
        -> StoreProgram<SendOutcome>
    {
        let createdAt = StoreRules.messageTime(now: now, after: channel.lastMessageAt)
        let seq = channel.lastSeq + 1
        return Fetch.isMember(new.userID, of: channel.pk).then { isMember in
            guard isMember else { throw StoreError.notMember(userID: new.userID, cid: channel.cid) }
            return Step.execute(StoreSQL.appendMessage(to: channel.pk, seq: seq, at: createdAt.microseconds))
        }.then { (_: Void) in
            Step.execute(
                StoreSQL.insertMessage(channelPK: channel.pk, seq: seq, message: new, custom: custom, at: createdAt.microseconds))
        }.then { (_: Void) in
            // R7: one more unread for every other member, in their channel and their totals.
            let counts = StoreSQL.countNewMessage(in: channel.pk, by: new.userID)
            return Step.each(counts) { Step.execute($0) }
        }.then { (_: [Void]) in
            // R4: the author has read their own message, and everything before it.
            Self.applyRead(new.userID, in: channel, target: seq, newest: seq, now: createdAt)
        }.then { (_: CursorUpdate) in
            Fetch.memberStates(channel.pk)
        }.then { members in
            Step.rows(StoreSQL.unreadTotals(ofMembersOf: channel.pk)).map { rows in
                StoreRules.sent(
                    new, to: channel, seq: seq, at: createdAt, members: members, totals: try StoreRows.totalsByUser(rows))
            }
        }
    }

    public func message(id: String) async throws -> MessageRecord? {
        try await engine.readOne {
            Step.row(StoreSQL.messageThere(id: id)).map { try $0.map { try StoreRows.messageWithChannel($0) } }
        }
    }
}

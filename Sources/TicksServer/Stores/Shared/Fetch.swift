import TicksProtocol
import TicksReceipts

/// The reads operations share, as programs: a `StoreSQL` statement and its
/// `StoreRows` decoder.
enum Fetch {
    /// At most this many ids in one `IN` list (SQLite binds each as a parameter).
    static let idsPerStatement = 500

    static func users(_ ids: some Collection<String>) -> StoreProgram<[String: User]> {
        let chunks = Array(Set(ids)).chunked(idsPerStatement).map(Array.init)
        return Step.each(chunks) { chunk in Step.rows(StoreSQL.users(chunk)) }.map { results in
            var found: [String: User] = [:]
            for row in results.joined() {
                let user = try StoredJSON.user(try row.text(0))
                found[user.id] = user
            }
            return found
        }
    }

    static func channel(_ cid: ChannelID) -> StoreProgram<(channel: ChannelRecord, config: ChannelConfig?)?> {
        Step.row(StoreSQL.channel(cid)).map { try $0.map { try StoreRows.channel($0) } }
    }

    /// The channel, locked until the transaction ends when `lock` (PostgreSQL).
    static func channel(pk: Int64, lock: Bool = false) -> StoreProgram<(channel: ChannelRecord, config: ChannelConfig?)> {
        Step.row(StoreSQL.channel(pk: pk, lock: lock)).map { row in
            guard let row else { throw StoreError.channelNotFound(cid: nil) }
            return try StoreRows.channel(row)
        }
    }

    static func channelPKs(ofMember userID: String) -> StoreProgram<[Int64]> {
        Step.rows(StoreSQL.channelPKs(ofMember: userID)).map { try $0.map { try $0.int(0) } }
    }

    static func isMember(_ userID: String, of channelPK: Int64) -> StoreProgram<Bool> {
        Step.row(StoreSQL.isMember(userID, of: channelPK)).map { try $0?.bool(0) ?? false }
    }

    static func seq(of messageID: String, in channelPK: Int64) -> StoreProgram<Seq?> {
        Step.row(StoreSQL.seq(of: messageID, in: channelPK)).map { try $0?.int(0) }
    }

    /// The sequence number of `messageID`, which must be one of `channel`'s.
    static func requiredSeq(of messageID: String, in channel: ChannelRecord) -> StoreProgram<Seq> {
        seq(of: messageID, in: channel.pk).map { try StoreRules.requireSeq($0, of: messageID, in: channel.cid) }
    }

    /// The seq mark unread starts from: `start`'s message (which must be
    /// there), or the one after the newest message sent before `start`'s
    /// time and not truncated away (the newest plus one when none is newer).
    static func unreadStart(_ start: UnreadStart, in channel: ChannelRecord) -> StoreProgram<Seq> {
        switch start {
        case .message(let messageID):
            requiredSeq(of: messageID, in: channel)
        case .time(let time):
            Step.row(StoreSQL.newestSeq(before: time.microseconds, in: channel.pk)).map { row in
                max(try row?.int(0) ?? 0, channel.truncatedSeq) + 1
            }
        }
    }

    /// The page of the channel's messages a query asks for, oldest first
    /// (`MessagePage`). Two statements at most: the messages before a seq,
    /// newest first, and those from it on, oldest first; each at most `limit`.
    static func messages(_ page: MessagePage, limit: Int, in channel: ChannelRecord) -> StoreProgram<[MessageRecord]> {
        func older(than seq: Seq, _ count: Int) -> StoreProgram<[MessageRecord]> {
            guard count > 0 else { return .done([]) }
            return Step.rows(StoreSQL.messages(in: channel, before: seq, limit: count)).map { rows in
                try rows.reversed().map { try StoreRows.message($0, cid: channel.cid) }
            }
        }
        func newer(from seq: Seq, _ count: Int) -> StoreProgram<[MessageRecord]> {
            guard count > 0 else { return .done([]) }
            return Step.rows(StoreSQL.messages(in: channel, from: seq, limit: count)).map { rows in
                try rows.map { try StoreRows.message($0, cid: channel.cid) }
            }
        }
        // Up to half the page before `seq`, the rest from it on; a side short of messages
        // leaves its room to the other.
        func around(_ seq: Seq) -> StoreProgram<[MessageRecord]> {
            older(than: seq, limit).then { before in
                newer(from: seq, limit).map { after in
                    let olderCount = min(before.count, max((limit - 1) / 2, limit - after.count))
                    return Array(before.suffix(olderCount)) + after.prefix(limit - olderCount)
                }
            }
        }
        switch page {
        case .newest:
            return older(than: channel.lastSeq + 1, limit)
        case .before(let id, let inclusive):
            return requiredSeq(of: id, in: channel).then { older(than: inclusive ? $0 + 1 : $0, limit) }
        case .after(let id, let inclusive):
            return requiredSeq(of: id, in: channel).then { newer(from: inclusive ? $0 : $0 + 1, limit) }
        case .around(let id):
            return requiredSeq(of: id, in: channel).then { around($0) }
        case .aroundTime(let time):
            // The first message at or after `time` (as mark unread by time finds it).
            return unreadStart(.time(time), in: channel).then { around($0) }
        }
    }

    static func memberStates(_ channelPK: Int64, userID: String? = nil) -> StoreProgram<[MemberState]> {
        Step.rows(StoreSQL.memberStates(channelPK, userID: userID)).map { try $0.map { try StoreRows.memberState($0) } }
    }

    /// `states` with the times of the first message after each one's cursors
    /// (`StoreSQL.nextMessageTimes`): for the answers that show a read state as a time.
    static func withNextMessageTimes(_ states: [MemberState], in channel: ChannelRecord, userID: String? = nil)
        -> StoreProgram<[MemberState]>
    {
        Step.rows(StoreSQL.nextMessageTimes(in: channel.pk, lastSeq: channel.lastSeq, userID: userID)).map { rows in
            var times: [String: (read: Timestamp?, delivered: Timestamp?)] = [:]
            for row in rows {
                times[try row.text(0)] = (
                    try row.optionalInt(1).map(Timestamp.init(microseconds:)),
                    try row.optionalInt(2).map(Timestamp.init(microseconds:))
                )
            }
            return states.map { state in
                var state = state
                state.nextAfterReadAt = times[state.userID]?.read
                state.nextAfterDeliveredAt = times[state.userID]?.delivered
                return state
            }
        }
    }

    static func unreadTotals(of userID: String) -> StoreProgram<UnreadTotals> {
        Step.row(StoreSQL.unreadTotals(of: userID)).map {
            try $0.map { try StoreRows.totals($0) } ?? UnreadTotals(messages: 0, channels: 0)
        }
    }

    /// Column 0 of every row.
    static func texts(_ query: StoreQuery) -> StoreProgram<[String]> {
        Step.rows(query).map { try $0.map { try $0.text(0) } }
    }

    /// What a mark read starts from (`StoreSQL.readStart`), checked in the
    /// order of the step-by-step reads: the channel, then membership (a
    /// non-member learns nothing of its messages), then the message. A nil
    /// `messageID` targets the newest.
    static func readStart(_ cid: ChannelID, member userID: String, message messageID: String?)
        -> StoreProgram<ReadStart>
    {
        Step.row(StoreSQL.readStart(cid, member: userID, message: messageID)).map { row in
            guard let row else { throw StoreError.channelNotFound(cid: cid) }
            let found = try StoreRows.channel(row)
            guard let read = try row.optionalInt(13) else {
                throw StoreError.notMember(userID: userID, cid: found.channel.cid)
            }
            let target =
                try messageID.map { try StoreRules.requireSeq(try row.optionalInt(15), of: $0, in: found.channel.cid) }
                ?? found.channel.lastSeq
            return ReadStart(found: found, cursors: Cursors(read: read, delivered: try row.int(14)), target: target)
        }
    }

    /// A member's read state, user and unread totals (`StoreSQL.readerState`), and the app's reciprocal
    /// read receipts (R15) where the schema keeps them (off where not); nil when not a member.
    static func readerState(_ userID: String, in channelPK: Int64, schema: SchemaLevel)
        -> StoreProgram<(row: ReaderRow, reciprocal: Bool)?>
    {
        let name = AppOptions.Change.CodingKeys.reciprocalReadReceipts.rawValue
        let setting = schema.has(.appSettings) ? name : nil
        return Step.row(StoreSQL.readerState(userID, in: channelPK, setting: setting)).map { row in
            guard let row else { return nil }
            let value = setting == nil ? nil : try row.optionalText(ReaderRow.width)
            let options = try AppOptions(settings: value.map { [name: $0] } ?? [:])
            return (try ReaderRow(row), options.reciprocalReadReceipts)
        }
    }

    /// The user's cursors in `channel`; not a member, not allowed.
    static func cursors(of userID: String, in channel: ChannelRecord) -> StoreProgram<Cursors> {
        Step.row(StoreSQL.cursors(of: userID, in: channel.pk)).map { row in
            guard let row else { throw StoreError.notMember(userID: userID, cid: channel.cid) }
            return Cursors(read: try row.int(0), delivered: try row.int(1))
        }
    }
}

/// `Fetch.readStart`: the channel, the member's cursors, and the seq to read up to.
struct ReadStart {
    var found: (channel: ChannelRecord, config: ChannelConfig?)
    var cursors: Cursors
    var target: Seq
}

import TicksProtocol
import TicksReceipts

/// Checking the kept unread counts against the messages and cursors they
/// count (`GET /unread/explain`, `POST /unread/recount`): the kept counts
/// are changed by every write (docs/storage.md, "Counts kept, not
/// recounted"); these read or set them from scratch.
extension SQLStore {
    /// Messages read per statement while explaining: memory stays bounded
    /// however many messages are after the cursor.
    static let explainPage = 500

    public func explainUnread(of userID: String, in channel: ChannelRecord, listing limit: Int) async throws
        -> UnreadExplanation?
    {
        try await engine.read {
            Fetch.memberStates(channel.pk, userID: userID).then { states -> StoreProgram<UnreadExplanation?> in
                guard let state = states.first else { return .done(nil) }
                let start = UnreadExplanation(
                    kept: state.unread, counted: 0, lastRead: state.readAt, lastReadMessageID: state.lastReadMessageID,
                    byReason: Dictionary(uniqueKeysWithValues: UnreadReason.allCases.map { ($0, 0) }), messages: [])
                return Self.explain(
                    userID, read: state.cursors.read, in: channel.pk, after: state.cursors.read,
                    limit: limit, start
                ).map { $0 }
            }
        }
    }

    /// The messages after `seq`, a page at a time, each given its reason by
    /// `ReceiptRules.unreadRule` — the rule, not a copy of it.
    static func explain(
        _ userID: String, read: Seq, in channelPK: Int64, after seq: Seq, limit: Int, _ sofar: UnreadExplanation
    ) -> StoreProgram<UnreadExplanation> {
        Step.rows(StoreSQL.messagesAfter(seq, in: channelPK, limit: explainPage)).then { rows in
            var explanation = sofar
            for row in rows {
                let entry = LogEntry(seq: try row.int(0), authorID: try row.text(2), counts: try row.int(4) == 0)
                let reason = UnreadReason(
                    ReceiptRules.unreadRule(entry, for: userID, read: read), deleted: try row.int(5) != 0)
                explanation.byReason[reason, default: 0] += 1
                if reason == .counted { explanation.counted += 1 }
                explanation.messages.append(
                    ExplainedMessage(
                        id: try row.text(1), seq: entry.seq, createdAt: Timestamp(microseconds: try row.int(3)),
                        reason: reason))
                if explanation.messages.count > 2 * limit {
                    explanation.messages.removeFirst(explanation.messages.count - limit)
                }
            }
            guard rows.count == explainPage, let last = rows.last else {
                explanation.messages = Array(explanation.messages.suffix(limit))
                return .done(explanation)
            }
            return explain(userID, read: read, in: channelPK, after: try last.int(0), limit: limit, explanation)
        }
    }

    /// Users per recount transaction when every user is recounted.
    static let recountBatch = 100

    public func recountUnread(of userIDs: [String]?) async throws -> UnreadRecount {
        guard userIDs == nil else {
            let ids = (userIDs ?? []).uniqued().sorted()
            return try await engine.write { Self.recount(Array(ids)) }
        }
        var total = UnreadRecount(usersChecked: 0, fixes: [])
        var after: String?
        while true {
            let from = after
            let ids = try await engine.readOne {
                Fetch.texts(StoreSQL.userIDs(after: from, limit: Self.recountBatch))
            }
            guard let last = ids.last else { return total }
            total.add(try await engine.write { Self.recount(ids) })
            after = last
        }
    }

    /// One transaction: the users' channels locked (a send or a delete waits),
    /// then their members' rows and their thread read states, each compared
    /// with its count made afresh and set right when it differs. Their totals
    /// are sums of their members' counts (`StoreSQL.unreadSums`), right
    /// once those are.
    static func recount(_ userIDs: [String]) -> StoreProgram<UnreadRecount> {
        Step.execute(StoreSQL.lockChannels(ofMembers: userIDs)).then { _ in
            Step.rows(StoreSQL.memberCounts(of: userIDs))
        }.then { rows -> StoreProgram<[UnreadFix]> in
            var fixes: [UnreadFix] = []
            var updates: [StoreQuery] = []
            for row in rows {
                let (userID, kept, now) = (try row.text(3), try row.int(4), try row.int(5))
                guard kept != now else { continue }
                fixes.append(
                    UnreadFix(
                        userID: userID, cid: ChannelID(type: try row.text(1), id: try row.text(2)), parentID: nil,
                        field: .unread, was: Int(kept), now: Int(now)))
                updates.append(StoreSQL.setUnread(of: userID, in: try row.int(0), to: now))
            }
            return Step.each(updates) { Step.execute($0) }.map { _ in fixes }
        }.then { fixes in
            Step.row(StoreSQL.userCount(among: userIDs)).map { (Int(try $0?.int(0) ?? 0), fixes) }
        }.then { (checked, fixes) in
            Step.rows(StoreSQL.threadCounts(of: userIDs)).then { rows in
                var fixes = fixes
                var updates: [StoreQuery] = []
                for row in rows {
                    let (parentID, userID, kept, now) = (
                        try row.text(0), try row.text(1), try row.int(4), try row.int(5)
                    )
                    guard kept != now else { continue }
                    fixes.append(
                        UnreadFix(
                            userID: userID, cid: ChannelID(type: try row.text(2), id: try row.text(3)),
                            parentID: parentID, field: .threadUnread, was: Int(kept), now: Int(now)))
                    updates.append(StoreSQL.setThreadUnread(of: userID, in: parentID, to: now))
                }
                return Step.each(updates) { Step.execute($0) }.map { _ in
                    UnreadRecount(usersChecked: checked, fixes: fixes)
                }
            }
        }
    }
}

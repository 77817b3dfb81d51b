import TicksProtocol
import TicksReceipts

/// Read and delivered cursors: `ReceiptRules` decides each move, these apply it.
extension SQLStore {
    public func markRead(
        _ userID: String, in channel: ChannelID, upTo messageID: String?, audience: any MoveAudience, now: Timestamp
    ) async throws -> CursorOutcome {
        if let moveBatcher {
            // One statement with the receipts that arrive meanwhile: lock, move, log and read back.
            let outcome = try await submit(
                BatchedMove(
                    kind: .read, userID: userID, channel: channel,
                    messageID: messageID, at: now, audience: audience), to: moveBatcher)
            guard let outcome else { throw StoreError.inconsistent("a read move without an outcome") }
            return outcome
        }
        // SQLite: the channel, the member's cursors and the target in one read.
        return try await write({
            Fetch.readStart(channel, member: userID, message: messageID).then { start in
                let current = start.found.channel
                let update = ReceiptRules.markRead(start.cursors, upTo: start.target, newest: current.lastSeq)
                return Self.apply(update, of: userID, in: current.pk, now: now).then { _ in
                    self.outcome(of: update, by: userID, in: start.found, now: now, audience: audience)
                }
            }.then { outcome in self.told([outcome]).map { $0[0] } }
        }, change: { outcome in .cursorsMoved([outcome]) })
    }

    public func markUnread(_ userID: String, in channel: ChannelRecord, from start: UnreadStart, now: Timestamp)
        async throws -> CursorOutcome
    {
        try await write({
            // The channel's row first, as a send and a delete take it: a cursor moved back counts
            // messages a delete may be taking out of the counts of those before them. Without it a
            // delete that had passed this member over (their cursor was after the message) left
            // the message counted here, and took it out of the totals once the cursor was back.
            Fetch.channel(pk: channel.pk, lock: true).then { found in
                Fetch.unreadStart(start, in: found.channel).then { seq in
                    Fetch.cursors(of: userID, in: found.channel).then { current in
                        let update = ReceiptRules.markUnread(current, from: seq)
                        return Self.apply(update, of: userID, in: channel.pk, now: now)
                            .map { update }
                    }
                }.then { update in
                    self.outcome(of: update, by: userID, in: found, now: now, audience: nil)
                }.then { outcome in
                    // notification.mark_unread's `last_read_at` is the read state as a time (`MemberState.lastRead`).
                    Fetch.withNextMessageTimes([outcome.state], in: found.channel, userID: userID).map { states in
                        var outcome = outcome
                        outcome.state = states[0]
                        return outcome
                    }
                }
            }
        }, change: { outcome in .markedUnread(outcome) })
    }

    public func markAllRead(_ userID: String, audience: any MoveAudience, now: Timestamp) async throws
        -> [CursorOutcome]
    {
        try await write({
            // Every member row of the user first, in key order, as a batch of moves takes them:
            // locked channel by channel (with the user's row, when totals were kept), a mark read
            // of another channel on another device deadlocked with it.
            Step.execute(StoreSQL.lockMembers(of: [userID])).then { _ in
                Step.rows(StoreSQL.channels(ofMember: userID))
            }.then { rows in
                Step.each(try rows.map { try StoreRows.channel($0) }) { found -> StoreProgram<CursorOutcome?> in
                    let newest = found.channel.lastSeq
                    return Self.applyRead(userID, in: found.channel, target: newest, newest: newest, now: now)
                        .then { update in
                            update.changed
                                ? self.outcome(of: update, by: userID, in: found, now: now, audience: audience).map { $0 }
                                : .done(nil)
                        }
                }
            }.map { $0.compactMap { $0 } }.then { self.told($0) }
        }, change: { outcomes in .cursorsMoved(outcomes) })
    }

    public func markDelivered(
        _ userID: String, _ targets: [DeliveredTarget], audience: any MoveAudience, now: Timestamp
    ) async throws -> [CursorOutcome] {
        if let moveBatcher, targets.count == 1, let entry = targets.first {
            // The common case (a device acknowledging one channel), batched as mark read is.
            let outcome = try await submit(
                BatchedMove(
                    kind: .delivered, userID: userID, channel: entry.channel,
                    messageID: entry.messageID, at: now, audience: audience), to: moveBatcher)
            return outcome.map { [$0] } ?? []
        }
        return try await write({
            // Resolve and check every entry first: all or nothing.
            Step.each(targets) { entry -> StoreProgram<Resolved> in
                Fetch.channel(entry.channel).then { found in
                    guard let pk = found?.channel.pk else { return .done((entry, found, nil, false)) }
                    return Fetch.seq(of: entry.messageID, in: pk).then { seq in
                        Fetch.isMember(userID, of: pk).map { (entry, found, seq, $0) }
                    }
                }
            }.then { resolved in
                var plan = DeliveredPlan()
                for (entry, found, seq, isMember) in resolved {
                    try plan.add(entry, found: found, seq: seq, isMember: isMember, userID: userID)
                }
                return Step.each(plan.targets) { target -> StoreProgram<CursorOutcome?> in
                    Fetch.cursors(of: userID, in: target.channel).then { current -> StoreProgram<CursorOutcome?> in
                        let update = ReceiptRules.markDelivered(
                            current, upTo: target.seq, newest: target.channel.lastSeq)
                        guard update.changed else { return .done(nil) }
                        return Self.apply(
                            update, of: userID, in: target.channel.pk, now: now
                        ).then { (_: Void) in
                            self.outcome(
                                of: update, by: userID, in: (target.channel, target.config), now: now, audience: audience
                            ).map { $0 }
                        }
                    }
                }
            }.map { $0.compactMap { $0 } }.then { self.told($0) }
        }, change: { outcomes in .cursorsMoved(outcomes) })
    }

    public func unreadTotals(of userID: String) async throws -> UnreadTotals {
        try await engine.readOne { Fetch.unreadTotals(of: userID) }
    }

    /// In reads of at most `recipientCountsPerRead` users each: a node may hold more of a channel's
    /// members than SQLite binds values to one statement (32,766 as built by default, 250,000 by Debian).
    public func recipientCounts(in channelPK: Int64, among userIDs: [String]?) async throws -> [RecipientUnread] {
        guard let userIDs else {
            return try await engine.readOne {
                Step.rows(StoreSQL.recipientCounts(in: channelPK)).map { rows in try rows.map { try StoreRows.recipient($0) } }
            }
        }
        var counts: [RecipientUnread] = []
        var start = userIDs.startIndex
        while start < userIDs.endIndex {
            let part = Array(userIDs[start..<min(start + Self.recipientCountsPerRead, userIDs.endIndex)])
            counts += try await engine.readOne {
                Step.rows(StoreSQL.recipientCounts(in: channelPK, among: part)).map { rows in
                    try rows.map { try StoreRows.recipient($0) }
                }
            }
            start += part.count
        }
        return counts
    }

    static let recipientCountsPerRead = 2_000

    // MARK: Steps

    /// The committed moves with what they owe the hearers: what they made read by all (R13),
    /// then the hearers' privacy (R15), in the moves' transaction.
    func told(_ outcomes: [CursorOutcome]) -> StoreProgram<[CursorOutcome]> {
        Self.withReachedAll(outcomes, kept: schema.has(.allMembers)).then(Self.withHearers)
    }

    /// A mark delivered entry as the store found it: its channel, the message's seq, whether the user is a member.
    typealias Resolved = (
        entry: DeliveredTarget, found: (channel: ChannelRecord, config: ChannelConfig?)?, seq: Seq?, isMember: Bool
    )

    /// Writes `update`'s moves and logs each in the receipt log. When the read
    /// cursor moved, the member's unread count is counted afresh (their
    /// totals follow, as sums: `StoreSQL.unreadSums`).
    static func apply(_ update: CursorUpdate, of userID: String, in channelPK: Int64, now: Timestamp)
        -> StoreProgram<Void>
    {
        // One statement for the cursors and one for the log, however many moved.
        let at = now.microseconds
        let moved: StoreProgram<Void> =
            update.moves.isEmpty
            ? .done(())
            : Step.execute(StoreSQL.moveCursors(update.moves, of: userID, in: channelPK, at: at)).then { _ in
                Step.execute(StoreSQL.logMoves(update.moves, of: userID, in: channelPK, at: at))
            }
        return moved.then { _ -> StoreProgram<Void> in
            guard update.moved(.read) else { return .done(()) }
            return Step.execute(StoreSQL.recountUnread(of: userID, in: channelPK))
        }
    }

    /// R1–R3: reads up to `target`.
    static func applyRead(_ userID: String, in channel: ChannelRecord, target: Seq, newest: Seq, now: Timestamp)
        -> StoreProgram<CursorUpdate>
    {
        Fetch.cursors(of: userID, in: channel).then { current in
            let update = ReceiptRules.markRead(current, upTo: target, newest: newest)
            return apply(update, of: userID, in: channel.pk, now: now).map { update }
        }
    }

    /// What a cursor move's events and answer need, read in the same transaction: the app's reciprocal
    /// read receipts with the reader's row (`withHearers` reads the rest of the hearers' privacy).
    func outcome(
        of update: CursorUpdate, by userID: String, in found: (channel: ChannelRecord, config: ChannelConfig?),
        now: Timestamp, audience: (any MoveAudience)?
    ) -> StoreProgram<CursorOutcome> {
        let channel = found.channel
        return Fetch.readerState(userID, in: channel.pk, schema: schema).then { read in
            guard let (reader, reciprocal) = read else { throw StoreError.notMember(userID: userID, cid: channel.cid) }
            let config = try StoreRules.requireConfig(found)
            // Who may hear of the move (`MoveAudience`); nobody when nothing moved.
            let heard = audience.flatMap { audience in audience.source(of: update, in: channel).map { (audience, $0) } }
            let ids: StoreProgram<[String]> = heard.map { Fetch.texts(StoreSQL.audience($0.1, in: channel.pk)) } ?? .done([])
            return ids.map { ids in
                var outcome = reader.outcome(
                    of: update, in: channel, config: config, at: now,
                    recipients: heard.map { $0.0.recipients(ids, from: $0.1, reader: userID) } ?? [])
                outcome.hearers = HearersPrivacy(reciprocal: reciprocal)
                return outcome
            }
        }
    }
}

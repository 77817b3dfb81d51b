import TicksProtocol
import TicksReceipts

/// Read and delivered cursors: `ReceiptRules` decides each move, these apply it.
extension SQLiteStore {
    public func markRead(
        _ userID: String, in channel: ChannelRecord, upTo messageID: String?, audience: ReceiptAudience, now: Timestamp
    ) async throws -> CursorOutcome {
        try await write { session in
            let found = try session.channel(pk: channel.pk)
            let current = found.channel
            let target = try messageID.map { id in
                try StoreRules.requireSeq(try session.seq(of: id, in: channel.pk), of: id, in: channel.cid)
            }
            let update = try Self.applyRead(
                session, userID: userID, in: current, target: target ?? current.lastSeq, newest: current.lastSeq,
                now: now)
            return try Self.outcome(
                session, channel: current, config: try StoreRules.requireConfig(found), userID: userID,
                update: update, now: now, audience: audience)
        }
    }

    public func markUnread(_ userID: String, in channel: ChannelRecord, from messageID: String, now: Timestamp)
        async throws -> CursorOutcome
    {
        try await write { session in
            let found = try session.channel(pk: channel.pk)
            let seq = try StoreRules.requireSeq(
                try session.seq(of: messageID, in: channel.pk), of: messageID, in: channel.cid)
            let update = ReceiptRules.markUnread(try Self.cursors(session, of: userID, in: found.channel), from: seq)
            try Self.apply(session, update, of: userID, in: channel.pk, now: now)
            return try Self.outcome(
                session, channel: found.channel, config: try StoreRules.requireConfig(found), userID: userID,
                update: update, now: now, audience: nil)
        }
    }

    public func markAllRead(_ userID: String, audience: ReceiptAudience, now: Timestamp) async throws
        -> [CursorOutcome]
    {
        try await write { session in
            var outcomes: [CursorOutcome] = []
            for row in try session.rows(StoreSQL.channels(ofMember: userID)) {
                let found = try StoreRows.channel(row)
                let newest = found.channel.lastSeq
                let update = try Self.applyRead(
                    session, userID: userID, in: found.channel, target: newest, newest: newest, now: now)
                guard update.changed else { continue }
                outcomes.append(
                    try Self.outcome(
                        session, channel: found.channel, config: try StoreRules.requireConfig(found), userID: userID,
                        update: update, now: now, audience: audience))
            }
            return outcomes
        }
    }

    public func markDelivered(
        _ userID: String, _ targets: [DeliveredTarget], audience: ReceiptAudience, now: Timestamp
    ) async throws -> [CursorOutcome] {
        try await write { session in
            // Resolve and check every entry first: all or nothing.
            var plan = DeliveredPlan()
            for entry in targets {
                let found = try session.channel(type: entry.channel.type, id: entry.channel.id)
                let pk = found?.channel.pk
                try plan.add(
                    entry, found: found, seq: try pk.flatMap { try session.seq(of: entry.messageID, in: $0) },
                    isMember: try pk.map { try session.isMember(userID, of: $0) } ?? false, userID: userID)
            }
            var outcomes: [CursorOutcome] = []
            for target in plan.targets {
                let current = try Self.cursors(session, of: userID, in: target.channel)
                let update = ReceiptRules.markDelivered(current, upTo: target.seq, newest: target.channel.lastSeq)
                guard update.changed else { continue }
                try Self.apply(session, update, of: userID, in: target.channel.pk, now: now)
                outcomes.append(
                    try Self.outcome(
                        session, channel: target.channel, config: target.config, userID: userID, update: update,
                        now: now, audience: audience))
            }
            return outcomes
        }
    }

    public func unreadTotals(of userID: String) async throws -> UnreadTotals {
        try readOne { session in try session.unreadTotals(of: userID) }
    }

    // MARK: Steps

    static func cursors(_ session: SQLiteSession, of userID: String, in channel: ChannelRecord) throws -> Cursors {
        guard let row = try session.row(StoreSQL.cursors(of: userID, in: channel.pk)) else {
            throw StoreError.notMember(userID: userID, cid: channel.cid)
        }
        return Cursors(read: try row.int(0), delivered: try row.int(1))
    }

    /// Writes `update`'s moves and logs each in the receipt log.
    static func apply(_ session: SQLiteSession, _ update: CursorUpdate, of userID: String, in channelPK: Int64, now: Timestamp)
        throws
    {
        for move in update.moves {
            try session.execute(StoreSQL.moveCursor(move, of: userID, in: channelPK, at: now.microseconds))
            try session.execute(StoreSQL.logMove(kind: move.kind, seq: move.to, of: userID, in: channelPK, at: now.microseconds))
        }
    }

    /// R1–R3: reads up to `target`.
    static func applyRead(
        _ session: SQLiteSession, userID: String, in channel: ChannelRecord, target: Seq, newest: Seq, now: Timestamp
    ) throws -> CursorUpdate {
        let update = ReceiptRules.markRead(try cursors(session, of: userID, in: channel), upTo: target, newest: newest)
        try apply(session, update, of: userID, in: channel.pk, now: now)
        return update
    }

    /// What a cursor move's events and answer need, read in the same transaction.
    static func outcome(
        _ session: SQLiteSession, channel: ChannelRecord, config: ChannelConfig, userID: String, update: CursorUpdate,
        now: Timestamp, audience: ReceiptAudience?
    ) throws -> CursorOutcome {
        guard let state = try session.memberStates(channel.pk, userID: userID).first else {
            throw StoreError.notMember(userID: userID, cid: channel.cid)
        }
        let recipients = try StoreRules.recipients(of: update, in: channel, reader: userID, audience: audience) {
            try session.texts(StoreSQL.audience($0, in: channel.pk))
        }
        return CursorOutcome(
            channel: channel, config: config, reader: try session.users([userID])[userID] ?? User(id: userID),
            update: update, state: state, totals: try session.unreadTotals(of: userID), at: now, recipients: recipients)
    }
}

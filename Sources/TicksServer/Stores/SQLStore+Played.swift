import TicksProtocol

/// Played (R14): a member's first play of a voice note or video, kept once.
extension SQLStore {
    public func markPlayed(_ message: MessageRecord, by userID: String, now: Timestamp) async throws -> PlayOutcome {
        try schema.require(.played)
        return try await write(
            {
                Step.row(StoreSQL.insertPlay(seq: message.seq, in: message.channelPK, by: userID, at: now.microseconds))
                    .then { inserted -> StoreProgram<(Int64, Bool)> in
                        if let inserted { return .done((try inserted.int(0), true)) }
                        return Step.row(StoreSQL.play(seq: message.seq, in: message.channelPK, by: userID)).then {
                            kept in
                            if let kept { return .done((try kept.int(0), false)) }
                            // Neither kept nor found: they are no longer a member (removed meanwhile).
                            return Fetch.channel(pk: message.channelPK).map { found -> (Int64, Bool) in
                                throw StoreError.notMember(userID: userID, cid: found.channel.cid)
                            }
                        }
                    }.then { playedAt, created in
                        Fetch.channel(pk: message.channelPK).then { found in
                            Fetch.users([userID]).map { users in
                                guard let config = found.config else {
                                    throw StoreError.unknownChannelType(found.channel.type)
                                }
                                return PlayOutcome(
                                    message: message, channel: found.channel, config: config,
                                    player: users[userID] ?? User(id: userID),
                                    playedAt: Timestamp(microseconds: playedAt), created: created)
                            }
                        }
                    }.then { outcome in
                        // Only a first play is told: only it needs its hearers' privacy.
                        guard outcome.created else { return .done(outcome) }
                        let author: Set = [message.userID]
                        return Self.membersPrivacy(of: message.channelPK, and: author, schema: self.schema).map {
                            hearers in
                            var outcome = outcome
                            outcome.hearers = hearers
                            return outcome
                        }
                    }
            }, change: { outcome in outcome.created ? .messagePlayed(outcome) : nil })
    }

    /// When each current member played `message`, by user (none on a schema before `v13-played`).
    static func playTimes(of message: MessageRecord, kept: Bool) -> StoreProgram<[String: Timestamp]> {
        guard kept else { return .done([:]) }
        return Step.rows(StoreSQL.plays(seq: message.seq, in: message.channelPK)).map { rows in
            var times: [String: Timestamp] = [:]
            for row in rows { times[try row.text(0)] = Timestamp(microseconds: try row.int(1)) }
            return times
        }
    }
}

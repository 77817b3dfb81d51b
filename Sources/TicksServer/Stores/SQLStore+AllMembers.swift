import TicksProtocol
import TicksReceipts

/// Read by everyone / delivered to everyone (R13, `AllMembers`): worked out
/// from the channel's lowest counted cursors, which an index gives whatever
/// the channel's size.
extension SQLStore {
    public func allReached(in channel: ChannelRecord, by author: String) async throws -> AllReachedUpTo {
        try await engine.read {
            Fetch.channel(pk: channel.pk).then { found in
                guard let config = found.config else { return .done(AllReachedUpTo()) }
                let kept = self.schema.has(.allMembers)
                return Self.thresholds(for: author, in: channel.pk, config: config, kept: kept).then { thresholds in
                    func newest(_ kind: CursorKind) -> StoreProgram<String?> {
                        guard let seq = thresholds[kind] else { return .done(nil) }
                        return Step.row(StoreSQL.newestShown(by: author, upTo: seq, in: channel.pk)).map {
                            try $0?.text(0)
                        }
                    }
                    return newest(.read).then { read in
                        newest(.delivered).map { AllReachedUpTo(read: read, delivered: $0) }
                    }
                }
            }
        }
    }

    /// Up to where every member but `author` has reached, for each kind the
    /// channel type tells others of (none with read events off, R8; no
    /// delivered with delivery events off, R9).
    static func thresholds(for author: String, in channelPK: Int64, config: ChannelConfig, kept: Bool)
        -> StoreProgram<[CursorKind: Seq]>
    {
        Step.each(kept ? toldKinds(config) : []) { kind in
            lowest(kind, config: config, in: channelPK, limit: 2).map { lowest in
                (kind, AllMembers.threshold(for: author, lowest: lowest))
            }
        }.map { pairs in
            var thresholds: [CursorKind: Seq] = [:]
            for (kind, seq) in pairs { thresholds[kind] = seq }
            return thresholds
        }
    }

    /// The kinds of "all" a channel type tells.
    static func toldKinds(_ config: ChannelConfig) -> [CursorKind] {
        guard config.readEvents else { return [] }
        return config.deliveryEvents ? [.read, .delivered] : [.read]
    }

    static func lowest(_ kind: CursorKind, config: ChannelConfig, in channelPK: Int64, limit: Int)
        -> StoreProgram<[(userID: String, seq: Seq?)]>
    {
        Step.rows(StoreSQL.lowestCounted(kind, deliveryEvents: config.deliveryEvents, in: channelPK, limit: limit))
            .map { rows in
                try rows.map { row in
                    let seq = try row.int(1)
                    return (try row.text(0), seq == StoreSQL.notCounted ? nil : seq)
                }
            }
    }

    /// Each outcome with what its move made reached by all (`reachedAll`),
    /// in the move's transaction, after every row lock the moves took: the
    /// channels' advisory locks come last, in pk order (docs/storage.md).
    /// PostgreSQL's batches work the same out in `MovesFunction`.
    static func withReachedAll(_ outcomes: [CursorOutcome], kept: Bool) -> StoreProgram<[CursorOutcome]> {
        guard kept else { return .done(outcomes) }
        let locks = Set(outcomes.filter { !countedMoves($0).isEmpty }.map(\.channel.pk)).sorted()
        return Step.each(locks) { Step.execute(StoreSQL.allMembersLock($0)) }.then { _ in
            Step.each(outcomes) { outcome in
                reachedAll(by: outcome).map { reached in
                    var outcome = outcome
                    outcome.reachedAll = reached
                    return outcome
                }
            }
        }.map(toldOnceEach)
    }

    /// A batch of moves in one channel may reach the same author's messages
    /// more than once: each author is told once, of the newest.
    static func toldOnceEach(_ outcomes: [CursorOutcome]) -> [CursorOutcome] {
        struct Told: Hashable {
            var channel: Int64
            var kind: CursorKind
            var author: String
        }
        var newest: [Told: Seq] = [:]
        for outcome in outcomes {
            for reached in outcome.reachedAll {
                let told = Told(channel: outcome.channel.pk, kind: reached.kind, author: reached.author)
                newest[told] = max(newest[told] ?? 0, reached.seq)
            }
        }
        return outcomes.map { outcome in
            var outcome = outcome
            outcome.reachedAll.removeAll {
                newest[Told(channel: outcome.channel.pk, kind: $0.kind, author: $0.author)] != $0.seq
            }
            return outcome
        }
    }

    /// The reader's counted positions before and after the move, for each
    /// kind the channel type tells, where the move raised them.
    static func countedMoves(_ outcome: CursorOutcome) -> [(kind: CursorKind, from: Seq, to: Seq)] {
        countedMoves(outcome.update, by: outcome.reader, config: outcome.config)
    }

    static func countedMoves(_ update: CursorUpdate, by reader: User, config: ChannelConfig)
        -> [(kind: CursorKind, from: Seq, to: Seq)]
    {
        let after = update.cursors
        var before = after
        for move in update.moves {
            switch move.kind {
            case .read: before.read = move.from
            case .delivered: before.delivered = move.from
            }
        }
        return toldKinds(config).compactMap { kind in
            func counted(_ cursors: Cursors) -> Seq? {
                AllMembers.counted(
                    kind, cursors, sharesReads: reader.sharesReadReceipts,
                    sharesDeliveries: reader.sharesDeliveryReceipts, deliveryEvents: config.deliveryEvents)
            }
            guard let from = counted(before), let to = counted(after), to > from else { return nil }
            return (kind, from, to)
        }
    }

    /// What one move made reached by all: the newest message of each author.
    static func reachedAll(by outcome: CursorOutcome) -> StoreProgram<[ReachedAll]> {
        reachedAll(by: outcome.reader, outcome.update, in: outcome.channel, config: outcome.config)
    }

    /// What a sender's own cursors jumping to their message (R4) made reached by all, in the send's transaction.
    static func reachedAll(
        bySending update: CursorUpdate?, _ sender: String, in channel: ChannelRecord, config: ChannelConfig?, kept: Bool
    ) -> StoreProgram<[ReachedAll]> {
        guard kept, let update, update.changed, let config, !toldKinds(config).isEmpty else { return .done([]) }
        return Fetch.users([sender]).then { users in
            Step.execute(StoreSQL.allMembersLock(channel.pk)).then { _ in
                reachedAll(by: users[sender] ?? User(id: sender), update, in: channel, config: config)
            }
        }
    }

    static func reachedAll(by reader: User, _ update: CursorUpdate, in channel: ChannelRecord, config: ChannelConfig)
        -> StoreProgram<[ReachedAll]>
    {
        let mover = reader.id
        let pk = channel.pk
        let moves = countedMoves(update, by: reader, config: config)
        return Step.each(moves) { move -> StoreProgram<(kind: CursorKind, reached: AllMembers.Reached)?> in
            // Two members: the mover is every member but the other, whose messages it reaches up
            // to where it moved — no need to ask the index (a member who joins meanwhile has read
            // everything, R5, and holds nothing back).
            let lowest = channel.memberCount <= 2 ? .done([]) : lowest(move.kind, config: config, in: pk, limit: 3)
            return lowest.map { lowest in
                AllMembers.reached(by: mover, from: move.from, to: move.to, lowest: lowest).map { (move.kind, $0) }
            }
        }.then { found in
            // Kinds that reach the same messages (a read that also delivers, in two members) ask once.
            var groups: [(reached: AllMembers.Reached, kinds: [CursorKind])] = []
            for case let (kind, reached)? in found {
                if let index = groups.firstIndex(where: { $0.reached == reached }) {
                    groups[index].kinds.append(kind)
                } else {
                    groups.append((reached, [kind]))
                }
            }
            return Step.each(groups) { group in
                Step.rows(StoreSQL.newlyReached(group.reached, by: mover, in: pk)).map { rows in
                    try group.kinds.flatMap { kind in
                        try rows.map { row in
                            ReachedAll(
                                kind: kind, author: try row.text(0), messageID: try row.text(1), seq: try row.int(2))
                        }
                    }
                }
            }.map { $0.flatMap { $0 } }
        }
    }

    /// Before a user update: the member rows of the users whose privacy it
    /// changes (from `stored` to `updated`), locked in key order, so their
    /// rows are taken as a move takes them, members before users
    /// (`StoreSQL.lockMembers`). Decided from rows read without a lock: an
    /// update racing another that changes the same privacy may still meet a
    /// move in a circle, which PostgreSQL breaks and the store runs again.
    static func lockMembers(
        changingSharing stored: [String: User], to updated: [User], kept: Bool
    ) -> StoreProgram<Void> {
        let changing = updated.filter { user in
            guard let old = stored[user.id] else { return false }
            return old.sharesReadReceipts != user.sharesReadReceipts
                || old.sharesDeliveryReceipts != user.sharesDeliveryReceipts
        }.map(\.id)
        guard kept, !changing.isEmpty else { return .done(()) }
        return Step.execute(StoreSQL.lockMembers(of: changing))
    }

    /// The copy of the user's privacy on their member rows (`v11-all-members`).
    static func keepSharing(of user: User, kept: Bool) -> StoreProgram<Void> {
        Step.each(
            kept
                ? StoreSQL.setSharing(
                    of: user.id, reads: user.sharesReadReceipts, deliveries: user.sharesDeliveryReceipts) : []
        ) {
            Step.execute($0)
        }.map { _ in () }
    }
}

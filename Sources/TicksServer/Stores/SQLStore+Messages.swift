import TicksProtocol
import TicksReceipts

/// Sending and reading messages.
extension SQLStore {
    public func sendMessage(_ new: NewMessage, to channel: ChannelRecord, now: Timestamp) async throws
        -> SendOutcome
    {
        let custom = try StoredJSON.messageColumn(custom: new.custom, attachments: new.attachments)
        var outcome: SendOutcome
        do {
            // Sends into one channel take turns on the node (PostgreSQL: `Turns`), then the channel's
            // row lock numbers its messages one at a time whichever node they came through, and a
            // retried send with the same id waits there for the first (R11). Sends in one call that
            // queued together share a transaction (they lock no row but the channel's and their
            // authors'); any other runs alone.
            let inOneCall = sendsInOneCall && new.parentID == nil && !new.showInChannel
            let turn = Turn(channelPK: channel.pk, author: inOneCall ? new.userID : nil)
            outcome = try await write(in: turn, {
                Fetch.channel(pk: channel.pk, lock: true).then { found in
                    let stepByStep: @Sendable () -> StoreProgram<SendOutcome> = {
                        Step.row(StoreSQL.message(id: new.id)).then { stored -> StoreProgram<SendOutcome> in
                            if let stored {
                                return .done(try StoreRules.resend(of: try StoreRows.message(stored, cid: channel.cid), to: found.channel))
                            }
                            return Self.append(
                                new, custom: custom, to: found.channel, config: found.config, now: now,
                                allMembers: self.schema.has(.allMembers), actors: self.actor(nil)
                            ).then { Self.withHearers($0, schema: self.schema) }
                        }
                    }
                    guard inOneCall, found.config != nil else { return stepByStep() }
                    // PostgreSQL: one call, unless it sends nothing and leaves the send to the steps.
                    return Self.sendInOneCall(new, custom: custom, to: found.channel, now: now).then {
                        sent -> StoreProgram<SendOutcome> in
                        sent.map { .done($0) } ?? stepByStep()
                    }
                }
            }, change: { outcome in .messageSent(outcome, in: channel) })
        } catch StoreEngineError.uniqueViolation {
            // The id was taken in another channel at the same moment (through another node).
            throw StoreError.messageIDInOtherChannel(new.id)
        }
        // Whom `message.new` is for: the members as they are after the commit, read outside the
        // channel's turn, so the sends waiting behind this one do not wait for the list too. A
        // member removed meanwhile is not told; one added meanwhile (at the channel's newest, R5)
        // is told of a message they have read. In a large channel sent in one call, not listed
        // at all (`SendOutcome.everyMember`): at 1,000 members the list was a quarter of what
        // PostgreSQL spent on a send, and the bus's entry naming them another fifth.
        if outcome.created && !outcome.everyMember { outcome.recipients = try await memberIDs(of: channel) }
        return outcome
    }

    /// Channels of more members than this get `message.new` without a list of them, when sent in
    /// one call (`SendOutcome.everyMember`); as many as a channel whose receipts all members hear
    /// (`TicksServerConfiguration.largeChannelMembers`' default).
    static let recipientsListedUpTo = 100

    /// Every member's user id, in join order: on PostgreSQL one text, decoded once, rather than a
    /// row each (user ids hold no comma, `Identifier.id`); on SQLite, in process, a row each.
    static func memberIDs(of channelPK: Int64, in dialect: SQLDialect) -> StoreProgram<[String]> {
        switch dialect {
        case .sqlite:
            Fetch.texts(StoreSQL.memberIDs(of: channelPK))
        case .postgres:
            Step.row(StoreSQL.memberIDList(of: channelPK)).map { row in
                try row?.optionalText(0).map { $0.split(separator: ",").map(String.init) } ?? []
            }
        }
    }

    /// Whether a message shown in the channel is sent in one call of `SendFunction`: PostgreSQL,
    /// where every statement is a round trip, on a schema with every migration the function names.
    var sendsInOneCall: Bool {
        engine.dialect == .postgres
            && [.allMembers, .appSettings, .actors, .unreadPositions, .countedColumns].allSatisfy { schema.has($0) }
    }

    /// A message shown in the channel and its author's read of it (R4), in one call of
    /// `SendFunction`, numbered from `channel` as the program numbers it (the caller holds the
    /// channel's row lock); nil when the function wrote nothing and the program is to send
    /// (a stored id, an author who is no member, counts kept by sends). The read's rows are
    /// `MovesFunction`'s, checked by `OneStatementMove` as every batch of marks is; what the
    /// read made read by all (R13) goes with the send, with the privacy of the authors told it
    /// as `withHearers(_:schema:)` reads it (R15).
    static func sendInOneCall(_ new: NewMessage, custom: String, to channel: ChannelRecord, now: Timestamp)
        -> StoreProgram<SendOutcome?>
    {
        let createdAt = StoreRules.messageTime(now: now, after: channel.lastMessageAt)
        let seq = channel.lastSeq + 1
        let read = BatchedMove(
            kind: .read, userID: new.userID, channel: channel.cid, messageID: new.id, at: createdAt,
            audience: ShapeOnlyAudience())
        return Step.rows(StoreSQL.send(new, custom: custom, to: channel.pk, channel.cid, seq: seq, at: createdAt.microseconds))
            .map { rows -> SendOutcome? in
                guard !rows.isEmpty else { return nil }
                guard let first = try OneStatementMove.decode(rows, of: [read], allMembers: true).first,
                    let moved = try first.get()
                else { throw StoreError.inconsistent("a send's read of its message moved nothing") }
                guard moved.channel.lastSeq == seq, moved.channel.lastMessageAt == createdAt,
                    moved.state.cursors == Cursors(read: seq, delivered: seq)
                else {
                    throw StoreError.inconsistent(
                        "the one-call send left the channel at \(moved.channel.lastSeq) and its author at \(moved.state.cursors); "
                            + "the program numbers it \(seq)")
                }
                var outcome = StoreRules.sent(new, to: channel, seq: seq, at: createdAt)
                outcome.everyMember = channel.memberCount > recipientsListedUpTo
                outcome.reachedAll = moved.reachedAll
                let told = Set(moved.reachedAll.filter { $0.kind == .read }.map(\.author))
                outcome.hearers = told.isEmpty ? HearersPrivacy() : moved.hearers.among(told)
                return outcome
            }
    }

    /// Stores a new message after the channel's last (who its members are is read after the commit,
    /// `sendMessage`; their counts by each node for the members connected to it, `EventPublisher.messageNew`).
    static func append(
        _ new: NewMessage, custom: String, to channel: ChannelRecord, config: ChannelConfig?, now: Timestamp,
        allMembers: Bool, actors: ChangeActor
    ) -> StoreProgram<SendOutcome>
    {
        let createdAt = StoreRules.messageTime(now: now, after: channel.lastMessageAt)
        let seq = channel.lastSeq + 1
        return Fetch.isMember(new.userID, of: channel.pk).then { isMember -> StoreProgram<Bool> in
            guard !isMember else { return .done(true) }
            guard new.byServer else { throw StoreError.notMember(userID: new.userID, cid: channel.cid) }
            return Fetch.users([new.userID]).map { found in
                try StoreRules.requireUsers([new.userID], found: found)
                return false
            }
        }.then { isMember -> StoreProgram<(isMember: Bool, parent: MessageRecord?)> in
            guard let parentID = new.parentID else { return .done((isMember, nil)) }
            return Self.parent(parentID, in: channel).map { (isMember, $0) }
        }.then { (isMember, parent) -> StoreProgram<Bool> in
            Step.row(
                StoreSQL.appendMessage(
                    to: channel.pk, seq: seq, at: createdAt.microseconds, counts: !new.threadOnly, actors: actors)
            ).then { row in
                Step.execute(
                    StoreSQL.insertMessage(
                        channelPK: channel.pk, seq: seq, message: new, custom: custom, at: createdAt.microseconds)
                ).map { _ in try row?.int(0) == 1 }
            }.then { byPositions -> StoreProgram<Void> in
                // R7: one more unread for every other member (a reply shown only in its thread
                // counts in the thread alone): the channel's `counted` moved, or, where sends keep
                // counts (`StoreSQL.UnreadCounting`), every other member's kept count takes one.
                new.threadOnly || byPositions
                    ? .done(()) : Step.execute(StoreSQL.countNewMessage(in: channel.pk, by: new.userID))
            }.then { _ in
                parent.map { Self.reply(new.userID, isMember: isMember, seq: seq, to: $0, at: createdAt) } ?? .done(())
            }.map { isMember }
        }.then { isMember -> StoreProgram<CursorUpdate?> in
            // R4: the author has read their own message, and everything before it; a
            // reply shown only in its thread moves their thread read state instead,
            // and an author who is no member has no read state.
            guard isMember, !new.threadOnly else { return .done(nil) }
            return Self.applyRead(new.userID, in: channel, target: seq, newest: seq, now: createdAt).map { $0 }
        }.then { update in
            Self.reachedAll(bySending: update, new.userID, in: channel, config: config, kept: allMembers)
        }.map { reachedAll in
            var outcome = StoreRules.sent(new, to: channel, seq: seq, at: createdAt)
            outcome.reachedAll = reachedAll
            return outcome
        }
    }

    /// A reply's parent: a message of the channel still there, not a reply itself.
    static func parent(_ id: String, in channel: ChannelRecord) -> StoreProgram<MessageRecord> {
        Step.row(StoreSQL.messageThere(id: id)).map { row in
            guard let row, case let parent = try StoreRows.messageWithChannel(row), parent.channelPK == channel.pk else {
                throw StoreError.parentNotFound(id)
            }
            guard parent.parentID == nil else { throw StoreError.nestedReply(id) }
            return parent
        }
    }

    /// A reply in `parent`'s thread: the parent counts it, its author joins the
    /// thread's readers at the first reply, every reader but the reply's author
    /// has one more unread there, and the author, when a member (a server
    /// token may send for anyone), has read the thread up to it.
    static func reply(_ author: String, isMember: Bool, seq: Seq, to parent: MessageRecord, at: Timestamp)
        -> StoreProgram<Void>
    {
        Step.execute(StoreSQL.addReply(to: parent.id)).then { _ in
            Step.rows(StoreSQL.joinThread(parent, at: at.microseconds))
        }.then { joined in
            Step.execute(StoreSQL.countNewReply(in: parent.id, by: author)).map { joined }
        }.then { joined in
            // Joining after earlier replies (the author left the channel and came
            // back): those after the parent are unread too, not only this one.
            joined.isEmpty ? .done(()) : Step.execute(StoreSQL.recountThread(parent.id, of: parent.userID))
        }.then { _ in
            isMember
                ? Step.execute(
                    StoreSQL.readThread(parent.id, by: author, in: parent.channelPK, upTo: seq, at: at.microseconds))
                : .done(())
        }
    }

    public func message(id: String) async throws -> (message: MessageRecord, channel: ChannelRecord)? {
        try await engine.read {
            Step.row(StoreSQL.messageThere(id: id)).then { row -> StoreProgram<(message: MessageRecord, channel: ChannelRecord)?> in
                guard let row else { return .done(nil) }
                let message = try StoreRows.messageWithChannel(row)
                return Fetch.channel(pk: message.channelPK).map { (message, $0.channel) }
            }
        }
    }
}

import TicksProtocol
import TicksReceipts

/// Editing and deleting messages, truncating, updating and deleting
/// channels, member and user data, unread counts and tasks — and what each
/// does to receipts (docs/receipt-rules.md, "Deleting, editing, truncating").
extension SQLStore {
    // MARK: Messages

    public func messages(ids: [String], in channel: ChannelRecord) async throws -> [MessageRecord] {
        try await engine.readOne {
            Step.rows(StoreSQL.messages(in: channel, ids: ids)).map { rows in
                try rows.map { try StoreRows.message($0, cid: channel.cid) }
            }
        }
    }

    /// An edit changes the text and custom data, never the receipts: the
    /// message keeps its place, so every cursor past it stays past it.
    public func editMessage(
        id: String, by actor: String?, now: Timestamp, _ edit: @escaping @Sendable (MessageRecord) throws -> MessageEdit
    ) async throws -> MessageRecord {
        try await write({
            Self.lockedMessage(id).then { message in
                let change = try edit(message)
                var edited = message
                edited.text = change.text
                edited.custom = change.custom
                edited.updatedAt = now
                let textChanged = change.text != message.text
                if textChanged { edited.textUpdatedAt = now }
                return Step.execute(
                    StoreSQL.editMessage(
                        id: id, text: change.text,
                        custom: try StoredJSON.messageColumn(custom: change.custom, attachments: message.attachments),
                        at: now.microseconds,
                        textChanged: textChanged, by: self.actor(actor))
                ).map { edited }
            }
        }, change: { message in .messageUpdated(message) })
    }

    /// A deleted message is never unread again: it leaves the count of every
    /// member who had not read it (and their totals) in the same transaction.
    public func deleteMessage(id: String, hard: Bool, by actor: String?, now: Timestamp) async throws -> MessageRecord {
        try await write({
            // The channel's row first, as a send takes it, then the message's: a delete of a
            // thread's parent and a reply to it (the channel, then the parent) take turns. The
            // message was locked first once, and the two waited for each other in a circle.
            Step.row(StoreSQL.message(id: id)).then { row -> StoreProgram<MessageRecord> in
                guard let row else { throw StoreError.messageNotFound(id) }
                let channelPK = try StoreRows.messageWithChannel(row).channelPK
                return Fetch.channel(pk: channelPK, lock: true).then { _ in Self.lockedMessage(id) }
            }.then { message in
                var deleted = message
                deleted.deletedAt = message.deletedAt ?? now
                deleted.hidden = true
                if hard {
                    deleted.hardDeleted = true
                    deleted.text = ""
                    deleted.custom = [:]
                    deleted.attachments = []
                }
                var uncount =
                    message.hidden ? [] : [StoreSQL.uncountMessage(seq: message.seq, in: message.channelPK, by: message.userID)]
                if let parentID = message.parentID, message.deletedAt == nil {
                    // A reply leaves its thread's counts too.
                    uncount.append(StoreSQL.uncountReply(in: parentID, seq: message.seq, by: message.userID))
                }
                let delete = StoreSQL.deleteMessage(id: id, hard: hard, at: now.microseconds, by: self.actor(actor))
                return Step.execute(delete).then { _ in
                    Step.each(uncount) { Step.execute($0) }
                }.map { _ in deleted }
            }
        }, change: { message in .messageDeleted(message, hard: hard) })
    }

    /// The message `id`, still there, locked in PostgreSQL; `messageNotFound` otherwise.
    static func lockedMessage(_ id: String) -> StoreProgram<MessageRecord> {
        Step.row(StoreSQL.lockedMessage(id: id)).map { row in
            guard let row else { throw StoreError.messageNotFound(id) }
            let message = try StoreRows.messageWithChannel(row)
            guard !message.hardDeleted else { throw StoreError.messageNotFound(id) }
            return message
        }
    }

    // MARK: Channels

    /// Every message so far is gone from the channel; every member has
    /// received and read up to its last message (unread 0, totals to match),
    /// and the receipt log, which only names messages now gone, is dropped.
    public func truncateChannel(_ channel: ChannelRecord, hard: Bool, by actor: String?, now: Timestamp) async throws
        -> ChannelRecord
    {
        try await write({
            Fetch.channel(pk: channel.pk, lock: true).then { found in
                let last = found.channel.lastSeq
                return Self.clearReadState(of: found.channel, through: last).then { _ in
                    Step.execute(
                        StoreSQL.truncate(channel.pk, through: last, at: now.microseconds, by: self.actor(actor)))
                }.then { _ in
                    hard ? Step.execute(StoreSQL.wipeMessages(in: channel.pk, through: last, at: now.microseconds)) : .done(())
                }.then { _ in Fetch.channel(pk: channel.pk).map(\.channel) }
            }
        }, change: { truncated in .channelTruncated(truncated, at: now) })
    }

    /// Deletes the channel: its members' read state and receipt log go (and
    /// their unread leaves their totals). A soft delete keeps the rows of the
    /// channel and its messages out of sight, and records its members as
    /// removed at the time of the delete (a sync tells them, and only them,
    /// `channel.deleted`); a hard one leaves nothing. Returns the ids of
    /// those who were members.
    public func deleteChannel(_ channel: ChannelRecord, hard: Bool, by actor: String?, now: Timestamp) async throws
        -> [String]
    {
        try await write({
            Fetch.channel(pk: channel.pk, lock: true).then { found in
                self.remove(found.channel, hard: hard, by: actor, now: now)
            }
        }, change: { _ in .channelDeleted(channel, at: now) })
    }

    /// Guard: the channel's row lock. Whether it is a conversation is decided
    /// under it, and every change of membership takes it first, so a member
    /// who joins after the caller read the channel saves it.
    public func deleteConversation(_ channel: ChannelRecord, of userID: String, hard: Bool, now: Timestamp)
        async throws -> [String]?
    {
        try await write({
            Fetch.channel(pk: channel.pk, lock: true).then { found -> StoreProgram<[String]?> in
                guard found.channel.memberCount == 2 else { return .done(nil) }
                return Fetch.isMember(userID, of: channel.pk).then { isMember -> StoreProgram<[String]?> in
                    guard isMember else { return .done(nil) }
                    return self.remove(found.channel, hard: hard, by: nil, now: now).map { $0 }
                }
            }
        }, change: { members in members == nil ? nil : .channelDeleted(channel, at: now) })
    }

    /// Deletes `channel` (its row locked by the caller) with its members'
    /// read state and receipt log; returns who were members.
    private func remove(_ channel: ChannelRecord, hard: Bool, by actor: String?, now: Timestamp)
        -> StoreProgram<[String]>
    {
        let keepsPlays = schema.has(.played)
        let actor = self.actor(actor)
        return Self.clearReadState(of: channel, through: channel.lastSeq).then { memberIDs in
            let recorded: StoreProgram<Void> =
                hard
                ? .done(())
                : Step.execute(StoreSQL.recordRemovals(ofMembersOf: channel.pk, at: now.microseconds)).then { _ in
                    Self.forgetOldRemovals(now: now)
                }
            return recorded.then { _ in Step.execute(StoreSQL.deleteMembers(of: channel.pk)) }.then { _ in
                hard
                    ? Step.execute(StoreSQL.deleteMessages(of: channel.pk)).then { _ in
                        Step.execute(StoreSQL.forgetRemovals(from: channel.pk))
                    }.then { _ in
                        keepsPlays ? Step.execute(StoreSQL.deletePlays(of: .channel(channel.pk))) : .done(())
                    }.then { _ in Step.execute(StoreSQL.deleteChannelRow(channel.pk)) }
                    : Step.execute(StoreSQL.markDeleted(channel.pk, at: now.microseconds, by: actor))
            }.map { _ in memberIDs }
        }
    }

    /// Moves every member's cursors to `seq` at least, zeroes their unread
    /// (and so takes it out of their totals, `StoreSQL.unreadSums`) and drops
    /// the channel's receipt log. Returns the member ids.
    static func clearReadState(of channel: ChannelRecord, through seq: Seq) -> StoreProgram<[String]> {
        Fetch.texts(StoreSQL.lockedMemberIDs(channel.pk)).then { memberIDs in
            Step.execute(StoreSQL.moveCursors(in: channel.pk, pastOrAt: seq)).then { _ in
                Step.execute(StoreSQL.deleteMoves(of: .channel(channel.pk)))
            }.then { _ in
                Step.execute(StoreSQL.deleteThreadReads(of: .channel(channel.pk)))
            }.map { _ in memberIDs }
        }
    }

    public func updateChannelData(
        _ channel: ChannelRecord, by actor: String?, now: Timestamp,
        _ edit: @escaping @Sendable ([String: JSONValue]) throws -> [String: JSONValue]
    ) async throws -> ChannelRecord {
        try await write({
            Fetch.channel(pk: channel.pk, lock: true).then { found in
                let custom = try edit(found.channel.custom)
                return Step.execute(
                    StoreSQL.setCustom(
                        of: channel.pk, to: try JSONCoding.string(custom), at: now.microseconds, by: self.actor(actor))
                ).then { _ in Fetch.channel(pk: channel.pk).map(\.channel) }
            }
        }, change: { updated in .channelUpdated(updated, at: now) })
    }

    // MARK: Members and users

    /// Every member's user id, in join order (whom a send's `message.new`, a typing notice or a
    /// channel's event goes to).
    public func memberIDs(of channel: ChannelRecord) async throws -> [String] {
        let dialect = engine.dialect
        return try await engine.readOne { Self.memberIDs(of: channel.pk, in: dialect) }
    }

    public func members(of channel: ChannelRecord, among userIDs: [String]?, limit: Int, offset: Int) async throws
        -> [MemberState]
    {
        try await engine.readOne {
            Step.rows(StoreSQL.memberStates(channel.pk, among: userIDs, limit: limit, offset: offset)).map { rows in
                try rows.map { try StoreRows.memberState($0) }
            }
        }
    }

    public func updateMember(
        _ userID: String, of channel: ChannelRecord,
        _ edit: @escaping @Sendable ([String: JSONValue]) throws -> [String: JSONValue]
    ) async throws -> MemberState {
        try await engine.write {
            Fetch.cursors(of: userID, in: channel).then { _ in
                Fetch.memberStates(channel.pk, userID: userID)
            }.then { states in
                guard let state = states.first else { throw StoreError.notMember(userID: userID, cid: channel.cid) }
                var edited = state
                edited.custom = try edit(state.custom)
                return Step.execute(
                    StoreSQL.setMemberCustom(of: userID, in: channel.pk, to: try JSONCoding.string(edited.custom))
                ).map { edited }
            }
        }
    }

    public func updateUsers(_ edits: [UserEdit], now: Timestamp) async throws -> [User] {
        let edits = edits.sorted { $0.id < $1.id }
        return try await engine.write {
            // The member rows whose privacy copy the edits change (in key order, as a move takes
            // them), then the users' rows in id order.
            Fetch.users(edits.map(\.id)).then { stored in
                let updated = try edits.compactMap { edit in try stored[edit.id].map(edit.change) }
                return Self.lockMembers(changingSharing: stored, to: updated, kept: self.schema.has(.allMembers))
            }.then { _ in
                Step.each(edits) { edit in
                    Step.row(StoreSQL.userBody(edit.id)).then { row in
                        guard let row else { throw StoreError.unknownUser(edit.id) }
                        var user = try edit.change(try StoredJSON.user(try row.text(0)))
                        user.updatedAt = now
                        return Step.execute(
                            StoreSQL.setUserBody(edit.id, body: try JSONCoding.string(user), now: now.microseconds)
                        ).then { _ in Self.keepSharing(of: user, kept: self.schema.has(.allMembers)) }.map { user }
                    }
                }
            }
        }
    }

    /// Deletes a user: they leave every channel with their read state, their
    /// receipt log and their thread read state (R6); with `messages`, their
    /// messages are deleted too and leave every other member's unread counts;
    /// `hard` removes the user's row and their messages' content. Returns
    /// the pks of the channels they were a member of.
    public func deleteUser(_ userID: String, hard: Bool, messages: Bool, now: Timestamp) async throws -> [Int64] {
        try await engine.write {
            Fetch.users([userID]).then { found -> StoreProgram<[any StoreRow]> in
                try StoreRules.requireUsers([userID], found: found)
                return Step.rows(StoreSQL.channelPKs(withMessagesBy: userID))
            }.then { rows in
                let touched = try rows.map { try $0.int(0) }
                return Fetch.channelPKs(ofMember: userID).then { memberships -> StoreProgram<[Int64]> in
                    // Channels' rows first, in pk order, as every change that takes them does.
                    let channels = Set(touched).union(memberships).sorted()
                    return Step.each(channels) { Fetch.channel(pk: $0, lock: true) }.then { _ in
                        Step.execute(StoreSQL.recordRemovals(ofMember: userID, at: now.microseconds))
                    }.then { _ in Self.forgetOldRemovals(now: now) }
                    // Their totals go with their memberships (`StoreSQL.unreadSums`).
                    .then { _ in Step.execute(StoreSQL.deleteAllMemberships(of: userID)) }.then { _ in Step.execute(StoreSQL.deleteMemberRows(of: userID)) }
                    .then { _ in Step.execute(StoreSQL.deleteMoves(of: .user(userID))) }
                    .then { _ in Step.execute(StoreSQL.deleteThreadReads(of: .user(userID))) }
                    .then { _ in
                        self.schema.has(.played) ? Step.execute(StoreSQL.deletePlays(of: .user(userID))) : .done(())
                    }
                    .then { _ in
                        guard messages || hard else { return .done(()) }
                        // Their messages stop counting: every member of those channels counted afresh.
                        let actors = self.actor(nil)
                        return Step.execute(
                            StoreSQL.deleteMessages(by: userID, hard: hard, at: now.microseconds, actors: actors))
                            .then { _ in
                                Step.each(touched) { pk in
                                    Step.execute(StoreSQL.recountUnread(of: nil, in: pk)).then { _ in
                                        Step.execute(StoreSQL.recountThreads(in: pk))
                                    }
                                }
                            }.map { _ in () }
                    }.then { _ in
                        hard ? Step.execute(StoreSQL.deleteUserRow(userID)) : .done(())
                    }.map { _ in memberships }
                }
            }
        }
    }

    // MARK: Unread counts

    public func unreadCounts(of userIDs: [String]) async throws -> [String: UnreadCounts] {
        let chunks = userIDs.uniqued().chunked(Fetch.idsPerStatement).map(Array.init)
        return try await engine.read {
            Step.each(chunks) { chunk in
                Step.rows(StoreSQL.unreadTotals(of: chunk)).then { totals in
                    Step.rows(StoreSQL.unreadChannels(of: chunk)).map { (totals, $0) }
                }.then { (totals, channels) in
                    Step.rows(StoreSQL.unreadThreads(of: chunk)).map { (totals, channels, $0) }
                }
            }.map { results in
                var counts: [String: UnreadCounts] = [:]
                for (totals, channels, threads) in results {
                    for row in totals {
                        counts[try row.text(0)] = UnreadCounts(
                            totals: try StoreRows.totals(row, at: 1), channels: [], threads: [])
                    }
                    for row in channels {
                        counts[try row.text(0)]?.channels.append(
                            ChannelUnread(
                                channel: ChannelID(type: try row.text(1), id: try row.text(2)),
                                unread: Int(try row.int(3)), lastRead: Timestamp(microseconds: try row.int(4)),
                                lastReadMessageID: try row.optionalText(5)))
                    }
                    for row in threads {
                        counts[try row.text(0)]?.threads.append(
                            ThreadUnread(
                                parentID: try row.text(1), unread: Int(try row.int(2)),
                                lastRead: Timestamp(microseconds: try row.int(3)), lastReadMessageID: try row.optionalText(4)))
                    }
                }
                return counts
            }
        }
    }

    // MARK: Threads

    public func markThreadRead(_ userID: String, in channel: ChannelRecord, parentID: String, now: Timestamp)
        async throws -> ThreadRead
    {
        try await engine.write {
            Self.lockedThread(parentID, of: userID, in: channel).then { parent in
                Step.row(StoreSQL.newestReply(to: parentID)).then { row in
                    let newest = try row?.int(0) ?? 0
                    // Without replies yet, the parent is what they have read.
                    let upTo = newest > 0 ? newest : parent.seq
                    return Step.execute(
                        StoreSQL.readThread(parentID, by: userID, in: channel.pk, upTo: upTo, at: now.microseconds)
                    ).then { _ in
                        Step.row(StoreSQL.messageAt(seq: upTo, in: channel.pk))
                    }.then { row in
                        Self.membersPrivacy(of: channel.pk, schema: self.schema).map { hearers in
                            ThreadRead(
                                parent: parent, readAt: now, lastReadMessageID: try row?.text(0), hearers: hearers)
                        }
                    }
                }
            }
        }
    }

    /// The thread's parent, once `userID` is found a member and the parent's
    /// row is locked. The lock comes first, as a reply takes it to count
    /// itself: a reply committed before is in what the caller reads next;
    /// one after waits, then counts itself in the read state written.
    static func lockedThread(_ parentID: String, of userID: String, in channel: ChannelRecord)
        -> StoreProgram<MessageRecord>
    {
        Fetch.isMember(userID, of: channel.pk).then { isMember -> StoreProgram<MessageRecord> in
            guard isMember else { throw StoreError.notMember(userID: userID, cid: channel.cid) }
            return Self.parent(parentID, in: channel)
        }.then { parent in
            Step.execute(StoreSQL.lockThreads([parentID])).map { _ in parent }
        }
    }

    /// Guard: the parent's row lock, as `markThreadRead` takes it: a reply
    /// committed before is counted by the one statement that writes the
    /// read state; one after waits, then counts itself in it.
    public func markThreadUnread(_ userID: String, in channel: ChannelRecord, parentID: String, now: Timestamp)
        async throws -> ThreadMarkedUnread
    {
        try await engine.write {
            Self.lockedThread(parentID, of: userID, in: channel).then { parent in
                Step.row(
                    StoreSQL.unreadThread(parentID, by: userID, in: channel.pk, from: parent.seq, at: now.microseconds)
                ).then { row in
                    Step.rows(StoreSQL.unreadThreads(of: [userID])).map { threads in
                        ThreadMarkedUnread(
                            parentID: parentID, unread: Int(try row?.int(0) ?? 0), unreadThreads: threads.count)
                    }
                }
            }
        }
    }

    /// One statement moves them all (`StoreSQL.readAllThreads`), in the
    /// transaction that finds the user and reads their totals: no reply sent
    /// meanwhile is lost from a count. No `StoreChange`: thread reads reach no
    /// webhook (docs/webhooks.md).
    public func markThreadsRead(_ userID: String, now: Timestamp) async throws -> ThreadsRead? {
        try await engine.write {
            Step.row(StoreSQL.unreadTotals(of: userID)).then { row -> StoreProgram<ThreadsRead?> in
                guard let row else { return .done(nil) }
                let totals = try StoreRows.totals(row)
                // Their threads' parents locked first (`markThreadRead`), then one statement whose
                // snapshot holds every reply that counted itself before.
                return Step.execute(StoreSQL.lockThreads(of: userID)).then { _ in
                    Step.rows(StoreSQL.readAllThreads(of: userID, at: now.microseconds))
                }.then { moved in
                    // What `GET /unread` would count now (0 but for threads whose parent is gone).
                    Step.rows(StoreSQL.unreadThreads(of: [userID])).map { unread in
                        ThreadsRead(
                            parentIDs: try moved.map { try $0.text(0) }.sorted(), totals: totals, unreadThreads: unread.count)
                    }
                }
            }
        }
    }

    public func replies(to parentID: String, before beforeID: String?, limit: Int) async throws -> [MessageRecord] {
        try await engine.read {
            Step.row(StoreSQL.messageThere(id: parentID)).then { row -> StoreProgram<[MessageRecord]> in
                guard let row else { throw StoreError.messageNotFound(parentID) }
                let parent = try StoreRows.messageWithChannel(row)
                let before: StoreProgram<Seq> =
                    beforeID.map { id in
                        Step.row(StoreSQL.messageThere(id: id)).map { row in
                            guard let row, case let message = try StoreRows.messageWithChannel(row),
                                message.parentID == parentID
                            else { throw StoreError.messageNotFound(id) }
                            return message.seq
                        }
                    } ?? .done(Seq.max)
                return before.then { before in
                    Step.rows(StoreSQL.replies(to: parentID, before: before, limit: limit)).map { rows in
                        try rows.reversed().map { try StoreRows.message($0, cid: parent.cid) }
                    }
                }
            }
        }
    }

    // MARK: Tasks

    public func saveTask(_ task: StoredTask) async throws {
        let result = try JSONCoding.string(task.result)
        try await engine.writeOne {
            Step.execute(
                StoreSQL.insertTask(id: task.id, status: task.status, result: result, at: task.createdAt.microseconds))
        }
    }

    public func task(id: String) async throws -> StoredTask? {
        try await engine.readOne {
            Step.row(StoreSQL.task(id)).map { row in
                try row.map { row in
                    StoredTask(
                        id: id, status: try row.text(0), result: try StoredJSON.customFields(try row.text(1)),
                        createdAt: Timestamp(microseconds: try row.int(2)),
                        updatedAt: Timestamp(microseconds: try row.int(3)))
                }
            }
        }
    }
}

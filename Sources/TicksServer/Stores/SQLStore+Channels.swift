import TicksProtocol
import TicksReceipts

/// Users, channel types, channels and their members.
extension SQLStore {
    // MARK: Users

    public func upsertUsers(_ users: [User], now: Timestamp) async throws -> [User] {
        // In id order, as every transaction takes users' rows; the member rows whose privacy
        // copy changes before them, in key order, as a move takes those.
        let users = users.sorted { $0.id < $1.id }
        return try await engine.write {
            Fetch.users(users.map(\.id)).then { stored in
                Self.lockMembers(changingSharing: stored, to: users, kept: self.schema.has(.allMembers))
            }.then { _ in
                Step.each(users) { incoming in
                    // Locked in PostgreSQL, so two nodes upserting one user keep its first created_at.
                    Step.row(StoreSQL.userCreatedAt(incoming.id)).then { existing in
                        var user = incoming
                        user.createdAt = try existing.map { Timestamp(microseconds: try $0.int(0)) } ?? now
                        user.updatedAt = now
                        let body = try JSONCoding.string(user)
                        return Step.execute(
                            StoreSQL.upsertUser(
                                id: user.id, body: body, createdAt: user.createdAt!.microseconds, now: now.microseconds)
                        ).then { _ in Self.keepSharing(of: user, kept: self.schema.has(.allMembers)) }.map { user }
                    }
                }
            }
        }
    }

    public func users(ids: [String]) async throws -> [String: User] {
        try await engine.readOne { Fetch.users(ids) }
    }

    // MARK: Channel types

    public func channelTypes() async throws -> [ChannelConfig] {
        try await engine.readOne { Fetch.texts(StoreSQL.channelTypes).map { try $0.map(StoredJSON.config) } }
    }

    public func channelType(named name: String) async throws -> ChannelConfig? {
        try await engine.readOne {
            Fetch.texts(StoreSQL.channelType(name)).map { try $0.first.map(StoredJSON.config) }
        }
    }

    public func createChannelType(_ config: ChannelConfig) async throws -> ChannelConfig {
        let text = try JSONCoding.string(config)
        return try await engine.write {
            Step.rows(StoreSQL.insertChannelType(name: config.name, config: text)).map { inserted in
                guard !inserted.isEmpty else { throw StoreError.channelTypeExists(config.name) }
                return config
            }
        }
    }

    public func updateChannelType(named name: String, _ patch: ChannelTypePatch, now: Timestamp) async throws
        -> ChannelConfig
    {
        try await engine.write {
            Fetch.texts(StoreSQL.channelType(name, lock: true)).then { found in
                guard let text = found.first else { throw StoreError.channelTypeNotFound(name) }
                var config = try StoredJSON.config(text)
                patch.apply(to: &config)
                config.updatedAt = now
                return Step.execute(StoreSQL.updateChannelType(name: name, config: try JSONCoding.string(config)))
                    .map { config }
            }
        }
    }

    // MARK: Channels

    public func channel(_ cid: ChannelID) async throws -> ChannelRecord? {
        try await engine.readOne { Fetch.channel(cid).map { $0?.channel } }
    }

    public func channel(_ cid: ChannelID, member userID: String) async throws
        -> (channel: ChannelRecord, isMember: Bool)?
    {
        try await engine.readOne {
            Step.row(StoreSQL.channel(cid, member: userID)).map { row in
                try row.map { (try StoreRows.channel($0).channel, try $0.bool(13)) }
            }
        }
    }

    public func createChannel(
        _ cid: ChannelID, createdBy: String?, memberIDs: [String], custom: [String: JSONValue],
        now: Timestamp
    ) async throws -> (channel: ChannelRecord, created: Bool) {
        let customText = try JSONCoding.string(custom)
        let named = memberIDs + (createdBy.map { [$0] } ?? [])
        let insert = StoreSQL.insertChannel(
            type: cid.type, id: cid.id, createdBy: createdBy, custom: customText, now: now.microseconds)
        return try await write({
            Fetch.channel(cid).then { existing -> StoreProgram<(channel: ChannelRecord, created: Bool)> in
                if let existing { return .done((existing.channel, false)) }
                return Fetch.texts(StoreSQL.channelType(cid.type)).then { types in
                    guard !types.isEmpty else { throw StoreError.unknownChannelType(cid.type) }
                    return Fetch.users(named)
                }.then { (found: [String: User]) in
                    try StoreRules.requireUsers(named, found: found)
                    return Step.row(insert)
                }.then { inserted -> StoreProgram<Int64?> in
                    if let pk = try inserted?.int(0) { return .done(pk) }
                    // The cid of a soft-deleted channel: what is left of it goes, and the new channel
                    // gets a key of its own, so nothing of the old one can reach its members.
                    return Self.forgetDeletedChannel(cid, plays: self.schema.has(.played)).then { forgotten in
                        forgotten ? Step.row(insert).map { try $0?.int(0) } : .done(nil)
                    }
                }.then { made -> StoreProgram<(channel: ChannelRecord, created: Bool)> in
                    guard let pk = made else {
                        // Two nodes creating the same channel at once: one inserts, the other finds it.
                        return Fetch.channel(cid).map { found in
                            guard let found else { throw StoreError.channelNotFound(cid: cid) }
                            return (found.channel, false)
                        }
                    }
                    return Fetch.channel(pk: pk).then { current -> StoreProgram<[Void]> in
                        Step.each(Set(memberIDs)) { userID in
                            Self.insertMember(
                                userID, channelPK: pk, newest: current.channel.lastSeq, now: now,
                                schema: self.schema)
                        }
                    }.then { _ in Fetch.channel(pk: pk).map { ($0.channel, true) } }
                }
            }
        }, change: { made in made.created ? .channelCreated(made.channel, at: now) : nil })
    }

    /// Removes for good what is left of the soft-deleted channel `cid`
    /// (its row, messages, removed members, receipt log and thread read
    /// states; its members went with the delete), so the cid can be made
    /// again. False when there is no such channel (another node made it again first).
    /// `plays`: its plays too (`v13-played`; an older schema has no such table).
    static func forgetDeletedChannel(_ cid: ChannelID, plays: Bool) -> StoreProgram<Bool> {
        Step.row(StoreSQL.deletedChannel(type: cid.type, id: cid.id)).then { row in
            guard let pk = try row?.int(0) else { return .done(false) }
            let statements =
                [
                    StoreSQL.deleteMoves(of: .channel(pk)), StoreSQL.deleteThreadReads(of: .channel(pk)),
                    StoreSQL.deleteMembers(of: pk), StoreSQL.forgetRemovals(from: pk), StoreSQL.deleteMessages(of: pk),
                    StoreSQL.deleteChannelRow(pk),
                ] + (plays ? [StoreSQL.deletePlays(of: .channel(pk))] : [])
            return Step.each(statements) { Step.execute($0) }.map { _ in true }
        }
    }

    /// R5: a new member has received and read everything already in the channel.
    /// The row takes its user's privacy (`v11-all-members`), and the third
    /// member marks the channel's rows as a group's (`v16-counted-columns`).
    static func insertMember(_ userID: String, channelPK: Int64, newest: Seq, now: Timestamp, schema: SchemaLevel)
        -> StoreProgram<Void>
    {
        let sharing = schema.has(.allMembers)
        let at = now.microseconds
        let logged = newest > 0 ? CursorKind.allCases : []
        return Step.execute(
            StoreSQL.insertMember(
                channelPK: channelPK, userID: userID, cursors: Cursors.joining(newest: newest), now: at, sharing: sharing)
        ).then { _ in
            Step.execute(StoreSQL.countMembers(channelPK, by: 1))
        }.then { _ in
            schema.has(.countedColumns) ? Step.execute(StoreSQL.markInGroup(channelPK)) : .done(())
        }.then { _ in
            Step.each(logged) { kind in Step.execute(StoreSQL.logMove(kind: kind, seq: newest, of: userID, in: channelPK, at: at)) }
        }.map { _ in () }
    }

    public func snapshot(of channel: ChannelRecord, messageLimit: Int, page: MessagePage) async throws
        -> ChannelSnapshot
    {
        try await engine.read {
            Fetch.channel(pk: channel.pk).then { found in
                let (channel, config) = (found.channel, try StoreRules.requireConfig(found))
                return Fetch.messages(page, limit: messageLimit, in: channel).then { messages in
                    Fetch.memberStates(channel.pk).then { members in
                        Fetch.withNextMessageTimes(members, in: channel)
                    }.then { members in
                        let userIDs = StoreRules.userIDs(members: members, messages: messages, createdBy: channel.createdBy)
                        return Fetch.users(userIDs).map { users in
                            ChannelSnapshot(channel: channel, config: config, members: members, messages: messages, users: users)
                        }
                    }
                }
            }
        }
    }

    public func channels(matching filter: ChannelFilter, sort: [ChannelSort], limit: Int, offset: Int) async throws
        -> [ChannelRecord]
    {
        try await engine.readOne {
            Step.rows(StoreSQL.channels(matching: filter, sort: sort, limit: limit, offset: offset)).map { rows in
                try rows.map { try StoreRows.channel($0).channel }
            }
        }
    }

    // MARK: Members

    public func isMember(_ userID: String, of channelPK: Int64) async throws -> Bool {
        try await engine.readOne { Fetch.isMember(userID, of: channelPK) }
    }

    public func member(_ userID: String, of channel: ChannelRecord) async throws -> MemberState? {
        try await engine.readOne { Fetch.memberStates(channel.pk, userID: userID).map(\.first) }
    }

    public func setChannelRole(_ role: ChannelRole, of userIDs: [String], in channel: ChannelRecord, now: Timestamp)
        async throws -> [MemberState]
    {
        try await engine.write {
            // The channel's row first, as every change that takes both does.
            Fetch.channel(pk: channel.pk, lock: true).then { _ in
                Step.each(userIDs.uniqued()) { userID in
                    Step.row(StoreSQL.setRole(role, of: userID, in: channel.pk)).then { changed in
                        changed == nil ? .done([]) : Fetch.memberStates(channel.pk, userID: userID)
                    }
                }
            }.then { states in
                Self.touched(channel, if: states.joined(), now: now, actors: self.actor(nil))
            }
        }
    }

    public func addMembers(_ userIDs: [String], to channel: ChannelRecord, maxMembers: Int, now: Timestamp)
        async throws -> [MemberState]
    {
        let userIDs = userIDs.uniqued()
        return try await write({
            Fetch.users(userIDs).then { found in
                try StoreRules.requireUsers(userIDs, found: found)
                return Fetch.channel(pk: channel.pk, lock: true)
            }.then { current in
                Step.each(userIDs) { userID in Fetch.isMember(userID, of: channel.pk).map { $0 ? nil : userID } }
                    .then { candidates in
                        let newcomers = candidates.compactMap { $0 }
                        try StoreRules.requireRoom(for: newcomers.count, in: current.channel, maxMembers: maxMembers)
                        return Step.each(newcomers) { userID in
                            Self.insertMember(
                                userID, channelPK: channel.pk, newest: current.channel.lastSeq, now: now,
                                schema: self.schema)
                                .then { _ in Fetch.memberStates(channel.pk, userID: userID) }
                        }
                    }
            }.then { states in
                Self.touched(channel, if: states.joined(), now: now, actors: self.actor(nil))
            }
        }, change: { states in .membersAdded(states, to: channel, at: now) })
    }

    public func removeMembers(_ userIDs: [String], from channel: ChannelRecord, now: Timestamp) async throws
        -> [String]
    {
        try await write({
            Fetch.channel(pk: channel.pk, lock: true).then { _ in
                Step.each(userIDs.uniqued()) { userID in
                    Step.row(StoreSQL.deleteMember(userID, from: channel.pk)).then { deleted -> StoreProgram<String?> in
                        guard let deleted else { return .done(nil) }
                        // R6: the read state goes, and with it every receipt it gave, and its unread
                        // (out of their totals, `StoreSQL.unreadSums`).
                        return Step.execute(StoreSQL.countMembers(channel.pk, by: -1))
                            .then { _ in
                                Step.execute(StoreSQL.recordRemoval(of: userID, from: channel.pk, at: now.microseconds))
                            }
                            .then { _ in Step.execute(StoreSQL.deleteMoves(of: .member(userID, in: channel.pk))) }
                            .then { _ in Step.execute(StoreSQL.deleteThreadReads(of: .member(userID, in: channel.pk))) }
                            .then { _ in
                                // R6, R14: their plays go too; back, they play afresh.
                                self.schema.has(.played)
                                    ? Step.execute(StoreSQL.deletePlays(of: .member(userID, in: channel.pk))) : .done(())
                            }
                            .map { userID }
                    }
                }
            }.then { removed in
                Self.forgetOldRemovals(now: now).then { _ in
                    Self.touched(channel, if: removed.compactMap { $0 }, now: now, actors: self.actor(nil))
                }
            }
        }, change: { removed in .membersRemoved(removed, from: channel, at: now) })
    }

    /// Removals older than a sync may ask about are forgotten as new ones are recorded.
    static func forgetOldRemovals(now: Timestamp) -> StoreProgram<Void> {
        let horizon = SyncLimits.horizon.components.seconds * 1_000_000
        return Step.execute(StoreSQL.forgetRemovals(before: now.microseconds - horizon))
    }

    /// `changes`, after marking the channel updated when there are any.
    static func touched<Change>(
        _ channel: ChannelRecord, if changes: some Collection<Change>, now: Timestamp, actors: ChangeActor
    ) -> StoreProgram<[Change]>
    {
        let changes = Array(changes)
        guard !changes.isEmpty else { return .done(changes) }
        return Step.execute(StoreSQL.touch(channel.pk, now: now.microseconds, actors: actors)).map { changes }
    }
}

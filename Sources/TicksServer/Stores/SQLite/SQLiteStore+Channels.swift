import TicksProtocol
import TicksReceipts

/// Users, channel types, channels and their members.
extension SQLiteStore {
    // MARK: Users

    public func upsertUsers(_ users: [User], now: Timestamp) async throws -> [User] {
        try await write { session in
            try users.map { incoming in
                var user = incoming
                let existing = try session.row(StoreSQL.userCreatedAt(user.id))?.int(0)
                user.createdAt = existing.map(Timestamp.init(microseconds:)) ?? now
                user.updatedAt = now
                try session.execute(
                    StoreSQL.upsertUser(
                        id: user.id, body: try JSONCoding.string(user), createdAt: user.createdAt!.microseconds,
                        now: now.microseconds))
                return user
            }
        }
    }

    public func users(ids: [String]) async throws -> [String: User] {
        try read { session in try session.users(ids) }
    }

    // MARK: Channel types

    public func channelTypes() async throws -> [ChannelConfig] {
        try read { session in try session.texts(StoreSQL.channelTypes).map(StoredJSON.config) }
    }

    public func channelType(named name: String) async throws -> ChannelConfig? {
        try readOne { session in try session.row(StoreSQL.channelType(name)).map { try StoredJSON.config(try $0.text(0)) } }
    }

    public func createChannelType(_ config: ChannelConfig) async throws -> ChannelConfig {
        try await write { session in
            let inserted = try session.rows(
                StoreSQL.insertChannelType(name: config.name, config: try JSONCoding.string(config)))
            guard !inserted.isEmpty else { throw StoreError.channelTypeExists(config.name) }
            return config
        }
    }

    public func updateChannelType(named name: String, _ patch: ChannelTypePatch, now: Timestamp) async throws
        -> ChannelConfig
    {
        try await write { session in
            guard let text = try session.row(StoreSQL.channelType(name, lock: true))?.text(0) else {
                throw StoreError.channelTypeNotFound(name)
            }
            var config = try StoredJSON.config(text)
            patch.apply(to: &config)
            config.updatedAt = now
            try session.execute(StoreSQL.updateChannelType(name: name, config: try JSONCoding.string(config)))
            return config
        }
    }

    // MARK: Channels

    public func channel(type: String, id: String) async throws -> ChannelRecord? {
        try readOne { session in try session.channel(type: type, id: id)?.channel }
    }

    public func channel(type: String, id: String, member userID: String) async throws
        -> (channel: ChannelRecord, isMember: Bool)?
    {
        try readOne { session in
            try session.row(StoreSQL.channel(type: type, id: id, member: userID)).map { row in
                (try StoreRows.channel(row).channel, try row.bool(11))
            }
        }
    }

    public func createChannel(
        type: String, id: String, createdBy: String?, memberIDs: [String], custom: [String: JSONValue],
        now: Timestamp
    ) async throws -> (channel: ChannelRecord, created: Bool) {
        try await write { session in
            if let existing = try session.channel(type: type, id: id) { return (existing.channel, false) }
            guard try session.row(StoreSQL.channelType(type)) != nil else { throw StoreError.unknownChannelType(type) }
            let named = memberIDs + (createdBy.map { [$0] } ?? [])
            try StoreRules.requireUsers(named, found: try session.users(named))
            guard
                let pk = try session.row(
                    StoreSQL.insertChannel(
                        type: type, id: id, createdBy: createdBy, custom: try JSONCoding.string(custom),
                        now: now.microseconds))?.int(0)
            else {
                // Made by another request since the look-up above.
                guard let existing = try session.channel(type: type, id: id) else { throw StoreError.channelNotFound }
                return (existing.channel, false)
            }
            for userID in Set(memberIDs) {
                try Self.insertMember(session, userID: userID, channelPK: pk, newest: 0, now: now)
            }
            return (try session.channel(pk: pk).channel, true)
        }
    }

    /// R5: a new member has received and read everything already in the channel.
    static func insertMember(_ session: SQLiteSession, userID: String, channelPK: Int64, newest: Seq, now: Timestamp)
        throws
    {
        try session.execute(
            StoreSQL.insertMember(
                channelPK: channelPK, userID: userID, cursors: Cursors.joining(newest: newest), now: now.microseconds))
        try session.execute(StoreSQL.countMembers(channelPK, by: 1))
        if newest > 0 {
            for kind in CursorKind.allCases {
                try session.execute(
                    StoreSQL.logMove(kind: kind, seq: newest, of: userID, in: channelPK, at: now.microseconds))
            }
        }
    }

    public func snapshot(of channel: ChannelRecord, messageLimit: Int, beforeMessageID: String?) async throws
        -> ChannelSnapshot
    {
        try read { session in
            let found = try session.channel(pk: channel.pk)
            let (channel, config) = (found.channel, try StoreRules.requireConfig(found))
            let before = try beforeMessageID.map { id in
                try StoreRules.requireSeq(try session.seq(of: id, in: channel.pk), of: id, in: channel.cid)
            }
            let messages = try session.rows(
                StoreSQL.messages(in: channel.pk, before: before ?? channel.lastSeq + 1, limit: messageLimit)
            ).map { try StoreRows.message($0, cid: channel.cid) }.reversed()
            let members = try session.memberStates(channel.pk)
            let userIDs = StoreRules.userIDs(members: members, messages: Array(messages), createdBy: channel.createdBy)
            return ChannelSnapshot(
                channel: channel, config: config, members: members, messages: Array(messages),
                users: try session.users(userIDs))
        }
    }

    public func channels(matching filter: ChannelFilter, limit: Int, offset: Int) async throws -> [ChannelRecord] {
        try read { session in
            try session.rows(StoreSQL.channels(matching: filter, limit: limit, offset: offset)).map {
                try StoreRows.channel($0).channel
            }
        }
    }

    // MARK: Members

    public func isMember(_ userID: String, of channelPK: Int64) async throws -> Bool {
        try readOne { session in try session.isMember(userID, of: channelPK) }
    }

    public func member(_ userID: String, of channel: ChannelRecord) async throws -> MemberState? {
        try read { session in try session.memberStates(channel.pk, userID: userID).first }
    }

    public func setChannelRole(_ role: ChannelRole, of userIDs: [String], in channel: ChannelRecord, now: Timestamp)
        async throws -> [MemberState]
    {
        try await write { session in
            var changed: [MemberState] = []
            for userID in userIDs.uniqued() where try session.row(StoreSQL.setRole(role, of: userID, in: channel.pk)) != nil {
                changed += try session.memberStates(channel.pk, userID: userID)
            }
            if !changed.isEmpty { try session.execute(StoreSQL.touch(channel.pk, now: now.microseconds)) }
            return changed
        }
    }

    public func addMembers(_ userIDs: [String], to channel: ChannelRecord, maxMembers: Int, now: Timestamp)
        async throws -> [MemberState]
    {
        try await write { session in
            try StoreRules.requireUsers(userIDs, found: try session.users(userIDs))
            let current = try session.channel(pk: channel.pk).channel
            let newcomers = try userIDs.uniqued().filter { try !session.isMember($0, of: channel.pk) }
            try StoreRules.requireRoom(for: newcomers.count, in: current, maxMembers: maxMembers)
            var added: [MemberState] = []
            for userID in newcomers {
                try Self.insertMember(session, userID: userID, channelPK: channel.pk, newest: current.lastSeq, now: now)
                added += try session.memberStates(channel.pk, userID: userID)
            }
            if !added.isEmpty { try session.execute(StoreSQL.touch(channel.pk, now: now.microseconds)) }
            return added
        }
    }

    public func removeMembers(_ userIDs: [String], from channel: ChannelRecord, now: Timestamp) async throws
        -> [String]
    {
        try await write { session in
            var removed: [String] = []
            for userID in userIDs.uniqued() where try session.row(StoreSQL.deleteMember(userID, from: channel.pk)) != nil {
                try session.execute(StoreSQL.countMembers(channel.pk, by: -1))
                // R6: the read state goes, and with it every receipt it gave.
                try session.execute(StoreSQL.deleteMoves(of: userID, in: channel.pk))
                removed.append(userID)
            }
            if !removed.isEmpty { try session.execute(StoreSQL.touch(channel.pk, now: now.microseconds)) }
            return removed
        }
    }
}

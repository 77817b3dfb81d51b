import Foundation
import Logging
import PostgresNIO
import TicksProtocol
import TicksReceipts

/// The shared store for several nodes: PostgreSQL through postgres-nio.
///
/// Every change runs in one READ COMMITTED transaction that locks the rows it
/// moves, always a channel before its members: a member's cursor moves are
/// serialised by `SELECT … FOR UPDATE` on their member row, so a cursor
/// computed by `ReceiptRules` from what was read is still current when it is
/// written (R2), whichever node the requests reach; a channel's messages are
/// numbered under its row lock, so sequence numbers stay dense. Reads that
/// must agree run in one REPEATABLE READ snapshot. Channel types are joined
/// into the queries that need them rather than cached, so a change made
/// through one node is seen by every other at once.
public final class PostgresStore: TicksStore, ReceiptLogReading {
    let transactions: PostgresTransactions
    let logger: Logger

    /// Applies the migrations and seeds the built-in channel types. `client` must be running.
    public static func open(client: PostgresClient, logger: Logger) async throws -> PostgresStore {
        let store = PostgresStore(transactions: PostgresTransactions(client: client, logger: logger), logger: logger)
        try await PostgresSchema.migrate(store.transactions)
        try await store.transactions.run(.write) { session in
            for config in BuiltInChannelTypes.all(now: .now()) {
                try await session.execute(
                    """
                    INSERT INTO channel_type (name, config) VALUES (\(config.name), \(try JSONCoding.string(config)))
                    ON CONFLICT (name) DO NOTHING
                    """)
            }
        }
        return store
    }

    init(transactions: PostgresTransactions, logger: Logger) {
        self.transactions = transactions
        self.logger = logger
    }

    func write<T: Sendable>(_ body: (PostgresSession) async throws -> T) async throws -> T {
        try await transactions.run(.write, body)
    }

    func read<T: Sendable>(_ body: (PostgresSession) async throws -> T) async throws -> T {
        try await transactions.run(.read, body)
    }

    /// One statement on any pooled connection, outside an explicit transaction.
    func readOne<T: Sendable>(_ body: (PostgresSession) async throws -> T) async throws -> T {
        try await transactions.client.withConnection { connection in
            try await body(PostgresSession(connection: connection, logger: logger))
        }
    }

    // MARK: Users

    public func upsertUsers(_ users: [User], now: Timestamp) async throws -> [User] {
        try await write { session in
            var stored: [User] = []
            for incoming in users {
                var user = incoming
                let existing = try await session.value(
                    "SELECT created_at FROM app_user WHERE id = \(user.id) FOR UPDATE", as: Int64.self)
                user.createdAt = existing.map(Timestamp.init(microseconds:)) ?? now
                user.updatedAt = now
                try await session.execute(
                    """
                    INSERT INTO app_user (id, body, created_at, updated_at)
                    VALUES (\(user.id), \(try JSONCoding.string(user)), \(user.createdAt!.microseconds), \(now.microseconds))
                    ON CONFLICT (id) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at
                    """)
                stored.append(user)
            }
            return stored
        }
    }

    public func users(ids: [String]) async throws -> [String: User] {
        try await readOne { session in try await Self.users(session, ids: ids) }
    }

    static func users(_ session: PostgresSession, ids: some Collection<String>) async throws -> [String: User] {
        guard !ids.isEmpty else { return [:] }
        var result: [String: User] = [:]
        for body in try await session.values("SELECT body FROM app_user WHERE id = ANY(\(Array(Set(ids))))", as: String.self) {
            let user = try StoredJSON.user(body)
            result[user.id] = user
        }
        return result
    }

    static func requireUsers(_ session: PostgresSession, _ ids: [String]) async throws {
        let found = try await users(session, ids: ids)
        if let missing = ids.first(where: { found[$0] == nil }) {
            throw StoreError.unknownUser(missing)
        }
    }

    // MARK: Channel types

    public func channelTypes() async throws -> [ChannelConfig] {
        try await readOne { session in
            try await session.values("SELECT config FROM channel_type ORDER BY name", as: String.self)
                .map { try StoredJSON.config($0) }
        }
    }

    public func channelType(named name: String) async throws -> ChannelConfig? {
        try await readOne { session in try await Self.channelType(session, name) }
    }

    static func channelType(_ session: PostgresSession, _ name: String) async throws -> ChannelConfig? {
        try await session.value("SELECT config FROM channel_type WHERE name = \(name)", as: String.self)
            .map(StoredJSON.config)
    }

    public func createChannelType(_ config: ChannelConfig) async throws -> ChannelConfig {
        try await write { session in
            let inserted = try await session.values(
                """
                INSERT INTO channel_type (name, config) VALUES (\(config.name), \(try JSONCoding.string(config)))
                ON CONFLICT (name) DO NOTHING RETURNING name
                """, as: String.self)
            guard !inserted.isEmpty else { throw StoreError.channelTypeExists(config.name) }
            return config
        }
    }

    public func updateChannelType(named name: String, _ patch: ChannelTypePatch, now: Timestamp) async throws
        -> ChannelConfig
    {
        try await write { session in
            guard
                let text = try await session.value(
                    "SELECT config FROM channel_type WHERE name = \(name) FOR UPDATE", as: String.self)
            else { throw StoreError.channelTypeNotFound(name) }
            var config = try StoredJSON.config(text)
            patch.apply(to: &config)
            config.updatedAt = now
            try await session.execute(
                "UPDATE channel_type SET config = \(try JSONCoding.string(config)) WHERE name = \(name)")
            return config
        }
    }

    // MARK: Channels

    /// The columns `channel(from:)` reads, with the channel type's config as `config`.
    static let channelColumns = """
        c.pk, c.type, c.id, c.created_by, c.custom, c.last_seq, c.last_message_at, c.member_count, c.created_at,
        c.updated_at, t.config
        """

    static func channel(from row: NamedRow) throws -> (channel: ChannelRecord, config: ChannelConfig?) {
        let channel = ChannelRecord(
            pk: try row["pk"], type: try row["type"], id: try row["id"], createdBy: try row["created_by"],
            custom: try StoredJSON.customFields(try row["custom"]), lastSeq: try row["last_seq"],
            lastMessageAt: (try row["last_message_at"] as Int64?).map(Timestamp.init(microseconds:)),
            memberCount: Int(try row["member_count"] as Int64),
            createdAt: Timestamp(microseconds: try row["created_at"]),
            updatedAt: Timestamp(microseconds: try row["updated_at"]))
        return (channel, try (try row["config"] as String?).map(StoredJSON.config))
    }

    static func channel(_ session: PostgresSession, type: String, id: String) async throws
        -> (channel: ChannelRecord, config: ChannelConfig?)?
    {
        try await session.row(
            """
            SELECT \(unescaped: channelColumns) FROM channel c LEFT JOIN channel_type t ON t.name = c.type
            WHERE c.type = \(type) AND c.id = \(id)
            """
        ).map(channel(from:))
    }

    static func channel(_ session: PostgresSession, pk: Int64, lock: Bool = false) async throws
        -> (channel: ChannelRecord, config: ChannelConfig?)
    {
        let forUpdate = lock ? "FOR UPDATE OF c" : ""
        guard
            let row = try await session.row(
                """
                SELECT \(unescaped: channelColumns) FROM channel c LEFT JOIN channel_type t ON t.name = c.type
                WHERE c.pk = \(pk) \(unescaped: forUpdate)
                """)
        else { throw StoreError.channelNotFound }
        return try channel(from: row)
    }

    static func requireConfig(_ found: (channel: ChannelRecord, config: ChannelConfig?)) throws -> ChannelConfig {
        guard let config = found.config else {
            throw StoreError.channelTypeNotFound(found.channel.type)
        }
        return config
    }

    public func channel(type: String, id: String) async throws -> ChannelRecord? {
        try await readOne { session in try await Self.channel(session, type: type, id: id)?.channel }
    }

    public func channel(type: String, id: String, member userID: String) async throws
        -> (channel: ChannelRecord, isMember: Bool)?
    {
        try await readOne { session in
            try await session.row(
                """
                SELECT \(unescaped: Self.channelColumns),
                  EXISTS (SELECT 1 FROM member m WHERE m.channel_pk = c.pk AND m.user_id = \(userID)) AS is_member
                FROM channel c LEFT JOIN channel_type t ON t.name = c.type WHERE c.type = \(type) AND c.id = \(id)
                """
            ).map { row in (try Self.channel(from: row).channel, try row["is_member"]) }
        }
    }

    public func createChannel(
        type: String, id: String, createdBy: String?, memberIDs: [String], custom: [String: JSONValue],
        now: Timestamp
    ) async throws -> (channel: ChannelRecord, created: Bool) {
        try await write { session in
            if let existing = try await Self.channel(session, type: type, id: id) { return (existing.channel, false) }
            guard try await Self.channelType(session, type) != nil else {
                throw StoreError.unknownChannelType(type)
            }
            try await Self.requireUsers(session, memberIDs + (createdBy.map { [$0] } ?? []))
            // Two nodes creating the same channel at once: one inserts, the other finds it.
            guard
                let pk = try await session.value(
                    """
                    INSERT INTO channel (type, id, created_by, custom, created_at, updated_at)
                    VALUES (\(type), \(id), \(createdBy), \(try JSONCoding.string(custom)), \(now.microseconds), \(now.microseconds))
                    ON CONFLICT (type, id) DO NOTHING RETURNING pk
                    """, as: Int64.self)
            else {
                return (try await Self.channel(session, type: type, id: id)!.channel, false)
            }
            for userID in Set(memberIDs) {
                try await Self.insertMember(session, userID: userID, channelPK: pk, newest: 0, now: now)
            }
            return (try await Self.channel(session, pk: pk).channel, true)
        }
    }

    /// R5: a new member has received and read everything already in the channel.
    static func insertMember(_ session: PostgresSession, userID: String, channelPK: Int64, newest: Seq, now: Timestamp)
        async throws
    {
        let cursors = Cursors.joining(newest: newest)
        try await session.execute(
            """
            INSERT INTO member (channel_pk, user_id, read_seq, read_at, delivered_seq, delivered_at, created_at)
            VALUES (\(channelPK), \(userID), \(cursors.read), \(now.microseconds), \(cursors.delivered),
                    \(now.microseconds), \(now.microseconds))
            """)
        try await session.execute("UPDATE channel SET member_count = member_count + 1 WHERE pk = \(channelPK)")
        if newest > 0 {
            for kind in CursorKind.allCases {
                try await logMove(session, channelPK: channelPK, userID: userID, kind: kind, seq: newest, at: now)
            }
        }
    }

    static func logMove(
        _ session: PostgresSession, channelPK: Int64, userID: String, kind: CursorKind, seq: Seq, at: Timestamp
    ) async throws {
        try await session.execute(
            """
            INSERT INTO cursor_move (channel_pk, user_id, kind, seq, at)
            VALUES (\(channelPK), \(userID), \(Int16(kind.rawValue)), \(seq), \(at.microseconds))
            """)
    }

    public func snapshot(of channel: ChannelRecord, messageLimit: Int, beforeMessageID: String?) async throws
        -> ChannelSnapshot
    {
        try await read { session in
            let found = try await Self.channel(session, pk: channel.pk)
            let (channel, config) = (found.channel, try Self.requireConfig(found))
            var beforeSeq = channel.lastSeq + 1
            if let beforeMessageID {
                guard let seq = try await Self.seq(session, of: beforeMessageID, in: channel.pk) else {
                    throw StoreError.messageNotInChannel(messageID: beforeMessageID, cid: channel.cid)
                }
                beforeSeq = seq
            }
            let messages = try await session.rows(
                """
                SELECT channel_pk, seq, id, user_id, text, custom, created_at FROM message
                WHERE channel_pk = \(channel.pk) AND seq < \(beforeSeq) ORDER BY seq DESC LIMIT \(Int64(messageLimit))
                """
            ).map { try Self.message(from: $0, cid: channel.cid) }.reversed()
            let members = try await Self.memberStates(session, channelPK: channel.pk)
            var userIDs = Set(members.map(\.userID)).union(messages.map(\.userID))
            if let createdBy = channel.createdBy { userIDs.insert(createdBy) }
            return ChannelSnapshot(
                channel: channel, config: config, members: members, messages: Array(messages),
                users: try await Self.users(session, ids: userIDs))
        }
    }

    /// Every member's read state with the ids its cursors point at and its unread count (R7).
    static func memberStates(_ session: PostgresSession, channelPK: Int64, userID: String? = nil) async throws
        -> [MemberState]
    {
        let query: PostgresQuery = """
            SELECT \(unescaped: StoreSQL.memberStateColumns)
            FROM member m JOIN channel c ON c.pk = m.channel_pk
            WHERE m.channel_pk = \(channelPK) AND (\(userID)::text IS NULL OR m.user_id = \(userID))
            ORDER BY m.created_at, m.user_id
            """
        return try await session.rows(query).map { row in
            MemberState(
                userID: try row["user_id"], joinedAt: Timestamp(microseconds: try row["created_at"]),
                channelRole: ChannelRole(rawValue: try row["channel_role"]) ?? .member,
                cursors: Cursors(read: try row["read_seq"], delivered: try row["delivered_seq"]),
                readAt: Timestamp(microseconds: try row["read_at"]),
                deliveredAt: Timestamp(microseconds: try row["delivered_at"]),
                lastReadMessageID: try row["read_id"], lastDeliveredMessageID: try row["delivered_id"],
                unread: Int(try row["unread"] as Int64), firstUnreadMessageID: try row["first_unread_id"])
        }
    }

    static func memberState(_ session: PostgresSession, channelPK: Int64, userID: String) async throws -> MemberState? {
        try await memberStates(session, channelPK: channelPK, userID: userID).first
    }

    public func channels(matching filter: ChannelFilter, limit: Int, offset: Int) async throws -> [ChannelRecord] {
        try await readOne { session in
            // Each filter is a bound array or NULL (no condition).
            try await session.rows(
                """
                SELECT \(unescaped: Self.channelColumns) FROM channel c LEFT JOIN channel_type t ON t.name = c.type
                WHERE (\(filter.requiredMember)::text IS NULL
                       OR c.pk IN (SELECT channel_pk FROM member WHERE user_id = \(filter.requiredMember)))
                  AND (\(filter.memberIn)::text[] IS NULL
                       OR c.pk IN (SELECT channel_pk FROM member WHERE user_id = ANY(\(filter.memberIn))))
                  AND (\(filter.cids)::text[] IS NULL OR (c.type || ':' || c.id) = ANY(\(filter.cids)))
                  AND (\(filter.types)::text[] IS NULL OR c.type = ANY(\(filter.types)))
                  AND (\(filter.ids)::text[] IS NULL OR c.id = ANY(\(filter.ids)))
                ORDER BY COALESCE(c.last_message_at, c.created_at) DESC, c.pk DESC
                LIMIT \(Int64(limit)) OFFSET \(Int64(offset))
                """
            ).map { try Self.channel(from: $0).channel }
        }
    }

    public func isMember(_ userID: String, of channelPK: Int64) async throws -> Bool {
        try await readOne { session in try await Self.isMember(session, userID, channelPK) }
    }

    static func isMember(_ session: PostgresSession, _ userID: String, _ channelPK: Int64) async throws -> Bool {
        try await session.value(
            "SELECT EXISTS (SELECT 1 FROM member WHERE channel_pk = \(channelPK) AND user_id = \(userID))",
            as: Bool.self) ?? false
    }

    public func member(_ userID: String, of channel: ChannelRecord) async throws -> MemberState? {
        try await readOne { session in try await Self.memberState(session, channelPK: channel.pk, userID: userID) }
    }

    public func setChannelRole(_ role: ChannelRole, of userIDs: [String], in channel: ChannelRecord, now: Timestamp)
        async throws -> [MemberState]
    {
        try await write { session in
            // The channel's row first, as every change that takes both does.
            _ = try await Self.channel(session, pk: channel.pk, lock: true)
            var changed: [MemberState] = []
            for userID in userIDs.uniqued() {
                let updated = try await session.values(
                    """
                    UPDATE member SET channel_role = \(role.rawValue)
                    WHERE channel_pk = \(channel.pk) AND user_id = \(userID) AND channel_role <> \(role.rawValue)
                    RETURNING user_id
                    """, as: String.self)
                guard !updated.isEmpty,
                    let state = try await Self.memberState(session, channelPK: channel.pk, userID: userID)
                else { continue }
                changed.append(state)
            }
            if !changed.isEmpty { try await Self.touch(session, channel.pk, now) }
            return changed
        }
    }

    public func addMembers(_ userIDs: [String], to channel: ChannelRecord, maxMembers: Int, now: Timestamp)
        async throws -> [MemberState]
    {
        try await write { session in
            try await Self.requireUsers(session, userIDs)
            let current = try await Self.channel(session, pk: channel.pk, lock: true).channel
            var newcomers: [String] = []
            for userID in userIDs.uniqued() where try await !Self.isMember(session, userID, channel.pk) {
                newcomers.append(userID)
            }
            try StoreRules.requireRoom(for: newcomers.count, in: current, maxMembers: maxMembers)
            var added: [MemberState] = []
            for userID in newcomers {
                try await Self.insertMember(
                    session, userID: userID, channelPK: channel.pk, newest: current.lastSeq, now: now)
                if let state = try await Self.memberState(session, channelPK: channel.pk, userID: userID) {
                    added.append(state)
                }
            }
            if !added.isEmpty { try await Self.touch(session, channel.pk, now) }
            return added
        }
    }

    public func removeMembers(_ userIDs: [String], from channel: ChannelRecord, now: Timestamp) async throws
        -> [String]
    {
        try await write { session in
            // The channel's row first, as every change that takes both does.
            _ = try await Self.channel(session, pk: channel.pk, lock: true)
            var removed: [String] = []
            for userID in userIDs.uniqued() {
                let deleted = try await session.values(
                    "DELETE FROM member WHERE channel_pk = \(channel.pk) AND user_id = \(userID) RETURNING user_id",
                    as: String.self)
                guard !deleted.isEmpty else { continue }
                try await session.execute("UPDATE channel SET member_count = member_count - 1 WHERE pk = \(channel.pk)")
                // R6: the read state goes, and with it every receipt it gave.
                try await session.execute(
                    "DELETE FROM cursor_move WHERE channel_pk = \(channel.pk) AND user_id = \(userID)")
                removed.append(userID)
            }
            if !removed.isEmpty { try await Self.touch(session, channel.pk, now) }
            return removed
        }
    }

    static func touch(_ session: PostgresSession, _ channelPK: Int64, _ now: Timestamp) async throws {
        try await session.execute("UPDATE channel SET updated_at = \(now.microseconds) WHERE pk = \(channelPK)")
    }

    // MARK: Messages

    static func message(from row: NamedRow, cid: String) throws -> MessageRecord {
        MessageRecord(
            id: try row["id"], channelPK: try row["channel_pk"], cid: cid, seq: try row["seq"],
            userID: try row["user_id"], text: try row["text"],
            custom: try StoredJSON.customFields(try row["custom"]),
            createdAt: Timestamp(microseconds: try row["created_at"]))
    }

    static func seq(_ session: PostgresSession, of messageID: String, in channelPK: Int64) async throws -> Seq? {
        try await session.value(
            "SELECT seq FROM message WHERE id = \(messageID) AND channel_pk = \(channelPK)", as: Int64.self)
    }

    public func sendMessage(_ new: NewMessage, to channel: ChannelRecord, now: Timestamp) async throws
        -> SendOutcome
    {
        do {
            return try await write { session in
                // The channel's row lock numbers its messages one at a time, and
                // a retried send with the same id waits here for the first (R11).
                let current = try await Self.channel(session, pk: channel.pk, lock: true).channel
                if let stored = try await Self.storedMessage(session, id: new.id, channel: channel) {
                    return SendOutcome(message: stored, created: false, recipients: [])
                }
                guard try await Self.isMember(session, new.userID, channel.pk) else {
                    throw StoreError.notMember(userID: new.userID, cid: channel.cid)
                }
                // Messages are ordered the same by seq and by created_at (strictly increasing).
                let createdAt = Timestamp(
                    microseconds: max(now.microseconds, (current.lastMessageAt?.microseconds ?? 0) + 1))
                let seq = current.lastSeq + 1
                try await session.execute(
                    """
                    UPDATE channel SET last_seq = \(seq), last_message_at = \(createdAt.microseconds),
                      updated_at = \(createdAt.microseconds)
                    WHERE pk = \(channel.pk)
                    """)
                try await session.execute(
                    """
                    INSERT INTO message (channel_pk, seq, id, user_id, text, custom, created_at)
                    VALUES (\(channel.pk), \(seq), \(new.id), \(new.userID), \(new.text),
                            \(try JSONCoding.string(new.custom)), \(createdAt.microseconds))
                    """)
                // R4: the author has read their own message, and everything before it.
                _ = try await Self.applyRead(
                    session, channelPK: channel.pk, userID: new.userID, target: seq, newest: seq, now: createdAt)
                let message = MessageRecord(
                    id: new.id, channelPK: channel.pk, cid: channel.cid, seq: seq, userID: new.userID,
                    text: new.text, custom: new.custom, createdAt: createdAt)
                let totals = try await Self.unreadTotals(session, ofMembersOf: channel.pk)
                let recipients = try await Self.memberStates(session, channelPK: channel.pk).map { state in
                    RecipientUnread(
                        userID: state.userID, channelUnread: state.unread,
                        totals: totals[state.userID] ?? UnreadTotals(messages: 0, channels: 0))
                }
                return SendOutcome(message: message, created: true, recipients: recipients)
            }
        } catch let error where PostgresTransactions.isUniqueViolation(error) {
            // The id was taken in another channel at the same moment.
            throw StoreError.messageIDInOtherChannel(new.id)
        }
    }

    /// R11: the message already stored under `id`, if it is in `channel`.
    static func storedMessage(_ session: PostgresSession, id: String, channel: ChannelRecord) async throws
        -> MessageRecord?
    {
        guard
            let row = try await session.row(
                "SELECT channel_pk, seq, id, user_id, text, custom, created_at FROM message WHERE id = \(id)")
        else { return nil }
        let stored = try message(from: row, cid: channel.cid)
        guard stored.channelPK == channel.pk else {
            throw StoreError.messageIDInOtherChannel(id)
        }
        return stored
    }

    public func message(id: String) async throws -> MessageRecord? {
        try await readOne { session in
            try await session.row(
                """
                SELECT g.channel_pk, g.seq, g.id, g.user_id, g.text, g.custom, g.created_at,
                  c.type || ':' || c.id AS cid
                FROM message g JOIN channel c ON c.pk = g.channel_pk WHERE g.id = \(id)
                """
            ).map { try Self.message(from: $0, cid: try $0["cid"]) }
        }
    }

    // MARK: Cursors

    /// The member's cursors, locked until the transaction ends: concurrent
    /// moves of the same member, through any node, take turns (R2).
    static func lockedCursors(_ session: PostgresSession, channelPK: Int64, userID: String) async throws -> Cursors? {
        try await session.row(
            """
            SELECT read_seq, delivered_seq FROM member
            WHERE channel_pk = \(channelPK) AND user_id = \(userID) FOR UPDATE
            """
        ).map { Cursors(read: try $0["read_seq"], delivered: try $0["delivered_seq"]) }
    }

    /// Applies `update` with statements that only ever move a cursor the way the
    /// rule moved it, and logs each move.
    static func write(
        _ session: PostgresSession, _ update: CursorUpdate, channelPK: Int64, userID: String, now: Timestamp
    ) async throws {
        for move in update.moves {
            let column = move.kind == .read ? "read" : "delivered"
            let comparison = move.to > move.from ? "<" : ">"
            try await session.execute(
                """
                UPDATE member SET \(unescaped: column)_seq = \(move.to), \(unescaped: column)_at = \(now.microseconds)
                WHERE channel_pk = \(channelPK) AND user_id = \(userID)
                  AND \(unescaped: column)_seq \(unescaped: comparison) \(move.to)
                """)
            try await logMove(session, channelPK: channelPK, userID: userID, kind: move.kind, seq: move.to, at: now)
        }
    }

    static func applyRead(
        _ session: PostgresSession, channelPK: Int64, userID: String, target: Seq, newest: Seq, now: Timestamp
    ) async throws -> CursorUpdate {
        guard let current = try await lockedCursors(session, channelPK: channelPK, userID: userID) else {
            throw StoreError.notMember(userID: userID, cid: nil)
        }
        let update = ReceiptRules.markRead(current, upTo: target, newest: newest)
        try await write(session, update, channelPK: channelPK, userID: userID, now: now)
        return update
    }

    /// What a cursor move's events and answer need.
    static func outcome(
        _ session: PostgresSession, channel: ChannelRecord, config: ChannelConfig, userID: String,
        update: CursorUpdate, now: Timestamp, audience: ReceiptAudience?
    ) async throws -> CursorOutcome {
        guard let state = try await memberState(session, channelPK: channel.pk, userID: userID) else {
            throw StoreError.notMember(userID: userID, cid: channel.cid)
        }
        let reader = try await users(session, ids: [userID])[userID] ?? User(id: userID)
        var recipients: [String] = []
        if let audience, let source = audience.source(of: update, in: channel) {
            recipients = audience.recipients(
                try await ids(session, source, channelPK: channel.pk), from: source, reader: userID)
        }
        return CursorOutcome(
            channel: channel, config: config, reader: reader, update: update, state: state,
            totals: try await unreadTotals(session, userID), at: now, recipients: recipients)
    }

    /// The ids a `ReceiptAudience.Source` reads.
    static func ids(_ session: PostgresSession, _ source: ReceiptAudience.Source, channelPK: Int64) async throws
        -> [String]
    {
        switch source {
        case .members:
            try await session.values("SELECT user_id FROM member WHERE channel_pk = \(channelPK)", as: String.self)
        case .authors(let after, let through):
            try await session.values(
                """
                SELECT DISTINCT user_id FROM message
                WHERE channel_pk = \(channelPK) AND seq > \(after) AND seq <= \(through)
                """, as: String.self)
        }
    }

    public func markRead(
        _ userID: String, in channel: ChannelRecord, upTo messageID: String?, audience: ReceiptAudience, now: Timestamp
    ) async throws -> CursorOutcome {
        try await write { session in
            let found = try await Self.channel(session, pk: channel.pk)
            let current = found.channel
            var target = current.lastSeq
            if let messageID {
                guard let seq = try await Self.seq(session, of: messageID, in: channel.pk) else {
                    throw StoreError.messageNotInChannel(messageID: messageID, cid: channel.cid)
                }
                target = seq
            }
            let update = try await Self.applyRead(
                session, channelPK: channel.pk, userID: userID, target: target, newest: current.lastSeq, now: now)
            return try await Self.outcome(
                session, channel: current, config: try Self.requireConfig(found), userID: userID, update: update,
                now: now, audience: audience)
        }
    }

    public func markUnread(_ userID: String, in channel: ChannelRecord, from messageID: String, now: Timestamp)
        async throws -> CursorOutcome
    {
        try await write { session in
            let found = try await Self.channel(session, pk: channel.pk)
            guard let seq = try await Self.seq(session, of: messageID, in: channel.pk) else {
                throw StoreError.messageNotInChannel(messageID: messageID, cid: channel.cid)
            }
            guard let current = try await Self.lockedCursors(session, channelPK: channel.pk, userID: userID) else {
                throw StoreError.notMember(userID: userID, cid: channel.cid)
            }
            let update = ReceiptRules.markUnread(current, from: seq)
            try await Self.write(session, update, channelPK: channel.pk, userID: userID, now: now)
            return try await Self.outcome(
                session, channel: found.channel, config: try Self.requireConfig(found), userID: userID,
                update: update, now: now, audience: nil)
        }
    }

    public func markAllRead(_ userID: String, audience: ReceiptAudience, now: Timestamp) async throws
        -> [CursorOutcome]
    {
        try await write { session in
            // Channel order, the same in every transaction that locks several members.
            let channels = try await session.rows(
                """
                SELECT \(unescaped: Self.channelColumns) FROM member m JOIN channel c ON c.pk = m.channel_pk
                LEFT JOIN channel_type t ON t.name = c.type WHERE m.user_id = \(userID) ORDER BY c.pk
                """
            ).map(Self.channel(from:))
            var outcomes: [CursorOutcome] = []
            for found in channels {
                let newest = found.channel.lastSeq
                let update = try await Self.applyRead(
                    session, channelPK: found.channel.pk, userID: userID, target: newest, newest: newest, now: now)
                if update.changed {
                    outcomes.append(
                        try await Self.outcome(
                            session, channel: found.channel, config: try Self.requireConfig(found), userID: userID,
                            update: update, now: now, audience: audience))
                }
            }
            return outcomes
        }
    }

    public func markDelivered(
        _ userID: String, _ targets: [DeliveredTarget], audience: ReceiptAudience, now: Timestamp
    ) async throws -> [CursorOutcome] {
        try await write { session in
            // Resolve and check every entry first: all or nothing.
            var best: [Int64: (seq: Seq, channel: ChannelRecord, config: ChannelConfig)] = [:]
            for target in targets {
                guard let found = try await Self.channel(session, type: target.channel.type, id: target.channel.id)
                else {
                    throw StoreError.unknownChannel("\(target.channel)")
                }
                let channel = found.channel
                guard let seq = try await Self.seq(session, of: target.messageID, in: channel.pk) else {
                    throw StoreError.messageNotInChannel(messageID: target.messageID, cid: "\(target.channel)")
                }
                guard try await Self.isMember(session, userID, channel.pk) else {
                    throw StoreError.notMember(userID: userID, cid: "\(target.channel)")
                }
                // R9: channel types without delivery events accept and ignore it.
                let config = try Self.requireConfig(found)
                guard config.deliveryEvents else { continue }
                best[channel.pk] = (max(best[channel.pk]?.seq ?? 0, seq), channel, config)
            }
            var outcomes: [CursorOutcome] = []
            // Channel order, the same in every transaction that locks several members.
            for pk in best.keys.sorted() {
                guard let target = best[pk],
                    let current = try await Self.lockedCursors(session, channelPK: pk, userID: userID)
                else { continue }
                let update = ReceiptRules.markDelivered(current, upTo: target.seq, newest: target.channel.lastSeq)
                guard update.changed else { continue }
                try await Self.write(session, update, channelPK: pk, userID: userID, now: now)
                outcomes.append(
                    try await Self.outcome(
                        session, channel: target.channel, config: target.config, userID: userID, update: update,
                        now: now, audience: audience))
            }
            return outcomes
        }
    }

    public func unreadTotals(of userID: String) async throws -> UnreadTotals {
        try await readOne { session in try await Self.unreadTotals(session, userID) }
    }

    /// R7 summed over every channel of the user: one indexed look-up per channel.
    static func unreadTotals(_ session: PostgresSession, _ userID: String) async throws -> UnreadTotals {
        let row = try await session.row(
            """
            SELECT COALESCE(SUM(unread), 0)::bigint AS messages, COUNT(*) FILTER (WHERE unread > 0) AS channels
            FROM (SELECT \(unescaped: StoreSQL.unread) AS unread
                  FROM member m JOIN channel c ON c.pk = m.channel_pk WHERE m.user_id = \(userID)) u
            """)
        return UnreadTotals(
            messages: Int(try row?["messages"] as Int64? ?? 0), channels: Int(try row?["channels"] as Int64? ?? 0))
    }

    /// `unreadTotals` for every member of a channel in one query (for `message.new`).
    static func unreadTotals(_ session: PostgresSession, ofMembersOf channelPK: Int64) async throws
        -> [String: UnreadTotals]
    {
        var totals: [String: UnreadTotals] = [:]
        for row in try await session.rows(
            """
            SELECT user_id, COALESCE(SUM(unread), 0)::bigint AS messages,
              COUNT(*) FILTER (WHERE unread > 0) AS channels
            FROM (SELECT m.user_id, \(unescaped: StoreSQL.unread) AS unread
                  FROM member m JOIN channel c ON c.pk = m.channel_pk
                  WHERE m.user_id IN (SELECT user_id FROM member WHERE channel_pk = \(channelPK))) u
            GROUP BY user_id
            """)
        {
            totals[try row["user_id"]] = UnreadTotals(
                messages: Int(try row["messages"] as Int64), channels: Int(try row["channels"] as Int64))
        }
        return totals
    }

    // MARK: Receipts

    public func receipts(forMessage id: String) async throws -> MessageReceipts? {
        try await read { session in
            guard
                let row = try await session.row(
                    "SELECT channel_pk, seq, id, user_id, text, custom, created_at FROM message WHERE id = \(id)")
            else { return nil }
            let found = try await Self.channel(session, pk: try row["channel_pk"])
            let channel = found.channel
            let message = try Self.message(from: row, cid: channel.cid)
            guard let config = found.config else { return nil }
            let read = try await Self.reachedTimes(session, channelPK: channel.pk, seq: message.seq, kind: .read)
            let delivered = try await Self.reachedTimes(
                session, channelPK: channel.pk, seq: message.seq, kind: .delivered)
            let entries = MessageReceipts.entries(read: read, delivered: delivered, author: message.userID)
            return MessageReceipts(
                message: message, channel: channel, config: config, entries: entries,
                users: try await Self.users(session, ids: entries.map(\.userID)))
        }
    }

    /// For each member whose cursor of `kind` is at or past `seq` now, when it
    /// got there: `ReceiptRules.reachedAt` as one query over the receipt log.
    static func reachedTimes(_ session: PostgresSession, channelPK: Int64, seq: Seq, kind: CursorKind) async throws
        -> [String: Int64]
    {
        let column = kind == .read ? "read_seq" : "delivered_seq"
        let kindValue = Int16(kind.rawValue)
        var result: [String: Int64] = [:]
        for row in try await session.rows(
            """
            SELECT m.user_id,
              (SELECT l.at FROM cursor_move l
                WHERE l.channel_pk = m.channel_pk AND l.user_id = m.user_id AND l.kind = \(kindValue)
                  AND l.seq >= \(seq)
                  AND l.id > COALESCE((SELECT MAX(b.id) FROM cursor_move b
                                        WHERE b.channel_pk = m.channel_pk AND b.user_id = m.user_id
                                          AND b.kind = \(kindValue) AND b.seq < \(seq)), 0)
                ORDER BY l.id LIMIT 1) AS at
            FROM member m WHERE m.channel_pk = \(channelPK) AND m.\(unescaped: column) >= \(seq)
            """)
        {
            if let at: Int64 = try row["at"] { result[try row["user_id"]] = at }
        }
        return result
    }

    // MARK: Operations

    func loggedMoves(channelPK: Int64, userID: String, kind: CursorKind) async throws -> [LoggedMove] {
        try await readOne { session in
            try await session.rows(
                """
                SELECT id, seq, at FROM cursor_move
                WHERE channel_pk = \(channelPK) AND user_id = \(userID) AND kind = \(Int16(kind.rawValue)) ORDER BY id
                """
            ).map { LoggedMove(id: try $0["id"], kind: kind, seq: try $0["seq"], at: try $0["at"]) }
        }
    }

    public func storageBytes() async throws -> Int64 {
        try await readOne { session in
            try await session.value("SELECT pg_database_size(current_database())", as: Int64.self) ?? 0
        }
    }
}

import Foundation
import GRDB
import Logging
import TicksProtocol
import TicksReceipts

/// The embedded store: SQLite through GRDB. Writes go through GRDB's single
/// writer, grouped by `GroupCommitter` (concurrent calls share a transaction,
/// each in a savepoint of its own), so each call sees and changes a consistent
/// state; cursor UPDATEs are guarded as well (`WHERE read_seq < :new`), so they
/// would stay monotonic (R2) even without that serialisation.
public final class SQLiteStore: TicksStore, ReceiptLogReading {
    let writer: any DatabaseWriter
    /// Every write goes through here: concurrent writes share a commit.
    let committer: GroupCommitter
    let types = ChannelTypeCache()
    /// On-disk databases only; stops with the store.
    let checkpointer: WALCheckpointer?

    /// When the write-ahead log is copied back into the database (`WALCheckpointer`).
    public struct CheckpointPolicy: Sendable {
        public var interval: Duration = .milliseconds(250)
        /// A log longer than this is caught up on the writer, so it starts afresh.
        public var restartFrames = 4096

        public init() {}
    }

    /// Opens (creating if needed) the database file at `path`, in WAL mode.
    public static func open(path: String, checkpoints: CheckpointPolicy = .init()) throws -> SQLiteStore {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            // R12: a commit is on disk before the answer goes out.
            try db.execute(sql: "PRAGMA synchronous = FULL")
            // Readers map the file instead of copying each page with a read()
            // call: every write invalidates their page caches, so hot reads
            // would otherwise go back to the kernel all the time.
            try db.execute(sql: "PRAGMA mmap_size = 268435456")
            // Checkpoints run beside the writer, never in its commits (WALCheckpointer),
            // and a log that grew in a burst is cut back once it is reset.
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            try db.execute(sql: "PRAGMA journal_size_limit = 67108864")
        }
        let pool = try DatabasePool(path: path, configuration: configuration)
        let checkpointer = try WALCheckpointer(
            path: path, configuration: configuration, interval: checkpoints.interval,
            restartFrames: checkpoints.restartFrames,
            logger: Logger(label: "ticks.sqlite")
        ) { [weak pool] in
            _ = try await pool?.writeWithoutTransaction { db in try db.checkpoint(.passive) }
        }
        return try SQLiteStore(writer: pool, checkpointer: checkpointer)
    }

    /// A private in-memory database (tests).
    public static func inMemory() throws -> SQLiteStore {
        try SQLiteStore(writer: DatabaseQueue())
    }

    /// Runs `body` in a read transaction on the calling thread.
    ///
    /// Deliberately synchronous: in WAL mode a reader never waits for the
    /// writer, and every read here is a few indexed look-ups (tens of
    /// microseconds) — less than the two thread switches an asynchronous hop to
    /// GRDB's reader queue costs. At most one read runs per cooperative thread,
    /// fewer than the pool's readers, so none waits for a free connection.
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        try writer.read(body)
    }

    /// Runs `body`, one SELECT, outside an explicit transaction: a single
    /// statement reads one consistent snapshot anyway, and this saves the
    /// BEGIN and COMMIT that cost as much as the look-up itself.
    func readOne<T>(_ body: (Database) throws -> T) throws -> T {
        try writer.unsafeRead(body)
    }

    init(writer: any DatabaseWriter, checkpointer: WALCheckpointer? = nil) throws {
        self.writer = writer
        self.checkpointer = checkpointer
        self.committer = GroupCommitter(writer: writer)
        try SQLiteSchema.migrator.migrate(writer)
        try writer.write { db in try Self.seedChannelTypes(db) }
    }

    static func seedChannelTypes(_ db: Database) throws {
        for config in BuiltInChannelTypes.all(now: .now()) {
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO channel_type (name, config) VALUES (?, ?)").execute(
                arguments: [config.name, try JSONCoding.string(config)])
        }
    }

    // MARK: Users

    public func upsertUsers(_ users: [User], now: Timestamp) async throws -> [User] {
        try await committer.write { db in
            try users.map { incoming in
                var user = incoming
                let existing = try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT created_at FROM user WHERE id = ?"), arguments: [user.id])
                user.createdAt = existing.map { Timestamp(microseconds: $0["created_at"]) } ?? now
                user.updatedAt = now
                try db.cachedStatement(
                    sql: """
                        INSERT INTO user (id, body, created_at, updated_at) VALUES (?, ?, ?, ?)
                        ON CONFLICT (id) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at
                        """
                ).execute(arguments: [
                    user.id, try JSONCoding.string(user), user.createdAt!.microseconds, now.microseconds,
                ])
                return user
            }
        }
    }

    public func users(ids: [String]) async throws -> [String: User] {
        try read { db in try Self.users(db, ids: ids) }
    }

    static func users(_ db: Database, ids: some Collection<String>) throws -> [String: User] {
        guard !ids.isEmpty else { return [:] }
        var result: [String: User] = [:]
        for chunk in Array(Set(ids)).chunked(500) {
            let sql = "SELECT body FROM user WHERE id IN (\(placeholders(chunk.count)))"
            // Keep the single look-up compiled: every receipt names its reader.
            let statement = chunk.count == 1 ? try db.cachedStatement(sql: sql) : try db.makeStatement(sql: sql)
            let rows = try Row.fetchAll(statement, arguments: StatementArguments(chunk))
            for row in rows {
                let user = try StoredJSON.user(row["body"])
                result[user.id] = user
            }
        }
        return result
    }

    // MARK: Channel types

    public func channelTypes() async throws -> [ChannelConfig] {
        try read { db in
            try String.fetchAll(db.cachedStatement(sql: "SELECT config FROM channel_type ORDER BY name"))
                .map { try JSONCoding.decode(ChannelConfig.self, from: $0) }
        }
    }

    public func channelType(named name: String) async throws -> ChannelConfig? {
        if let cached = types.cached(name) { return cached }
        return try read { db in try self.channelType(db, name) }
    }

    /// The channel type `name`, from the cache when it holds it.
    func channelType(_ db: Database, _ name: String) throws -> ChannelConfig? {
        try types.config(named: name) { try Self.loadChannelType(db, name) }
    }

    static func loadChannelType(_ db: Database, _ name: String) throws -> ChannelConfig? {
        try String.fetchOne(
            db.cachedStatement(sql: "SELECT config FROM channel_type WHERE name = ?"), arguments: [name]
        )
        .map { try JSONCoding.decode(ChannelConfig.self, from: $0) }
    }

    public func createChannelType(_ config: ChannelConfig) async throws -> ChannelConfig {
        try await committer.write { db in
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO channel_type (name, config) VALUES (?, ?)").execute(
                arguments: [config.name, try JSONCoding.string(config)])
            guard db.changesCount == 1 else {
                throw StoreError.channelTypeExists(config.name)
            }
            return config
        }
    }

    public func updateChannelType(named name: String, _ patch: ChannelTypePatch, now: Timestamp) async throws
        -> ChannelConfig
    {
        // Also when the commit fails: a write later in the same group may have cached the uncommitted row.
        defer { types.invalidate() }
        return try await committer.write { db in
            guard var config = try Self.loadChannelType(db, name) else {
                throw StoreError.channelTypeNotFound(name)
            }
            patch.apply(to: &config)
            config.updatedAt = now
            try db.cachedStatement(sql: "UPDATE channel_type SET config = ? WHERE name = ?").execute(arguments: [
                try JSONCoding.string(config), name,
            ])
            return config
        }
    }

    // MARK: Channels

    static let channelColumns = """
        c.pk, c.type, c.id, c.created_by, c.custom, c.last_seq, c.last_message_at, c.created_at, c.updated_at,
        c.member_count
        """

    static func channel(from row: Row) throws -> ChannelRecord {
        ChannelRecord(
            pk: row["pk"], type: row["type"], id: row["id"], createdBy: row["created_by"],
            custom: try StoredJSON.customFields(row["custom"]),
            lastSeq: row["last_seq"],
            lastMessageAt: (row["last_message_at"] as Int64?).map(Timestamp.init(microseconds:)),
            memberCount: row["member_count"],
            createdAt: Timestamp(microseconds: row["created_at"]),
            updatedAt: Timestamp(microseconds: row["updated_at"]))
    }

    static func channel(_ db: Database, type: String, id: String) throws -> ChannelRecord? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT \(channelColumns) FROM channel c WHERE c.type = ? AND c.id = ?"),
            arguments: [type, id]
        ).map(channel(from:))
    }

    static func channel(_ db: Database, pk: Int64) throws -> ChannelRecord {
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT \(channelColumns) FROM channel c WHERE c.pk = ?"), arguments: [pk])
        else { throw StoreError.channelNotFound }
        return try channel(from: row)
    }

    public func channel(type: String, id: String) async throws -> ChannelRecord? {
        try readOne { db in try Self.channel(db, type: type, id: id) }
    }

    public func channel(type: String, id: String, member userID: String) async throws
        -> (channel: ChannelRecord, isMember: Bool)?
    {
        try readOne { db in
            let sql = """
                SELECT \(Self.channelColumns),
                  EXISTS (SELECT 1 FROM member m WHERE m.channel_pk = c.pk AND m.user_id = ?) AS is_member
                FROM channel c WHERE c.type = ? AND c.id = ?
                """
            return try Row.fetchOne(db.cachedStatement(sql: sql), arguments: [userID, type, id]).map { row in
                (try Self.channel(from: row), row["is_member"])
            }
        }
    }

    public func createChannel(
        type: String, id: String, createdBy: String?, memberIDs: [String], custom: [String: JSONValue],
        now: Timestamp
    ) async throws -> (channel: ChannelRecord, created: Bool) {
        try await committer.write { db in
            if let existing = try Self.channel(db, type: type, id: id) { return (existing, false) }
            guard try self.channelType(db, type) != nil else {
                throw StoreError.unknownChannelType(type)
            }
            try Self.requireUsers(db, memberIDs + (createdBy.map { [$0] } ?? []))
            try db.cachedStatement(
                sql: """
                    INSERT INTO channel (type, id, created_by, custom, created_at, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                type, id, createdBy, try JSONCoding.string(custom), now.microseconds, now.microseconds,
            ])
            let pk = db.lastInsertedRowID
            for userID in Set(memberIDs) {
                try Self.insertMember(db, userID: userID, channelPK: pk, newest: 0, now: now)
            }
            return (try Self.channel(db, pk: pk), true)
        }
    }

    static func requireUsers(_ db: Database, _ ids: [String]) throws {
        let found = try users(db, ids: ids)
        if let missing = ids.first(where: { found[$0] == nil }) {
            throw StoreError.unknownUser(missing)
        }
    }

    /// R5: a new member has received and read everything already in the channel.
    static func insertMember(_ db: Database, userID: String, channelPK: Int64, newest: Seq, now: Timestamp) throws {
        let cursors = Cursors.joining(newest: newest)
        try db.cachedStatement(
            sql: """
                INSERT INTO member (channel_pk, user_id, read_seq, read_at, delivered_seq, delivered_at, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [
            channelPK, userID, cursors.read, now.microseconds, cursors.delivered, now.microseconds,
            now.microseconds,
        ])
        try db.cachedStatement(sql: "UPDATE channel SET member_count = member_count + 1 WHERE pk = ?").execute(
            arguments: [channelPK])
        if newest > 0 {
            for kind in CursorKind.allCases {
                try logMove(db, channelPK: channelPK, userID: userID, kind: kind, seq: newest, at: now)
            }
        }
    }

    static func logMove(_ db: Database, channelPK: Int64, userID: String, kind: CursorKind, seq: Seq, at: Timestamp)
        throws
    {
        try db.cachedStatement(
            sql: "INSERT INTO cursor_move (channel_pk, user_id, kind, seq, at) VALUES (?, ?, ?, ?, ?)"
        ).execute(arguments: [channelPK, userID, kind.rawValue, seq, at.microseconds])
    }

    public func snapshot(of channel: ChannelRecord, messageLimit: Int, beforeMessageID: String?) async throws
        -> ChannelSnapshot
    {
        try read { db in
            let channel = try Self.channel(db, pk: channel.pk)
            guard let config = try self.channelType(db, channel.type) else {
                throw StoreError.channelTypeNotFound(channel.type)
            }
            var beforeSeq = channel.lastSeq + 1
            if let beforeMessageID {
                guard let seq = try Self.seq(db, of: beforeMessageID, in: channel.pk) else {
                    throw StoreError.messageNotInChannel(messageID: beforeMessageID, cid: channel.cid)
                }
                beforeSeq = seq
            }
            let messages = try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM message WHERE channel_pk = ? AND seq < ? ORDER BY seq DESC LIMIT ?
                    """,
                arguments: [channel.pk, beforeSeq, messageLimit]
            ).map { try Self.message(from: $0, cid: channel.cid) }.reversed()
            let members = try Self.memberStates(db, channelPK: channel.pk)
            var userIDs = Set(members.map(\.userID)).union(messages.map(\.userID))
            if let createdBy = channel.createdBy { userIDs.insert(createdBy) }
            return ChannelSnapshot(
                channel: channel, config: config, members: members, messages: Array(messages),
                users: try Self.users(db, ids: userIDs))
        }
    }

    /// Every member's read state with the ids its cursors point at and its unread count (R7).
    static func memberStates(_ db: Database, channelPK: Int64, userID: String? = nil) throws -> [MemberState] {
        var sql = """
            SELECT \(StoreSQL.memberStateColumns)
            FROM member m JOIN channel c ON c.pk = m.channel_pk WHERE m.channel_pk = ?
            """
        var arguments: StatementArguments = [channelPK]
        if let userID {
            sql += " AND m.user_id = ?"
            arguments += [userID]
        }
        sql += " ORDER BY m.created_at, m.user_id"
        return try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments).map { row in
            MemberState(
                userID: row["user_id"], joinedAt: Timestamp(microseconds: row["created_at"]),
                channelRole: ChannelRole(rawValue: row["channel_role"]) ?? .member,
                cursors: Cursors(read: row["read_seq"], delivered: row["delivered_seq"]),
                readAt: Timestamp(microseconds: row["read_at"]),
                deliveredAt: Timestamp(microseconds: row["delivered_at"]),
                lastReadMessageID: row["read_id"], lastDeliveredMessageID: row["delivered_id"],
                unread: row["unread"], firstUnreadMessageID: row["first_unread_id"])
        }
    }

    static func memberState(_ db: Database, channelPK: Int64, userID: String) throws -> MemberState? {
        try memberStates(db, channelPK: channelPK, userID: userID).first
    }

    public func channels(matching filter: ChannelFilter, limit: Int, offset: Int) async throws -> [ChannelRecord] {
        try read { db in
            var clauses: [String] = []
            var arguments = StatementArguments()
            if let member = filter.requiredMember {
                clauses.append("c.pk IN (SELECT channel_pk FROM member WHERE user_id = ?)")
                arguments += [member]
            }
            if let members = filter.memberIn {
                clauses.append(
                    "c.pk IN (SELECT channel_pk FROM member WHERE user_id IN (\(Self.placeholders(members.count))))")
                arguments += StatementArguments(members)
            }
            if let cids = filter.cids {
                clauses.append("(c.type || ':' || c.id) IN (\(Self.placeholders(cids.count)))")
                arguments += StatementArguments(cids)
            }
            if let types = filter.types {
                clauses.append("c.type IN (\(Self.placeholders(types.count)))")
                arguments += StatementArguments(types)
            }
            if let ids = filter.ids {
                clauses.append("c.id IN (\(Self.placeholders(ids.count)))")
                arguments += StatementArguments(ids)
            }
            let whereSQL = clauses.isEmpty ? "" : "WHERE " + clauses.joined(separator: " AND ")
            arguments += [limit, offset]
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.channelColumns) FROM channel c \(whereSQL)
                    ORDER BY COALESCE(c.last_message_at, c.created_at) DESC, c.pk DESC LIMIT ? OFFSET ?
                    """,
                arguments: arguments
            ).map(Self.channel(from:))
        }
    }

    public func isMember(_ userID: String, of channelPK: Int64) async throws -> Bool {
        try readOne { db in try Self.isMember(db, userID, channelPK) }
    }

    static func isMember(_ db: Database, _ userID: String, _ channelPK: Int64) throws -> Bool {
        try Bool.fetchOne(
            db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM member WHERE channel_pk = ? AND user_id = ?)"),
            arguments: [channelPK, userID]) ?? false
    }

    public func member(_ userID: String, of channel: ChannelRecord) async throws -> MemberState? {
        try read { db in try Self.memberState(db, channelPK: channel.pk, userID: userID) }
    }

    public func setChannelRole(_ role: ChannelRole, of userIDs: [String], in channel: ChannelRecord, now: Timestamp)
        async throws -> [MemberState]
    {
        try await committer.write { db in
            var changed: [MemberState] = []
            for userID in userIDs.uniqued() {
                try db.cachedStatement(
                    sql: "UPDATE member SET channel_role = ? WHERE channel_pk = ? AND user_id = ? AND channel_role <> ?"
                ).execute(arguments: [role.rawValue, channel.pk, userID, role.rawValue])
                guard db.changesCount > 0, let state = try Self.memberState(db, channelPK: channel.pk, userID: userID)
                else { continue }
                changed.append(state)
            }
            if !changed.isEmpty { try Self.touch(db, channel.pk, now) }
            return changed
        }
    }

    public func addMembers(_ userIDs: [String], to channel: ChannelRecord, maxMembers: Int, now: Timestamp)
        async throws -> [MemberState]
    {
        try await committer.write { db in
            try Self.requireUsers(db, userIDs)
            let current = try Self.channel(db, pk: channel.pk)
            let newcomers = try userIDs.uniqued().filter { try !Self.isMember(db, $0, channel.pk) }
            try StoreRules.requireRoom(for: newcomers.count, in: current, maxMembers: maxMembers)
            var added: [MemberState] = []
            for userID in newcomers {
                try Self.insertMember(db, userID: userID, channelPK: channel.pk, newest: current.lastSeq, now: now)
                if let state = try Self.memberState(db, channelPK: channel.pk, userID: userID) { added.append(state) }
            }
            if !added.isEmpty { try Self.touch(db, channel.pk, now) }
            return added
        }
    }

    public func removeMembers(_ userIDs: [String], from channel: ChannelRecord, now: Timestamp) async throws
        -> [String]
    {
        try await committer.write { db in
            var removed: [String] = []
            for userID in userIDs.uniqued() {
                try db.cachedStatement(sql: "DELETE FROM member WHERE channel_pk = ? AND user_id = ?").execute(
                    arguments: [channel.pk, userID])
                guard db.changesCount > 0 else { continue }
                try db.cachedStatement(sql: "UPDATE channel SET member_count = member_count - 1 WHERE pk = ?")
                    .execute(arguments: [channel.pk])
                // R6: the read state goes, and with it every receipt it gave.
                try db.cachedStatement(sql: "DELETE FROM cursor_move WHERE channel_pk = ? AND user_id = ?").execute(
                    arguments: [channel.pk, userID])
                removed.append(userID)
            }
            if !removed.isEmpty { try Self.touch(db, channel.pk, now) }
            return removed
        }
    }

    static func touch(_ db: Database, _ channelPK: Int64, _ now: Timestamp) throws {
        try db.cachedStatement(sql: "UPDATE channel SET updated_at = ? WHERE pk = ?").execute(arguments: [
            now.microseconds, channelPK,
        ])
    }

    // MARK: Messages

    static func message(from row: Row, cid: String) throws -> MessageRecord {
        MessageRecord(
            id: row["id"], channelPK: row["channel_pk"], cid: cid, seq: row["seq"], userID: row["user_id"],
            text: row["text"], custom: try StoredJSON.customFields(row["custom"]),
            createdAt: Timestamp(microseconds: row["created_at"]))
    }

    static func seq(_ db: Database, of messageID: String, in channelPK: Int64) throws -> Seq? {
        try Seq.fetchOne(
            db.cachedStatement(sql: "SELECT seq FROM message WHERE id = ? AND channel_pk = ?"),
            arguments: [messageID, channelPK])
    }

    public func sendMessage(_ new: NewMessage, to channel: ChannelRecord, now: Timestamp) async throws
        -> SendOutcome
    {
        try await committer.write { db in
            if let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT * FROM message WHERE id = ?"), arguments: [new.id])
            {
                // R11: a retried send returns what is stored.
                let stored = try Self.message(from: row, cid: channel.cid)
                guard stored.channelPK == channel.pk else {
                    throw StoreError.messageIDInOtherChannel(new.id)
                }
                return SendOutcome(message: stored, created: false, recipients: [])
            }
            guard try Self.isMember(db, new.userID, channel.pk) else {
                throw StoreError.notMember(userID: new.userID, cid: channel.cid)
            }
            // A channel's messages are ordered the same by seq and by created_at
            // (strictly increasing), so clients can order them by time alone.
            let previous = try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT last_message_at FROM channel WHERE pk = ?"), arguments: [channel.pk])
            let createdAt = Timestamp(microseconds: max(now.microseconds, (previous ?? 0) + 1))
            try db.cachedStatement(
                sql: "UPDATE channel SET last_seq = last_seq + 1, last_message_at = ?, updated_at = ? WHERE pk = ?"
            ).execute(arguments: [createdAt.microseconds, createdAt.microseconds, channel.pk])
            let seq = try Seq.fetchOne(
                db.cachedStatement(sql: "SELECT last_seq FROM channel WHERE pk = ?"), arguments: [channel.pk])!
            try db.cachedStatement(
                sql: """
                    INSERT INTO message (channel_pk, seq, id, user_id, text, custom, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                channel.pk, seq, new.id, new.userID, new.text, try JSONCoding.string(new.custom),
                createdAt.microseconds,
            ])
            // R4: the author has read their own message, and everything before it.
            _ = try Self.applyRead(
                db, channelPK: channel.pk, userID: new.userID, target: seq, newest: seq, now: createdAt)
            let message = MessageRecord(
                id: new.id, channelPK: channel.pk, cid: channel.cid, seq: seq, userID: new.userID, text: new.text,
                custom: new.custom, createdAt: createdAt)
            let recipients = try Self.memberStates(db, channelPK: channel.pk).map { state in
                RecipientUnread(
                    userID: state.userID, channelUnread: state.unread, totals: try Self.unreadTotals(db, state.userID))
            }
            return SendOutcome(message: message, created: true, recipients: recipients)
        }
    }

    public func message(id: String) async throws -> MessageRecord? {
        try read { db in
            try Row.fetchOne(
                db,
                sql:
                    "SELECT g.*, c.type || ':' || c.id AS cid FROM message g JOIN channel c ON c.pk = g.channel_pk WHERE g.id = ?",
                arguments: [id]
            ).map { try Self.message(from: $0, cid: $0["cid"]) }
        }
    }

    // MARK: Cursors

    static func cursors(_ db: Database, channelPK: Int64, userID: String) throws -> Cursors? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT read_seq, delivered_seq FROM member WHERE channel_pk = ? AND user_id = ?"),
            arguments: [channelPK, userID]
        ).map { Cursors(read: $0["read_seq"], delivered: $0["delivered_seq"]) }
    }

    /// Applies `update` with statements that only ever move a cursor the way the
    /// rule moved it, and logs each move.
    static func write(_ db: Database, _ update: CursorUpdate, channelPK: Int64, userID: String, now: Timestamp) throws {
        for move in update.moves {
            let column = move.kind == .read ? "read" : "delivered"
            let guardSQL = move.to > move.from ? "\(column)_seq < :to" : "\(column)_seq > :to"
            try db.cachedStatement(
                sql: """
                    UPDATE member SET \(column)_seq = :to, \(column)_at = :at
                    WHERE channel_pk = :channel AND user_id = :user AND \(guardSQL)
                    """
            ).execute(arguments: ["to": move.to, "at": now.microseconds, "channel": channelPK, "user": userID])
            try logMove(db, channelPK: channelPK, userID: userID, kind: move.kind, seq: move.to, at: now)
        }
    }

    static func applyRead(
        _ db: Database, channelPK: Int64, userID: String, target: Seq, newest: Seq, now: Timestamp
    ) throws -> CursorUpdate {
        guard let current = try cursors(db, channelPK: channelPK, userID: userID) else {
            throw StoreError.notMember(userID: userID, cid: nil)
        }
        let update = ReceiptRules.markRead(current, upTo: target, newest: newest)
        try write(db, update, channelPK: channelPK, userID: userID, now: now)
        return update
    }

    /// What a cursor move's events and answer need; `channel` is its current row when the caller has it.
    func outcome(
        _ db: Database, channelPK: Int64, userID: String, update: CursorUpdate, now: Timestamp,
        audience: ReceiptAudience?, channel known: ChannelRecord? = nil
    ) throws -> CursorOutcome {
        let channel = try known ?? Self.channel(db, pk: channelPK)
        guard let state = try Self.memberState(db, channelPK: channelPK, userID: userID) else {
            throw StoreError.notMember(userID: userID, cid: channel.cid)
        }
        guard let config = try channelType(db, channel.type) else {
            throw StoreError.channelTypeNotFound(channel.type)
        }
        let reader = try Self.users(db, ids: [userID])[userID] ?? User(id: userID)
        var recipients: [String] = []
        if let audience, let source = audience.source(of: update, in: channel) {
            recipients = audience.recipients(try Self.ids(db, source, channelPK: channel.pk), from: source, reader: userID)
        }
        return CursorOutcome(
            channel: channel, config: config, reader: reader, update: update, state: state,
            totals: try Self.unreadTotals(db, userID), at: now, recipients: recipients)
    }

    /// The ids a `ReceiptAudience.Source` reads.
    static func ids(_ db: Database, _ source: ReceiptAudience.Source, channelPK: Int64) throws -> [String] {
        switch source {
        case .members:
            try String.fetchAll(
                db.cachedStatement(sql: "SELECT user_id FROM member WHERE channel_pk = ?"), arguments: [channelPK])
        case .authors(let after, let through):
            try String.fetchAll(
                db.cachedStatement(
                    sql: "SELECT DISTINCT user_id FROM message WHERE channel_pk = ? AND seq > ? AND seq <= ?"),
                arguments: [channelPK, after, through])
        }
    }

    public func markRead(
        _ userID: String, in channel: ChannelRecord, upTo messageID: String?, audience: ReceiptAudience, now: Timestamp
    ) async throws -> CursorOutcome {
        try await committer.write { db in
            let current = try Self.channel(db, pk: channel.pk)
            var target = current.lastSeq
            if let messageID {
                guard let seq = try Self.seq(db, of: messageID, in: channel.pk) else {
                    throw StoreError.messageNotInChannel(messageID: messageID, cid: channel.cid)
                }
                target = seq
            }
            let update = try Self.applyRead(
                db, channelPK: channel.pk, userID: userID, target: target, newest: current.lastSeq, now: now)
            return try self.outcome(
                db, channelPK: channel.pk, userID: userID, update: update, now: now, audience: audience,
                channel: current)
        }
    }

    public func markUnread(_ userID: String, in channel: ChannelRecord, from messageID: String, now: Timestamp)
        async throws -> CursorOutcome
    {
        try await committer.write { db in
            guard let seq = try Self.seq(db, of: messageID, in: channel.pk) else {
                throw StoreError.messageNotInChannel(messageID: messageID, cid: channel.cid)
            }
            guard let current = try Self.cursors(db, channelPK: channel.pk, userID: userID) else {
                throw StoreError.notMember(userID: userID, cid: channel.cid)
            }
            let update = ReceiptRules.markUnread(current, from: seq)
            try Self.write(db, update, channelPK: channel.pk, userID: userID, now: now)
            return try self.outcome(db, channelPK: channel.pk, userID: userID, update: update, now: now, audience: nil)
        }
    }

    public func markAllRead(_ userID: String, audience: ReceiptAudience, now: Timestamp) async throws
        -> [CursorOutcome]
    {
        try await committer.write { db in
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT c.pk, c.last_seq FROM member m JOIN channel c ON c.pk = m.channel_pk WHERE m.user_id = ?",
                arguments: [userID])
            var outcomes: [CursorOutcome] = []
            for row in rows {
                let pk: Int64 = row["pk"]
                let newest: Seq = row["last_seq"]
                let update = try Self.applyRead(
                    db, channelPK: pk, userID: userID, target: newest, newest: newest, now: now)
                if update.changed {
                    outcomes.append(
                        try self.outcome(
                            db, channelPK: pk, userID: userID, update: update, now: now, audience: audience))
                }
            }
            return outcomes
        }
    }

    public func markDelivered(
        _ userID: String, _ targets: [DeliveredTarget], audience: ReceiptAudience, now: Timestamp
    ) async throws -> [CursorOutcome] {
        try await committer.write { db in
            // Resolve and check every entry first: all or nothing.
            var best: [Int64: (seq: Seq, channel: ChannelRecord)] = [:]
            var order: [Int64] = []
            for target in targets {
                guard let channel = try Self.channel(db, type: target.channel.type, id: target.channel.id) else {
                    throw StoreError.unknownChannel("\(target.channel)")
                }
                guard let seq = try Self.seq(db, of: target.messageID, in: channel.pk) else {
                    throw StoreError.messageNotInChannel(messageID: target.messageID, cid: "\(target.channel)")
                }
                guard try Self.isMember(db, userID, channel.pk) else {
                    throw StoreError.notMember(userID: userID, cid: "\(target.channel)")
                }
                // R9: channel types without delivery events accept and ignore it.
                guard try self.channelType(db, channel.type)?.deliveryEvents == true else { continue }
                if let seen = best[channel.pk] {
                    best[channel.pk] = (max(seen.seq, seq), seen.channel)
                } else {
                    best[channel.pk] = (seq, channel)
                    order.append(channel.pk)
                }
            }
            var outcomes: [CursorOutcome] = []
            for pk in order {
                guard let target = best[pk], let current = try Self.cursors(db, channelPK: pk, userID: userID) else {
                    continue
                }
                let update = ReceiptRules.markDelivered(current, upTo: target.seq, newest: target.channel.lastSeq)
                guard update.changed else { continue }
                try Self.write(db, update, channelPK: pk, userID: userID, now: now)
                outcomes.append(
                    try self.outcome(
                        db, channelPK: pk, userID: userID, update: update, now: now, audience: audience,
                        channel: target.channel))
            }
            return outcomes
        }
    }

    public func unreadTotals(of userID: String) async throws -> UnreadTotals {
        try readOne { db in try Self.unreadTotals(db, userID) }
    }

    /// R7 summed over every channel of the user: one indexed look-up per channel.
    static func unreadTotals(_ db: Database, _ userID: String) throws -> UnreadTotals {
        let row = try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT COALESCE(SUM(unread), 0) AS messages, COALESCE(SUM(unread > 0), 0) AS channels
                    FROM (SELECT \(StoreSQL.unread) AS unread
                          FROM member m JOIN channel c ON c.pk = m.channel_pk WHERE m.user_id = ?)
                    """),
            arguments: [userID])
        return UnreadTotals(messages: row?["messages"] ?? 0, channels: row?["channels"] ?? 0)
    }

    // MARK: Receipts

    public func receipts(forMessage id: String) async throws -> MessageReceipts? {
        try read { db in
            guard
                let row = try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT g.*, '' AS cid FROM message g WHERE g.id = ?"), arguments: [id])
            else { return nil }
            let channel = try Self.channel(db, pk: row["channel_pk"])
            let message = try Self.message(from: row, cid: channel.cid)
            guard let config = try self.channelType(db, channel.type) else { return nil }
            let read = try Self.reachedTimes(db, channelPK: channel.pk, seq: message.seq, kind: .read)
            let delivered = try Self.reachedTimes(db, channelPK: channel.pk, seq: message.seq, kind: .delivered)
            let entries = MessageReceipts.entries(read: read, delivered: delivered, author: message.userID)
            return MessageReceipts(
                message: message, channel: channel, config: config, entries: entries,
                users: try Self.users(db, ids: entries.map(\.userID)))
        }
    }

    /// For each member whose cursor of `kind` is at or past `seq` now, when it
    /// got there: `ReceiptRules.reachedAt` as one query over the receipt log.
    static func reachedTimes(_ db: Database, channelPK: Int64, seq: Seq, kind: CursorKind) throws -> [String: Int64] {
        let column = kind == .read ? "read_seq" : "delivered_seq"
        let rows = try Row.fetchAll(
            db,
            sql: """
                SELECT m.user_id,
                  (SELECT l.at FROM cursor_move l
                    WHERE l.channel_pk = m.channel_pk AND l.user_id = m.user_id AND l.kind = :kind
                      AND l.seq >= :seq
                      AND l.id > COALESCE((SELECT MAX(b.id) FROM cursor_move b
                                            WHERE b.channel_pk = m.channel_pk AND b.user_id = m.user_id
                                              AND b.kind = :kind AND b.seq < :seq), 0)
                    ORDER BY l.id LIMIT 1) AS at
                FROM member m WHERE m.channel_pk = :channel AND m.\(column) >= :seq
                """,
            arguments: ["kind": kind.rawValue, "seq": seq, "channel": channelPK])
        var result: [String: Int64] = [:]
        for row in rows {
            if let at: Int64 = row["at"] { result[row["user_id"]] = at }
        }
        return result
    }

    // MARK: Operations

    /// The database's pages (WAL content included) times the page size.
    public func storageBytes() async throws -> Int64 {
        try read { db in
            let pages = try Int64.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            let size = try Int64.fetchOne(db, sql: "PRAGMA page_size") ?? 0
            return pages * size
        }
    }

    func loggedMoves(channelPK: Int64, userID: String, kind: CursorKind) async throws -> [LoggedMove] {
        try read { db in
            try Row.fetchAll(
                db,
                sql:
                    "SELECT id, seq, at FROM cursor_move WHERE channel_pk = ? AND user_id = ? AND kind = ? ORDER BY id",
                arguments: [channelPK, userID, kind.rawValue]
            ).map { LoggedMove(id: $0["id"], kind: kind, seq: $0["seq"], at: $0["at"]) }
        }
    }

    static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: max(count, 1)).joined(separator: ",")
    }
}

extension Array {
    func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}

extension Array where Element: Hashable {
    func uniqued() -> [Element] {
        var seen = Set<Element>()
        return filter { seen.insert($0).inserted }
    }
}

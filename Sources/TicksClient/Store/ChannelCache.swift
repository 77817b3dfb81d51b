import Foundation
import GRDB
import TicksProtocol

/// How much of the server's state the device keeps for when the app opens
/// offline. Past any of these, the least recently active channels go first
/// (docs/sdk.md, "The device cache").
public struct CacheLimits: Sendable, Equatable {
    /// Channels kept per user.
    public var maxChannels = 1_000
    /// Newest messages kept per channel; older ones are loaded from the server again.
    public var maxMessagesPerChannel = 100
    /// Bytes of JSON kept per user, all channels together.
    public var maxBytes = 32 << 20

    /// Limits of one user's cache (the defaults: 1,000 channels, 100 messages each, 32 MiB).
    public init(maxChannels: Int = 1_000, maxMessagesPerChannel: Int = 100, maxBytes: Int = 32 << 20) {
        self.maxChannels = maxChannels
        self.maxMessagesPerChannel = maxMessagesPerChannel
        self.maxBytes = maxBytes
    }
}

/// A channel as the cache keeps it: the server's wire objects.
struct CachedChannel: Sendable {
    /// What a channel list needs, kept apart from the messages so that every
    /// channel's head loads at once.
    struct Head: Codable, Sendable {
        var channel: Channel
        var members: [Member]
        var reads: [ReadState]
        var newest: Message?
        var hasOlderMessages: Bool
        /// Messages kept with it, the newest included.
        var messageCount: Int
    }

    var cid: ChannelID
    var head: Head
    /// Oldest first.
    var messages: [Message]
}

/// The channel cache in the device's database (`LocalDatabase`), per user.
final class ChannelCache: Sendable {
    private let database: any DatabaseWriter
    let limits: CacheLimits

    init(_ database: LocalDatabase, limits: CacheLimits) {
        self.database = database.writer
        self.limits = limits
    }

    /// Every cached channel's head, the most recently active first.
    func heads(of userID: String) async throws -> [(cid: ChannelID, head: CachedChannel.Head)] {
        let rows = try await database.read { db in
            try Row.fetchAll(
                db, sql: "SELECT cid, head FROM cached_channel WHERE user_id = ? ORDER BY last_activity DESC",
                arguments: [userID]
            ).map { ($0["cid"] as String, $0["head"] as String) }
        }
        let decoder = JSONDecoder()
        return rows.compactMap { cid, head in
            guard let cid = ChannelID(cid: cid), let head = try? decoder.decode(CachedChannel.Head.self, from: Data(head.utf8))
            else { return nil }
            return (cid, head)
        }
    }

    /// The channel's cached messages, oldest first.
    func messages(of userID: String, in cid: ChannelID) async throws -> [Message] {
        let text = try await database.read { db in
            try String.fetchOne(
                db, sql: "SELECT messages FROM cached_channel WHERE user_id = ? AND cid = ?",
                arguments: [userID, cid.rawValue])
        }
        guard let text else { return [] }
        return (try? JSONDecoder().decode([Message].self, from: Data(text.utf8))) ?? []
    }

    /// Writes the channels (their newest `maxMessagesPerChannel` messages),
    /// forgets `removed`, and evicts past the limits.
    func save(_ channels: [CachedChannel], removing removed: [ChannelID], of userID: String) async throws {
        let encoder = JSONEncoder()
        let limits = limits
        let rows = try channels.map { channel -> (String, String, String, Int64, Int) in
            var head = channel.head
            let kept = Array(channel.messages.suffix(limits.maxMessagesPerChannel))
            head.hasOlderMessages = head.hasOlderMessages || kept.count < channel.messages.count
            head.messageCount = kept.count
            let headText = String(decoding: try encoder.encode(head), as: UTF8.self)
            let messagesText = String(decoding: try encoder.encode(kept), as: UTF8.self)
            let activity = (head.channel.lastMessageAt ?? head.channel.createdAt).microseconds
            return (channel.cid.rawValue, headText, messagesText, activity, headText.utf8.count + messagesText.utf8.count)
        }
        try await database.write { db in
            for cid in removed {
                try db.execute(
                    sql: "DELETE FROM cached_channel WHERE user_id = ? AND cid = ?", arguments: [userID, cid.rawValue])
            }
            for (cid, head, messages, activity, bytes) in rows {
                try db.execute(
                    sql: """
                        INSERT INTO cached_channel (user_id, cid, head, messages, last_activity, bytes)
                        VALUES (?, ?, ?, ?, ?, ?)
                        ON CONFLICT (user_id, cid) DO UPDATE SET head = excluded.head, messages = excluded.messages,
                          last_activity = excluded.last_activity, bytes = excluded.bytes
                        """, arguments: [userID, cid, head, messages, activity, bytes])
            }
            try Self.evict(db, userID: userID, limits: limits)
        }
    }

    /// The least recently active channels go until the user's cache is within its limits.
    private static func evict(_ db: Database, userID: String, limits: CacheLimits) throws {
        guard
            let totals = try Row.fetchOne(
                db, sql: "SELECT COUNT(*) AS count, COALESCE(SUM(bytes), 0) AS bytes FROM cached_channel WHERE user_id = ?",
                arguments: [userID]),
            (totals["count"] as Int) > limits.maxChannels || (totals["bytes"] as Int) > limits.maxBytes
        else { return }
        var count = 0
        var bytes = 0
        var evicted: [String] = []
        for row in try Row.fetchAll(
            db, sql: "SELECT cid, bytes FROM cached_channel WHERE user_id = ? ORDER BY last_activity DESC, cid",
            arguments: [userID])
        {
            count += 1
            bytes += row["bytes"] as Int
            if count > limits.maxChannels || bytes > limits.maxBytes { evicted.append(row["cid"]) }
        }
        for cid in evicted {
            try db.execute(sql: "DELETE FROM cached_channel WHERE user_id = ? AND cid = ?", arguments: [userID, cid])
        }
    }

    /// Forgets every channel of the user (a sync too old to catch up).
    func clear(of userID: String) async throws {
        try await database.write { db in
            try db.execute(sql: "DELETE FROM cached_channel WHERE user_id = ?", arguments: [userID])
            try db.execute(sql: "DELETE FROM sync_state WHERE user_id = ?", arguments: [userID])
        }
    }

    /// The server time up to which the cache is known to hold every change.
    func syncedThrough(of userID: String) async throws -> Timestamp? {
        try await database.read { db in
            try Int64.fetchOne(db, sql: "SELECT synced_through FROM sync_state WHERE user_id = ?", arguments: [userID])
                .map(Timestamp.init(microseconds:))
        }
    }

    func setSyncedThrough(_ time: Timestamp, of userID: String) async throws {
        try await database.write { db in
            try db.execute(
                sql: """
                    INSERT INTO sync_state (user_id, synced_through) VALUES (?, ?)
                    ON CONFLICT (user_id) DO UPDATE SET synced_through = excluded.synced_through
                    """, arguments: [userID, time.microseconds])
        }
    }
}

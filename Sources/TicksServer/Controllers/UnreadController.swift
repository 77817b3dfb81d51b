import Foundation
import Hummingbird
import Logging
import TicksProtocol

/// `GET /unread` and `POST /unread_batch`: a user's unread counts over all
/// their channels, as kept with every receipt (R7); `GET /unread/explain`
/// and `POST /unread/recount`: the kept counts checked against the messages
/// they count.
struct UnreadController {
    let store: any TicksStore
    let metrics: ServerMetrics
    let logger: Logger

    func addRoutes(to group: RouterGroup<TicksRequestContext>) {
        group.on(.unreadCounts, use: unread)
        group.on(.unreadCountsBatch, use: unreadBatch)
        group.on(.explainUnread, use: explain)
        group.on(.recountUnread, use: recount)
    }

    /// Stream's shape: totals, the channels and threads with unread messages
    /// (at most 100 of each), the counts by channel type; Ticks has no teams,
    /// so that map is empty.
    struct Counts: Encodable {
        var totalUnreadCount: Int
        var totalUnreadThreadsCount: Int
        var channels: [ChannelCount]
        var channelType: [TypeCount]
        var threads: [ThreadCount]
        var totalUnreadCountByTeam: [String: Int] = [:]

        struct ChannelCount: Encodable {
            var channelID: String
            var unreadCount: Int
            var lastRead: Timestamp

            enum CodingKeys: String, CodingKey {
                case channelID = "channel_id"
                case unreadCount = "unread_count"
                case lastRead = "last_read"
            }
        }

        struct ThreadCount: Encodable {
            var parentMessageID: String
            var unreadCount: Int
            var lastRead: Timestamp
            var lastReadMessageID: String?

            enum CodingKeys: String, CodingKey {
                case parentMessageID = "parent_message_id"
                case unreadCount = "unread_count"
                case lastRead = "last_read"
                case lastReadMessageID = "last_read_message_id"
            }

            /// v2 requires `last_read_message_id`: empty for a thread never read.
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(parentMessageID, forKey: .parentMessageID)
                try c.encode(unreadCount, forKey: .unreadCount)
                try c.encode(lastRead, forKey: .lastRead)
                if encoder.apiVersion == .v2 {
                    try c.encode(lastReadMessageID ?? "", forKey: .lastReadMessageID)
                } else {
                    try c.encodeIfPresent(lastReadMessageID, forKey: .lastReadMessageID)
                }
            }
        }

        struct TypeCount: Encodable {
            var channelType: String
            var channelCount: Int
            var unreadCount: Int

            enum CodingKeys: String, CodingKey {
                case channelType = "channel_type"
                case channelCount = "channel_count"
                case unreadCount = "unread_count"
            }
        }

        enum CodingKeys: String, CodingKey {
            case totalUnreadCount = "total_unread_count"
            case totalUnreadThreadsCount = "total_unread_threads_count"
            case channels
            case channelType = "channel_type"
            case threads
            case totalUnreadCountByTeam = "total_unread_count_by_team"
        }

        static let maxChannels = 100

        init(_ counts: UnreadCounts) {
            totalUnreadCount = counts.totals.messages
            totalUnreadThreadsCount = counts.threads.count
            threads = counts.threads.prefix(Self.maxChannels).map {
                ThreadCount(
                    parentMessageID: $0.parentID, unreadCount: $0.unread, lastRead: $0.lastRead,
                    lastReadMessageID: $0.lastReadMessageID)
            }
            channels = counts.channels.prefix(Self.maxChannels).map {
                ChannelCount(channelID: "\($0.channel)", unreadCount: $0.unread, lastRead: $0.lastRead)
            }
            var byType: [String: TypeCount] = [:]
            for channel in counts.channels {
                byType[channel.channel.type, default: TypeCount(channelType: channel.channel.type, channelCount: 0, unreadCount: 0)]
                    .channelCount += 1
                byType[channel.channel.type]?.unreadCount += channel.unread
            }
            channelType = byType.keys.sorted().compactMap { byType[$0] }
        }
    }

    @Sendable func unread(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let userID = try context.requireActingUser(named: request.queryParameter("user_id"))
        guard let counts = try await store.unreadCounts(of: [userID])[userID] else {
            throw APIError.notFound("user '\(userID)' does not exist")
        }
        return try context.respond(Counts(counts))
    }

    struct BatchRequest: Decodable {
        var userIDs: [String]

        enum CodingKeys: String, CodingKey { case userIDs = "user_ids" }
    }

    struct BatchResponse: Encodable {
        var countsByUser: [String: Counts]

        enum CodingKeys: String, CodingKey { case countsByUser = "counts_by_user" }
    }

    static let maxBatchUsers = 100

    /// Server tokens only; users that do not exist are left out, as Stream does.
    @Sendable func unreadBatch(_ request: Request, context: TicksRequestContext) async throws -> Response {
        guard case .server = try context.requirePrincipal() else {
            throw APIError.forbidden("unread counts of several users need a server token")
        }
        var request = request
        let body = try await request.decodeJSON(BatchRequest.self)
        guard (1...Self.maxBatchUsers).contains(body.userIDs.count) else {
            throw APIError.input("user_ids must name 1 to \(Self.maxBatchUsers) users")
        }
        try body.userIDs.forEach { try requireValidID($0, "user id") }
        let counts = try await store.unreadCounts(of: body.userIDs)
        return try context.respond(BatchResponse(countsByUser: counts.mapValues(Counts.init)), status: .created)
    }
}

// MARK: Explain and recount

extension UnreadController {
    /// At most this many messages after the cursor are listed (the newest); `counts` covers them all.
    static let maxExplainedMessages = 100

    struct Explanation: Encodable {
        var cid: String
        var userID: String
        var member: Bool
        var unreadCount: Int
        var counted: Int
        var lastRead: Timestamp?
        var lastReadMessageID: String?
        var messagesAfterCursor: Int
        var counts: [String: Int]
        var messages: [Message]

        struct Message: Encodable {
            var id: String
            var createdAt: Timestamp
            var counted: Bool
            var rule: String

            enum CodingKeys: String, CodingKey {
                case id, counted, rule
                case createdAt = "created_at"
            }
        }

        enum CodingKeys: String, CodingKey {
            case cid, member, counted, counts, messages
            case userID = "user_id"
            case unreadCount = "unread_count"
            case lastRead = "last_read"
            case lastReadMessageID = "last_read_message_id"
            case messagesAfterCursor = "messages_after_cursor"
        }

        init(cid: ChannelID, userID: String, _ explanation: UnreadExplanation?) {
            self.cid = "\(cid)"
            self.userID = userID
            member = explanation != nil
            unreadCount = explanation?.kept ?? 0
            counted = explanation?.counted ?? 0
            lastRead = explanation?.lastRead
            lastReadMessageID = explanation?.lastReadMessageID
            messagesAfterCursor = explanation?.byReason.values.reduce(0, +) ?? 0
            counts = Dictionary(
                uniqueKeysWithValues: UnreadReason.allCases.map { ($0.rawValue, explanation?.byReason[$0] ?? 0) })
            messages = (explanation?.messages ?? []).map {
                Message(id: $0.id, createdAt: $0.createdAt, counted: $0.reason == .counted, rule: $0.reason.rawValue)
            }
        }

        /// `last_read` and `last_read_message_id` are null, not left out, when there is none.
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(cid, forKey: .cid)
            try container.encode(userID, forKey: .userID)
            try container.encode(member, forKey: .member)
            try container.encode(unreadCount, forKey: .unreadCount)
            try container.encode(counted, forKey: .counted)
            try container.encode(lastRead, forKey: .lastRead)
            try container.encode(lastReadMessageID, forKey: .lastReadMessageID)
            try container.encode(messagesAfterCursor, forKey: .messagesAfterCursor)
            try container.encode(counts, forKey: .counts)
            try container.encode(messages, forKey: .messages)
        }
    }

    /// A user token explains its own count (in a channel it is a member of:
    /// 403 otherwise); a server token names `user_id`, and for a user who is
    /// not a member gets `member: false` and nothing counted — read state is
    /// kept for members only, as `GET /unread` lists none there.
    @Sendable func explain(_ request: Request, context: TicksRequestContext) async throws -> Response {
        // Every id is checked before who may ask: a malformed one is 400 whatever the token.
        guard let text = request.queryParameter("cid") else { throw APIError.input("cid is required") }
        let cid = try requireCID(text, "cid")
        let userID = try context.requireActingUser(named: request.queryParameter("user_id"))
        guard let channel = try await store.channel(cid) else {
            throw APIError.notFound("channel \(cid) does not exist")
        }
        let explanation = try await store.explainUnread(of: userID, in: channel, listing: Self.maxExplainedMessages)
        if explanation == nil {
            guard case .server = try context.requirePrincipal() else {
                throw APIError.forbidden("user '\(userID)' is not a member of \(cid)")
            }
            guard try await store.users(ids: [userID])[userID] != nil else {
                throw APIError.notFound("user '\(userID)' does not exist")
            }
        }
        return try context.respond(Explanation(cid: cid, userID: userID, explanation))
    }

    struct RecountRequest: Decodable {
        var userIDs: [String]?

        enum CodingKeys: String, CodingKey { case userIDs = "user_ids" }
    }

    struct Recount: Encodable {
        var usersChecked: Int
        /// The first `UnreadRecount.listedFixes`.
        var fixed: [Fix]
        var fixedCount: Int

        struct Fix: Encodable {
            var userID: String
            var cid: String
            var parentID: String?
            var field: String
            var was: Int
            var now: Int

            enum CodingKeys: String, CodingKey {
                case cid, field, was, now
                case userID = "user_id"
                case parentID = "parent_id"
            }

            /// `parent_id` only for a thread's count.
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(userID, forKey: .userID)
                try container.encode(cid, forKey: .cid)
                try container.encodeIfPresent(parentID, forKey: .parentID)
                try container.encode(field, forKey: .field)
                try container.encode(was, forKey: .was)
                try container.encode(now, forKey: .now)
            }
        }

        enum CodingKeys: String, CodingKey {
            case fixed
            case usersChecked = "users_checked"
            case fixedCount = "fixed_count"
        }
    }

    /// Server tokens only. Without `user_ids`, every user, a batch per transaction.
    @Sendable func recount(_ request: Request, context: TicksRequestContext) async throws -> Response {
        guard case .server = try context.requirePrincipal() else {
            throw APIError.forbidden("recounting unread counts needs a server token")
        }
        var request = request
        let body = try await request.decodeJSON(RecountRequest.self)
        if let userIDs = body.userIDs {
            guard (1...Self.maxBatchUsers).contains(userIDs.count) else {
                throw APIError.input("user_ids must name 1 to \(Self.maxBatchUsers) users")
            }
            try userIDs.forEach { try requireValidID($0, "user id") }
        }
        let result = try await store.recountUnread(of: body.userIDs)
        if result.fixedCount > 0 {
            metrics.unreadDriftFixed.increment(by: result.fixedCount)
            logger.warning(
                "unread counts drifted: recount set them right",
                metadata: [
                    "fixed": "\(result.fixedCount)", "users_checked": "\(result.usersChecked)",
                    "users": "\(Set(result.fixes.map(\.userID)).sorted().prefix(10))",
                ])
        }
        let fixed = result.fixes.map {
            Recount.Fix(
                userID: $0.userID, cid: "\($0.cid)", parentID: $0.parentID, field: $0.field.rawValue,
                was: $0.was, now: $0.now)
        }
        return try context.respond(Recount(usersChecked: result.usersChecked, fixed: fixed, fixedCount: result.fixedCount))
    }
}

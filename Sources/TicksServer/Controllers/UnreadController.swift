import Hummingbird
import TicksProtocol

/// `GET /unread` and `POST /unread_batch`: a user's unread counts over all
/// their channels, as kept with every receipt (R7).
struct UnreadController {
    let store: any TicksStore

    func addRoutes(to group: RouterGroup<TicksRequestContext>) {
        group.on(.unreadCounts, use: unread)
        group.on(.unreadCountsBatch, use: unreadBatch)
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

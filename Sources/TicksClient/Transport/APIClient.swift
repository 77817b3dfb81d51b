import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import TicksProtocol

/// Ticks' HTTP API as the SDK uses it: Stream's REST calls with a user token.
struct APIClient: Sendable {
    let baseURL: String
    let apiKey: String
    let token: String
    let timeout: Duration
    let http: HTTPClient

    init(baseURL: URL, apiKey: String, token: String, timeout: Duration, http: HTTPClient = .ticks) {
        var base = baseURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.apiKey = apiKey
        self.token = token
        self.timeout = timeout
        self.http = http
    }

    // MARK: Calls

    struct Pagination: Encodable {
        var limit: Int
        /// Only messages older than this one (paging back through history).
        var idLt: String? = nil

        enum CodingKeys: String, CodingKey {
            case limit
            case idLt = "id_lt"
        }
    }

    struct ChannelData: Encodable {
        var members: [String]?
    }

    struct ChannelQuery: Encodable {
        var state = true
        var watch = true
        var presence = false
        var messages: Pagination
        var data: ChannelData?
    }

    /// The channel's state; creates it with `members` when it does not exist and members are given.
    /// With `before`, its messages are the `messageLimit` older than that one.
    func queryChannel(_ cid: ChannelID, messageLimit: Int, members: [String]? = nil, before: String? = nil)
        async throws -> ChannelState
    {
        try await call(
            .POST, "/channels/\(cid.type)/\(cid.id)/query",
            body: ChannelQuery(
                messages: Pagination(limit: messageLimit, idLt: before), data: members.map { ChannelData(members: $0) }))
    }

    struct ChannelsQuery: Encodable {
        struct Filter: Encodable {
            struct In: Encodable {
                var values: [String]
                enum CodingKeys: String, CodingKey { case values = "$in" }
            }
            var members: In
            var type: String?
            var cid: In?
        }
        struct SortKey: Encodable {
            var field: String
            var direction: Int
        }
        var filterConditions: Filter
        var sort: [SortKey]
        var limit: Int
        var offset: Int
        var messageLimit: Int
        var state = true
        var watch = true

        enum CodingKeys: String, CodingKey {
            case filterConditions = "filter_conditions"
            case sort, limit, offset
            case messageLimit = "message_limit"
            case state, watch
        }
    }

    struct ChannelList: Decodable {
        var channels: [ChannelState]
    }

    /// A page of the user's channels matching `filter`, in `sort`'s order.
    func queryChannels(
        of userID: String, filter: ChannelListFilter = .all, sort: [ChannelListSort] = [.lastMessageAt],
        limit: Int, offset: Int = 0, messageLimit: Int
    ) async throws -> [ChannelState] {
        var conditions = ChannelsQuery.Filter(members: .init(values: [userID]))
        switch filter {
        case .all: break
        case .type(let type): conditions.type = type
        case .cids(let cids): conditions.cid = .init(values: cids.map(\.rawValue))
        }
        let query = ChannelsQuery(
            filterConditions: conditions,
            sort: sort.map { ChannelsQuery.SortKey(field: $0.field.rawValue, direction: $0.ascending ? 1 : -1) },
            limit: limit, offset: offset, messageLimit: messageLimit)
        let list: ChannelList = try await call(.POST, "/channels", body: query)
        return list.channels
    }

    struct Empty: Encodable {}

    /// Marks every channel of the user read (`POST /channels/read`).
    func markAllRead() async throws {
        let _: Ignored = try await call(.POST, "/channels/read", body: Empty())
    }

    struct ThreadsReadReply: Decodable {
        var markedThreadsCount: Int

        enum CodingKeys: String, CodingKey { case markedThreadsCount = "marked_threads_count" }
    }

    /// How many threads moved.
    func markAllThreadsRead() async throws -> Int {
        let reply: ThreadsReadReply = try await call(.POST, "/threads/read", body: Empty())
        return reply.markedThreadsCount
    }

    struct SyncRequest: Encodable {
        var channelCIDs: [String]
        var lastSyncAt: Timestamp

        enum CodingKeys: String, CodingKey {
            case channelCIDs = "channel_cids"
            case lastSyncAt = "last_sync_at"
        }
    }

    struct SyncReply: Decodable {
        var events: [Event]
        var reloadCIDs: [String]
        var remainingCIDs: [String]

        enum CodingKeys: String, CodingKey {
            case events
            case reloadCIDs = "reload_cids"
            case remainingCIDs = "remaining_cids"
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            // An event type this client does not know is skipped, as on the socket.
            events = try container.decode([Lenient<Event>].self, forKey: .events).compactMap(\.value)
            reloadCIDs = try container.decodeIfPresent([String].self, forKey: .reloadCIDs) ?? []
            remainingCIDs = try container.decodeIfPresent([String].self, forKey: .remainingCIDs) ?? []
        }
    }

    /// The events the user missed in `cids` since `since` (at most 255 cids).
    func sync(_ cids: [ChannelID], since: Timestamp) async throws -> SyncReply {
        try await call(.POST, "/sync", body: SyncRequest(channelCIDs: cids.map(\.rawValue), lastSyncAt: since))
    }

    struct PrivacyUpdate: Encodable {
        var users: [Change]

        struct Change: Encodable {
            var id: String
            var set: Fields
        }
        struct Fields: Encodable {
            var privacySettings: PrivacySettings
            enum CodingKeys: String, CodingKey { case privacySettings = "privacy_settings" }
        }
    }

    struct UsersReply: Decodable {
        var users: [String: User]
    }

    /// Sets the user's own privacy settings (R10); returns the user as stored.
    func setPrivacy(of userID: String, _ settings: PrivacySettings) async throws -> User? {
        let reply: UsersReply = try await call(
            .PATCH, "/users", body: PrivacyUpdate(users: [.init(id: userID, set: .init(privacySettings: settings))]))
        return reply.users[userID]
    }

    struct NewMessage: Encodable {
        var id: String
        var text: String
        var custom: [String: JSONValue]

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: AnyCodingKey.self)
            for (key, value) in custom where !Message.reserved.contains(key) {
                try container.encode(value, forKey: AnyCodingKey(key))
            }
            try container.encode(id, forKey: AnyCodingKey("id"))
            try container.encode(text, forKey: AnyCodingKey("text"))
        }
    }

    struct SendMessage: Encodable {
        var message: NewMessage
    }

    struct MessageReply: Decodable {
        var message: Message
    }

    /// Sends a message with a client-made id: sending it again returns the stored one (R11).
    func sendMessage(id: String, text: String, custom: [String: JSONValue], to cid: ChannelID) async throws -> Message {
        let reply: MessageReply = try await call(
            .POST, "/channels/\(cid.type)/\(cid.id)/message",
            body: SendMessage(message: NewMessage(id: id, text: text, custom: custom)))
        return reply.message
    }

    struct MarkRead: Encodable {
        var messageID: String?
        enum CodingKeys: String, CodingKey { case messageID = "message_id" }
    }

    struct EventReply: Decodable {
        var event: Event
    }

    /// R3: up to and including `messageID`, or the newest message when nil.
    func markRead(_ cid: ChannelID, upTo messageID: String?) async throws -> Event {
        let reply: EventReply = try await call(
            .POST, "/channels/\(cid.type)/\(cid.id)/read", body: MarkRead(messageID: messageID))
        return reply.event
    }

    struct Ignored: Decodable {}

    func markUnread(_ cid: ChannelID, from messageID: String) async throws {
        let _: Ignored = try await call(
            .POST, "/channels/\(cid.type)/\(cid.id)/unread", body: MarkRead(messageID: messageID))
    }

    struct Delivered: Encodable {
        struct Entry: Encodable {
            var cid: String
            var id: String
        }
        var latestDeliveredMessages: [Entry]
        enum CodingKeys: String, CodingKey { case latestDeliveredMessages = "latest_delivered_messages" }
    }

    /// Marks each channel delivered up to its message (at most 100 entries).
    func markDelivered(_ latest: [(cid: ChannelID, messageID: String)]) async throws {
        let body = Delivered(latestDeliveredMessages: latest.map { .init(cid: $0.cid.rawValue, id: $0.messageID) })
        let _: Ignored = try await call(.POST, "/channels/delivered", body: body)
    }

    /// A channel type's config (any token may read it).
    func channelType(named name: String) async throws -> ChannelConfig {
        try await call(.GET, "/channeltypes/\(name)", body: Optional<MarkRead>.none)
    }

    struct PartialMessageUpdate: Encodable {
        var set: [String: JSONValue]
    }

    /// The message's new text (a partial update: its custom data stays).
    func editMessage(_ id: String, text: String) async throws -> Message {
        let reply: MessageReply = try await call(.PUT, "/messages/\(id)", body: PartialMessageUpdate(set: ["text": .string(text)]))
        return reply.message
    }

    func deleteMessage(_ id: String, hard: Bool) async throws -> Message {
        let reply: MessageReply = try await call(
            .DELETE, "/messages/\(id)" + (hard ? "?hard=true" : ""), body: Optional<MarkRead>.none)
        return reply.message
    }

    struct NewReply: Encodable {
        var message: Fields

        struct Fields: Encodable {
            var id: String
            var text: String
            var parentID: String
            var showInChannel: Bool

            enum CodingKeys: String, CodingKey {
                case id, text
                case parentID = "parent_id"
                case showInChannel = "show_in_channel"
            }
        }
    }

    func sendReply(id: String, text: String, to parentID: String, showInChannel: Bool, in cid: ChannelID) async throws
        -> Message
    {
        let reply: MessageReply = try await call(
            .POST, "/channels/\(cid.type)/\(cid.id)/message",
            body: NewReply(message: .init(id: id, text: text, parentID: parentID, showInChannel: showInChannel)))
        return reply.message
    }

    struct MessageList: Decodable {
        var messages: [Message]
    }

    func replies(to parentID: String, limit: Int) async throws -> [Message] {
        let list: MessageList = try await call(
            .GET, "/messages/\(parentID)/replies?limit=\(limit)", body: Optional<MarkRead>.none)
        return list.messages
    }

    struct MarkThreadRead: Encodable {
        var threadID: String
        enum CodingKeys: String, CodingKey { case threadID = "thread_id" }
    }

    func markThreadRead(_ cid: ChannelID, parentID: String) async throws -> Event {
        let reply: EventReply = try await call(
            .POST, "/channels/\(cid.type)/\(cid.id)/read", body: MarkThreadRead(threadID: parentID))
        return reply.event
    }

    struct UnreadReply: Decodable {
        struct ChannelCount: Decodable {
            var channelID: String
            var unreadCount: Int
            enum CodingKeys: String, CodingKey {
                case channelID = "channel_id"
                case unreadCount = "unread_count"
            }
        }

        struct ThreadCount: Decodable {
            var parentMessageID: String
            var unreadCount: Int
            enum CodingKeys: String, CodingKey {
                case parentMessageID = "parent_message_id"
                case unreadCount = "unread_count"
            }
        }

        var totalUnreadCount: Int
        var channels: [ChannelCount]
        var threads: [ThreadCount]

        enum CodingKeys: String, CodingKey {
            case totalUnreadCount = "total_unread_count"
            case channels, threads
        }
    }

    func unread() async throws -> UnreadReply {
        try await call(.GET, "/unread", body: Optional<MarkRead>.none)
    }

    /// `GET /unread/explain`'s answer.
    struct UnreadExplanationReply: Decodable {
        struct Entry: Decodable {
            var id: String
            var createdAt: Timestamp
            var rule: String

            enum CodingKeys: String, CodingKey {
                case id, rule
                case createdAt = "created_at"
            }
        }

        var unreadCount: Int
        var counted: Int
        var lastRead: Timestamp?
        var lastReadMessageID: String?
        var counts: [String: Int]
        var messages: [Entry]

        enum CodingKeys: String, CodingKey {
            case counted, counts, messages
            case unreadCount = "unread_count"
            case lastRead = "last_read"
            case lastReadMessageID = "last_read_message_id"
        }
    }

    func explainUnread(_ cid: ChannelID) async throws -> UnreadExplanationReply {
        let query = "\(cid)".addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed) ?? "\(cid)"
        return try await call(.GET, "/unread/explain?cid=" + query, body: Optional<MarkRead>.none)
    }

    struct Played: Decodable {
        var playedAt: Timestamp?
        enum CodingKeys: String, CodingKey { case playedAt = "played_at" }
    }

    /// `POST /messages/{id}/played` (R14): the first play's time (kept by the server, however often asked).
    func markPlayed(_ messageID: String) async throws -> Played {
        try await call(.POST, "/messages/\(messageID)/played", body: [String: String]())
    }

    func receipts(for messageID: String) async throws -> ReceiptsResponse {
        try await call(.GET, "/messages/\(messageID)/receipts", body: Optional<MarkRead>.none)
    }

    // MARK: Transport

    /// One request; every failure becomes a `TicksClientError`.
    func call<Body: Encodable, Reply: Decodable>(_ method: HTTPMethod, _ path: String, body: Body?) async throws -> Reply
    {
        let apiKey = apiKey.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed) ?? apiKey
        var request = HTTPClientRequest(url: baseURL + path + (path.contains("?") ? "&" : "?") + "api_key=" + apiKey)
        request.method = method
        request.headers.add(name: "Authorization", value: token)
        request.headers.add(name: "stream-auth-type", value: "jwt")
        request.headers.add(name: "X-Stream-Client", value: "ticks-swift-client")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: try JSONEncoder().encode(body)))
        }
        let response: HTTPClientResponse
        let bytes: ByteBuffer
        do {
            response = try await http.execute(request, timeout: .init(timeout))
            bytes = try await response.body.collect(upTo: 16 << 20)
        } catch let error as HTTPClientError {
            throw TicksClientError.unreachable(String(describing: error))
        } catch let error as TicksClientError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw TicksClientError.unreachable(String(describing: error))
        }
        let data = Data(bytes.readableBytesView)
        guard (200..<300).contains(Int(response.status.code)) else {
            if let body = try? JSONDecoder().decode(APIErrorBody.self, from: data) {
                throw TicksClientError.api(statusCode: body.statusCode, code: body.code, message: body.message)
            }
            throw TicksClientError.api(
                statusCode: Int(response.status.code), code: -1, message: String(decoding: data.prefix(200), as: UTF8.self))
        }
        do {
            return try JSONDecoder().decode(Reply.self, from: data)
        } catch {
            throw TicksClientError.invalidResponse("\(method) \(path): \(error)")
        }
    }
}

/// A value decoded when it can be, skipped (nil) when it cannot.
struct Lenient<Value: Decodable>: Decodable {
    var value: Value?

    init(from decoder: any Decoder) throws {
        value = try? Value(from: decoder)
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}

extension HTTPClient {
    /// The SDK's HTTP client, for the life of the process. It does not retry
    /// failed connection attempts itself: a server that is down is reported
    /// at once, and the outbox decides when to try again.
    static let ticks: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.timeout.connect = .seconds(5)
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()
}

import Hummingbird
import TicksProtocol

/// docs/api.md, "Typing": `POST /channels/{type}/{id}/event` with
/// `typing.start` or `typing.stop`, the one kind of client event Ticks
/// relays. Nothing is stored; the members hear it (`TypingNotice`).
extension ChannelsController {
    struct EventRequest: Decodable {
        var event: SentEvent
        var user: UserRef?
        var userID: String?

        enum CodingKeys: String, CodingKey {
            case event, user
            case userID = "user_id"
        }
    }

    /// The event a client sends: its type, the thread it is about, and (server tokens) who sends it.
    struct SentEvent: Decodable {
        var type: String
        var parentID: String?
        var user: UserRef?
        var userID: String?

        enum CodingKeys: String, CodingKey {
            case type, user
            case parentID = "parent_id"
            case userID = "user_id"
        }
    }

    /// The event types a client may send.
    static let relayedEvents: [String: EventType] = [
        EventType.typingStart.rawValue: .typingStart, EventType.typingStop.rawValue: .typingStop,
    ]

    @Sendable func sendEvent(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let cid = try channelPath(context)
        var request = request
        let body = try await request.decodeJSON(EventRequest.self)
        guard let type = Self.relayedEvents[body.event.type] else {
            throw APIError.input(
                "event.type '\(body.event.type.prefix(64))' cannot be sent: only typing.start and typing.stop")
        }
        let typist = try context.requireActingUser(
            named: body.event.user?.id, body.event.userID, body.user?.id, body.userID)
        if let parentID = body.event.parentID { try requireValidID(parentID, "event.parent_id") }
        let channel = try await receipts.channel(cid, for: try context.requirePrincipal(), to: .send)
        guard let config = try await store.channelType(named: channel.type) else {
            throw APIError.notFound("channel type '\(channel.type)' does not exist")
        }
        guard config.typingEvents else {
            throw APIError.input("channel type '\(config.name)' has typing events off (typing_events)")
        }
        let user = try await store.users(ids: [typist])[typist] ?? User(id: typist)
        let notice = TypingNotice(type, by: user, in: channel.cid, parentID: body.event.parentID, at: .now())
        try events.typing(notice, members: try await store.memberIDs(of: channel))
        return try context.respond(event: notice.event)
    }
}

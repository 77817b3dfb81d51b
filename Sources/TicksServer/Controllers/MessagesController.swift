import Hummingbird
import TicksProtocol

/// `GET /messages/{id}`, Ticks' exact receipts (`GET /messages/{id}/receipts`),
/// and editing and deleting messages.
struct MessagesController {
    let store: any TicksStore
    let events: EventPublisher
    let receipts: Receipts
    let limits: ServerLimits

    func addRoutes(to group: RouterGroup<TicksRequestContext>) {
        group.on(.getMessage, use: get)
        group.on(.getReceipts, use: receiptsOfMessage)
        group.on(.markPlayed, use: markPlayed)
        addLifecycleRoutes(to: group)
    }

    struct MessageResponse: Encodable {
        var message: Message
    }

    @Sendable func get(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let id = try messageID(context)
        guard let (record, channel) = try await store.message(id: id) else {
            throw APIError.notFound("message '\(id)' does not exist")
        }
        try await ChannelPermissions.require(.read, in: channel, context: context, store: store)
        let snapshot = try await store.snapshot(of: channel, messageLimit: 0, page: .newest)
        var users = snapshot.users
        users.merge(try await store.users(ids: [record.userID])) { $1 }
        var message = Presenter.message(record, users: users)
        message.channel = Presenter.channel(channel, config: snapshot.config, users: users)
        return try context.respond(MessageResponse(message: message))
    }

    @Sendable func receiptsOfMessage(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let id = try messageID(context)
        guard let receipts = try await store.receipts(forMessage: id) else {
            throw APIError.notFound("message '\(id)' does not exist")
        }
        try await ChannelPermissions.require(.read, in: receipts.channel, context: context, store: store)
        let viewer: String? = if case .user(let userID) = try context.requirePrincipal() { userID } else { nil }
        let readsAsDeliveries = try await self.receipts.seesReadsAsDeliveries(viewer, known: receipts.users)
        return try context.respond(
            Presenter.receipts(receipts, viewer: viewer, seesReadsAsDeliveries: readsAsDeliveries))
    }

    struct PlayedRequest: Decodable {
        var user: UserRef?
        var userID: String?

        enum CodingKeys: String, CodingKey {
            case user
            case userID = "user_id"
        }
    }

    struct PlayedResponse: Encodable {
        var messageID: String
        /// When the member first played it; nil when a server token named a non-member (nothing kept).
        var playedAt: Timestamp?
        /// `message.played`, as the others hear it (also on a repeat, which sends nothing).
        var event: Event?

        enum CodingKeys: String, CodingKey {
            case messageID = "message_id"
            case playedAt = "played_at"
            case event
        }
    }

    /// `POST /messages/{id}/played` (R14): a member other than the author played a
    /// voice note or video. The first play is kept (201, `message.played` to those
    /// who may see the member's reads); a repeat answers 200 with it and tells nothing.
    @Sendable func markPlayed(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let id = try messageID(context)
        let principal = try context.requirePrincipal()
        var request = request
        let body = try await request.decodeJSON(PlayedRequest.self)
        let player = try context.requireActingUser(named: body.user?.id, body.userID)
        guard let (message, channel) = try await store.message(id: id) else {
            throw APIError.notFound("message '\(id)' does not exist")
        }
        guard try await store.isMember(player, of: channel.pk) else {
            // A user token must be a member (403); a server token may name anyone, to no
            // effect, as with marks: receipts are kept for members only.
            try ChannelPermissions.require(
                [.mark], in: channel.cid, as: principal,
                standing: ChannelPermissions.standing(of: principal, isMember: false))
            return try context.respond(PlayedResponse(messageID: id))
        }
        guard let config = try await store.channelType(named: channel.type) else {
            throw APIError.notFound("channel type '\(channel.type)' does not exist")
        }
        try Self.requirePlayable(message, by: player, config: config)
        let play = try await store.markPlayed(message, by: player, now: .now())
        let notice = PlayNotice(play)
        if play.created {
            let recipients = try await notice.recipients(of: play, audience: receipts.audience) {
                try await store.memberIDs(of: channel)
            }
            try events.played(play, notice: notice, to: recipients)
        }
        return try context.respond(
            PlayedResponse(messageID: id, playedAt: play.playedAt, event: notice.event),
            status: play.created ? .created : .ok)
    }

    /// 400 unless `player` may mark `message` played (R14): not its author, a message
    /// not deleted with an audio or video attachment, in a channel type with played events.
    static func requirePlayable(_ message: MessageRecord, by player: String, config: ChannelConfig) throws {
        guard config.playedEvents else {
            throw APIError.input(
                "channel type '\(config.name)' has played_events off: its messages are never marked played")
        }
        guard message.userID != player else {
            throw APIError.input(
                "user '\(player)' wrote message '\(message.id)': an author does not mark their own message played")
        }
        guard message.deletedAt == nil else { throw APIError.input("message '\(message.id)' is deleted") }
        guard Message.isPlayable(message.attachments) else {
            throw APIError.input(
                "message '\(message.id)' has no audio or video attachment (audio, video or voiceRecording) to play")
        }
    }

    func messageID(_ context: TicksRequestContext) throws -> String {
        let id = try context.pathParameter("id")
        try requireValidID(id, "message id")
        return id
    }
}

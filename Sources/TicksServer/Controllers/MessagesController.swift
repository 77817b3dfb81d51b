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
        let snapshot = try await store.snapshot(of: channel, messageLimit: 0, beforeMessageID: nil)
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
        let hiding = try await self.receipts.seesReadsAsDeliveries(viewer, known: receipts.users)
        return try context.respond(Presenter.receipts(receipts, viewer: viewer, viewerSeesReadsAsDeliveries: hiding))
    }

    func messageID(_ context: TicksRequestContext) throws -> String {
        let id = try context.pathParameter("id")
        try requireValidID(id, "message id")
        return id
    }
}

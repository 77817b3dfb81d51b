import Foundation
import Hummingbird
import TicksProtocol

/// docs/api.md, "Messages": sending a message to a channel (the other
/// message routes are `MessagesController`'s).
extension ChannelsController {
    // MARK: Messages

    struct MessageInput: Decodable {
        var id: String?
        var text: String?
        var user: UserRef?
        var userID: String?
        var custom: [String: JSONValue]
        var parentID: String?
        var showInChannel: Bool?
        var attachments: [JSONValue]

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: AnyCodingKey.self)
            id = try container.decodeIfPresent(String.self, forKey: AnyCodingKey("id"))
            text = try container.decodeIfPresent(String.self, forKey: AnyCodingKey("text"))
            parentID = try container.decodeIfPresent(String.self, forKey: AnyCodingKey("parent_id"))
            showInChannel = try container.decodeIfPresent(Bool.self, forKey: AnyCodingKey("show_in_channel"))
            user = try container.decodeIfPresent(UserRef.self, forKey: AnyCodingKey("user"))
            userID = try container.decodeIfPresent(String.self, forKey: AnyCodingKey("user_id"))
            attachments = try container.decodeIfPresent([JSONValue].self, forKey: AnyCodingKey("attachments")) ?? []
            custom = try container.customFields(excluding: Message.reserved, in: decoder.apiVersion)
        }
    }

    struct SendRequest: Decodable {
        var message: MessageInput
        var userID: String?

        enum CodingKeys: String, CodingKey {
            case message
            case userID = "user_id"
        }
    }

    struct MessageResponse: Encodable {
        var message: Message
    }

    @Sendable func sendMessage(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let channel = try await loadChannel(context, to: .send)
        var request = request
        let body = try await request.decodeJSON(SendRequest.self)
        let author = try context.requireActingUser(named: body.message.user?.id, body.message.userID, body.userID)
        guard let config = try await store.channelType(named: channel.type) else {
            throw APIError.notFound("channel type '\(channel.type)' does not exist")
        }
        let text = body.message.text ?? ""
        let attachments = body.message.attachments
        // A voice note or a photo may have no text (R14); a message with neither says nothing.
        guard !text.isEmpty || !attachments.isEmpty else {
            throw APIError.input("message.text must not be empty (unless the message has attachments)")
        }
        try requireStorableText(text, "message.text")
        // Counted in Unicode scalars, so the length bounds the bytes too (a
        // character may hold any number of combining marks).
        let length = text.unicodeScalars.count
        guard length <= config.maxMessageLength else {
            throw APIError.input(
                "message.text is \(length) characters; channel type '\(config.name)' allows \(config.maxMessageLength)")
        }
        let id = body.message.id ?? UUID().uuidString.lowercased()
        try requireValidID(id, "message id")
        try requireCustomData(body.message.custom, of: "message '\(id)'", limits: limits)
        try requireAttachments(attachments, of: "message '\(id)'")
        if let parentID = body.message.parentID {
            try requireValidID(parentID, "message.parent_id")
            guard config.replies else { throw APIError.input("channel type '\(config.name)' has replies off") }
        }
        let outcome = try await store.sendMessage(
            NewMessage(
                id: id, userID: author, text: text, custom: body.message.custom, parentID: body.message.parentID,
                showInChannel: body.message.parentID != nil && body.message.showInChannel == true,
                attachments: attachments, byServer: context.principal == .server),
            to: channel, now: .now())
        // A message id belongs to its author: their retry is idempotent (R11); anyone else's is refused.
        guard outcome.message.userID == author else {
            throw APIError.conflict("message id '\(id)' is already used by another user's message")
        }
        let users = try await store.users(ids: [outcome.message.userID])
        if outcome.created {
            try await events.messageNew(outcome, channel: channel, config: config, users: users)
        }
        return try context.respond(
            MessageResponse(message: Presenter.message(outcome.message, users: users)),
            status: outcome.created ? .created : .ok)
    }
}

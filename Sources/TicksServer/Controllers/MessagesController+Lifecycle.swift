import Hummingbird
import TicksProtocol

/// Getting several messages, editing and deleting them. An edit keeps every
/// receipt (the message keeps its place in the channel); a delete takes the
/// message out of every unread count (docs/receipt-rules.md).
extension MessagesController {
    func addLifecycleRoutes(to group: RouterGroup<TicksRequestContext>) {
        group.on(.getManyMessages, use: getMany)
        group.on(.updateMessage, use: update)
        group.on(.updateMessagePartial, use: updatePartial)
        group.on(.deleteMessage, use: delete)
        group.on(.getReplies, use: replies)
    }

    static let defaultRepliesLimit = 25
    static let maxRepliesLimit = 300

    /// `GET /messages/{id}/replies?limit=&id_lt=`: a thread's replies, oldest first.
    @Sendable func replies(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let id = try messageID(context)
        let limit = try integerParameter(
            request.queryParameter("limit"), "limit", range: 1...Int64(Self.maxRepliesLimit)
        ).map(Int.init) ?? Self.defaultRepliesLimit
        let before = request.queryParameter("id_lt")
        if let before { try requireValidID(before, "id_lt") }
        guard let (_, channel) = try await store.message(id: id) else {
            throw APIError.notFound("message '\(id)' does not exist")
        }
        try await ChannelPermissions.require(.read, in: channel, context: context, store: store)
        let records = try await store.replies(to: id, before: before, limit: limit)
        let users = try await store.users(ids: records.map(\.userID))
        return try context.respond(MessageList(messages: records.map { Presenter.message($0, users: users) }))
    }

    struct MessageList: Encodable {
        var messages: [Message]
    }

    static let maxMessagesPerGet = 100

    /// `GET /channels/{type}/{id}/messages?ids=a,b`: those still there, oldest first.
    @Sendable func getMany(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let type = try context.pathParameter("type")
        let id = try context.pathParameter("id")
        let cid = ChannelID(
            type: try requireID(type, Identifier.channelTypeName, "channel type"),
            id: try requireID(id, Identifier.channelID, "channel id"))
        guard let list = request.queryParameter("ids"), !list.isEmpty else {
            throw APIError.input("ids is required: ?ids=id1,id2")
        }
        // getstream escapes each id before it joins them, and then the query again: in v2 an id
        // arrives escaped once more (`a%40b`). A valid id has no `%`, so unescaping is unambiguous.
        let ids = list.split(separator: ",").map { item in
            context.apiVersion == .v2 ? (item.removingPercentEncoding ?? String(item)) : String(item)
        }
        guard ids.count <= Self.maxMessagesPerGet else {
            throw APIError.input("ids names \(ids.count) messages; at most \(Self.maxMessagesPerGet)")
        }
        try ids.forEach { try requireValidID($0, "message id") }
        let principal = try context.requirePrincipal()
        let channel = try await receipts.channel(cid, for: principal, to: .read)
        let records = try await store.messages(ids: ids, in: channel)
        let users = try await store.users(ids: records.map(\.userID))
        return try context.respond(MessageList(messages: records.map { Presenter.message($0, users: users) }))
    }

    struct UpdateRequest: Decodable {
        var message: ChannelsController.MessageInput
    }

    /// `POST /messages/{id}`: the message's text and custom data, replaced.
    @Sendable func update(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let id = try messageID(context)
        var request = request
        let body = try await request.decodeJSON(UpdateRequest.self)
        if let named = body.message.id, named != id {
            throw APIError.input("message.id '\(named.prefix(64))' is not the id in the path '\(id)'")
        }
        let input = body.message
        if let parentID = input.parentID { try requireValidID(parentID, "message.parent_id") }
        let target = try await editable(id, actingAs: [input.user?.id, input.userID], context)
        let text = input.text ?? ""
        try requireText(text, config: target.config)
        try requireCustomData(input.custom, of: "message '\(id)'", limits: limits)
        let edited = try await store.editMessage(id: id, by: target.actor, now: .now()) { stored in
            guard stored.deletedAt == nil else { throw APIError.input("message '\(id)' is deleted") }
            return MessageEdit(text: text, custom: input.custom)
        }
        return try await announce(
            edited, in: target.channel, as: .messageUpdated, by: target.actor, status: .created, context: context)
    }

    /// `PUT /messages/{id}`: `set` and `unset` of the text and custom fields.
    @Sendable func updatePartial(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let id = try messageID(context)
        var request = request
        let body = try await request.decodeJSON(PartialUpdateRequest.self)
        let update = body.update
        try update.validate("message", reserved: Message.reserved, allowed: ["text"])
        guard !update.unset.contains("text") else { throw APIError.input("text cannot be unset") }
        var newText: String?
        if let text = update.set["text"] {
            guard case .string(let string) = text else { throw APIError.input("set.text must be a string") }
            newText = string
        }
        var customChange = update
        customChange.set["text"] = nil
        let target = try await editable(id, actingAs: [body.acting.user?.id, body.acting.userID], context)
        if let newText { try requireText(newText, config: target.config) }
        try requireCustomData(customChange.applied(to: target.message.custom), of: "message '\(id)'", limits: limits)
        let change = customChange
        let text = newText
        let edited = try await store.editMessage(id: id, by: target.actor, now: .now()) { stored in
            guard stored.deletedAt == nil else { throw APIError.input("message '\(id)' is deleted") }
            return MessageEdit(text: text ?? stored.text, custom: change.applied(to: stored.custom))
        }
        return try await announce(
            edited, in: target.channel, as: .messageUpdated, by: target.actor, status: .created, context: context)
    }

    /// `DELETE /messages/{id}[?hard=true]`: the message is deleted for
    /// everyone; it is never unread again.
    @Sendable func delete(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let id = try messageID(context)
        let hard = try booleanParameter(request.queryParameter("hard"), "hard")
        if try booleanParameter(request.queryParameter("delete_for_me"), "delete_for_me") {
            throw APIError.input("delete_for_me is not supported: a deleted message is deleted for everyone")
        }
        let deletedBy = request.queryParameter("deleted_by")
        let target = try await editable(id, actingAs: [deletedBy], context, deleting: true)
        let deleted = try await store.deleteMessage(id: id, hard: hard, by: target.actor, now: .now())
        return try await announce(
            deleted, in: target.channel, as: .messageDeleted, by: target.actor, hardDelete: hard, context: context)
    }

    /// The message `id` and its channel, when the caller may change it
    /// (`ChannelPermissions`): its author while a member, a server token, an
    /// admin member (edits), the channel's managers (deletes). A user token
    /// may not name another user.
    func editable(
        _ id: String, actingAs named: [String?], _ context: TicksRequestContext, deleting: Bool = false
    ) async throws -> Editable {
        let actor = try context.actingUser(among: named)
        guard let (message, channel) = try await store.message(id: id) else {
            throw APIError.notFound("message '\(id)' does not exist")
        }
        guard let config = try await store.channelType(named: channel.type) else {
            throw APIError.notFound("channel type '\(channel.type)' does not exist")
        }
        let action: ChannelPermissions.Action =
            actor == message.userID ? .changeOwnMessage : deleting ? .deleteOthersMessage : .editOthersMessage
        try await ChannelPermissions.require(action, in: channel, context: context, store: store)
        return Editable(message: message, channel: channel, config: config, actor: actor)
    }

    /// A message the caller may change, with its channel, the channel's type and who acts.
    struct Editable {
        var message: MessageRecord
        var channel: ChannelRecord
        var config: ChannelConfig
        var actor: String?
    }

    func requireText(_ text: String, config: ChannelConfig) throws {
        guard !text.isEmpty else { throw APIError.input("message.text must not be empty") }
        try requireStorableText(text, "message.text")
        let length = text.unicodeScalars.count
        guard length <= config.maxMessageLength else {
            throw APIError.input(
                "message.text is \(length) characters; channel type '\(config.name)' allows \(config.maxMessageLength)")
        }
    }

    /// Tells the channel's members of the changed message and answers with it.
    func announce(
        _ record: MessageRecord, in channel: ChannelRecord, as type: EventType, by actor: String?,
        hardDelete: Bool? = nil, status: HTTPResponse.Status = .ok, context: TicksRequestContext
    ) async throws -> Response {
        let users = try await store.users(ids: [record.userID] + (actor.map { [$0] } ?? []))
        let event = ChangeEvents.messageChanged(type, record, by: actor, hardDelete: hardDelete, users: users)
        try events.send(event, to: try await store.memberIDs(of: channel))
        return try context.respond(MessageResponse(message: event.message!), status: status)
    }
}

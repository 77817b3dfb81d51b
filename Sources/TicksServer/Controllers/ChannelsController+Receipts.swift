import Foundation
import Hummingbird
import TicksProtocol

/// docs/api.md, "Receipts": mark read, unread, all read and delivered over
/// HTTP; the checks, store calls and events are `Receipts`', shared with the
/// WebSocket.
extension ChannelsController {
    // MARK: Read, unread, delivered

    /// The body of mark read and mark unread (`message_timestamp`: mark unread's only).
    struct MarkRequest: Decodable {
        var user: UserRef?
        var userID: String?
        var messageID: String?
        var threadID: String?
        var messageTimestamp: Timestamp?

        enum CodingKeys: String, CodingKey {
            case user
            case userID = "user_id"
            case messageID = "message_id"
            case threadID = "thread_id"
            case messageTimestamp = "message_timestamp"
        }
    }

    @Sendable func markRead(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let cid = try channelPath(context)
        _ = try context.requirePrincipal()
        var request = request
        let body = try await request.decodeJSON(MarkRequest.self)
        let reader = try context.requireActingUser(named: body.user?.id, body.userID)
        let event = try await marking(context) {
            if let threadID = body.threadID {
                return try await receipts.markThreadRead(reader, in: cid, parentID: threadID)
            }
            return try await receipts.markRead(reader, in: cid, upTo: body.messageID)
        }
        return try context.respond(event: event)
    }

    /// Runs a mark for a reader whom the store finds not to be a member: the
    /// rule refuses it for a user token (403), and lets a server token make
    /// it with no effect (nil), as Stream does, which keeps read state for
    /// members only.
    func marking<Outcome: Sendable>(
        _ context: TicksRequestContext, _ mark: () async throws -> Outcome
    ) async throws -> Outcome? {
        do {
            return try await mark()
        } catch StoreError.notMember(_, let cid) {
            try requireMarkByNonMember(in: cid, context)
            return nil
        }
    }

    /// Throws 403 unless the caller may mark for a user who is not a member of channel `cid`.
    func requireMarkByNonMember(in cid: ChannelID?, _ context: TicksRequestContext) throws {
        let principal = try context.requirePrincipal()
        try ChannelPermissions.require(
            [.mark], in: cid, as: principal,
            standing: ChannelPermissions.standing(of: principal, isMember: false))
    }

    /// Mark unread from a message (`message_id`), from a time
    /// (`message_timestamp`), or a whole thread (`thread_id`): one of them.
    @Sendable func markUnread(_ request: Request, context: TicksRequestContext) async throws -> Response {
        let channel = try await loadChannel(context, to: .mark)
        var request = request
        let body = try await request.decodeJSON(MarkRequest.self)
        let reader = try context.requireActingUser(named: body.user?.id, body.userID)
        switch (body.messageID, body.threadID, body.messageTimestamp) {
        case (nil, let threadID?, nil):
            _ = try await marking(context) {
                try await receipts.markThreadUnread(reader, in: channel, parentID: threadID)
            }
        case (let messageID?, nil, nil):
            try requireValidID(messageID, "message_id")
            try await markUnread(reader, in: channel, from: .message(messageID), context)
        case (nil, nil, let time?):
            try await markUnread(reader, in: channel, from: .time(time), context)
        default:
            throw APIError.input("name one of message_id, thread_id and message_timestamp")
        }
        return try context.respond(Empty())
    }

    private func markUnread(
        _ reader: String, in channel: ChannelRecord, from start: UnreadStart, _ context: TicksRequestContext
    ) async throws {
        let outcome = try await marking(context) {
            try await store.markUnread(reader, in: channel, from: start, now: .now())
        }
        if let outcome { try events.markedUnread(outcome) }
    }

    @Sendable func markAllRead(_ request: Request, context: TicksRequestContext) async throws -> Response {
        var request = request
        let body = try await request.decodeJSON(ActingUserFields.self)
        let reader = try context.requireActingUser(named: body.user?.id, body.userID)
        for outcome in try await store.markAllRead(reader, audience: receipts.audience, now: .now()) {
            try receipts.tell(outcome)
        }
        return try context.respond(Empty())
    }

    struct ThreadsReadResponse: Encodable {
        var markedThreadsCount: Int

        enum CodingKeys: String, CodingKey { case markedThreadsCount = "marked_threads_count" }
    }

    /// `POST /threads/read`: every thread of the user read in one statement;
    /// their own connections get one `notification.mark_threads_read` when any moved.
    @Sendable func markAllThreadsRead(_ request: Request, context: TicksRequestContext) async throws -> Response {
        var request = request
        let body = try await request.decodeJSON(ActingUserFields.self)
        let reader = try context.requireActingUser(named: body.user?.id, body.userID)
        let marked = try await receipts.markThreadsRead(reader)
        return try context.respond(ThreadsReadResponse(markedThreadsCount: marked))
    }

    struct MarkDeliveredRequest: Decodable {
        var latestDeliveredMessages: [Receipts.DeliveredEntry]
        var userID: String?
        var user: UserRef?

        enum CodingKeys: String, CodingKey {
            case latestDeliveredMessages = "latest_delivered_messages"
            case userID = "user_id"
            case user
        }
    }

    @Sendable func markDelivered(_ request: Request, context: TicksRequestContext) async throws -> Response {
        var request = request
        let body = try await request.decodeJSON(MarkDeliveredRequest.self)
        let queryUser = request.queryParameter("user_id")
        let named = body.userID ?? body.user?.id
        if let queryUser, let named, queryUser != named {
            throw APIError.input("user_id in the query ('\(queryUser)') and the body ('\(named)') differ")
        }
        let reader = try context.requireActingUser(named: body.userID, body.user?.id, queryUser)
        if let scope = context.deliveryOnly,
            let other = body.latestDeliveredMessages.first(where: { $0.cid != scope.description })
        {
            throw APIError.forbidden("this delivery-only token is for channel \(scope), not \(other.cid.prefix(130))")
        }
        // Entries for channels the reader is not a member of: refused for a user
        // token; for a server token, left out and the rest marked.
        var entries = body.latestDeliveredMessages
        while true {
            do {
                try await receipts.markDelivered(reader, entries)
                break
            } catch StoreError.notMember(let userID, let cid) {
                try requireMarkByNonMember(in: cid, context)
                let before = entries.count
                entries.removeAll { ChannelID(cid: $0.cid) == cid }
                guard entries.count < before else { throw StoreError.notMember(userID: userID, cid: cid) }
                if entries.isEmpty { break }
            }
        }
        return try context.respond(Empty())
    }
}

import TicksProtocol

/// A handle on one channel of a `ChatClient`: its state, sending, and the
/// read marks. Cheap to copy; every call goes through the client.
public struct ChannelController: Sendable {
    public let cid: ChannelID
    public let client: ChatClient

    /// The channel now.
    public var state: ChatChannel {
        get async throws { try await client.state(of: cid) }
    }

    /// The channel now, then a new value after every change (messages,
    /// statuses, reads, members). Iterate it from any actor, the main one included.
    public func updates() async -> AsyncStream<ChatChannel> {
        await client.updates(of: cid)
    }

    /// Fetches the channel's state from the server. `members` creates the
    /// channel with them when it does not exist yet. What the device cache
    /// kept shows first; with the server out of reach it stays, and the
    /// channel loads after the next connect (this throws only when nothing is cached).
    public func load(createWithMembers members: [String]? = nil) async throws {
        try await client.load(cid, members: members)
    }

    /// Loads up to `limit` messages older than the oldest loaded one (the
    /// device cache's first, then the server's), with their receipts. Returns
    /// how many were added: 0 at the beginning of the channel
    /// (`ChatChannel.hasOlderMessages` turns false).
    @discardableResult
    public func loadOlder(limit: Int? = nil) async throws -> Int {
        try await client.loadOlder(cid, limit: max(1, min(limit ?? client.configuration.messagePageSize, 300)))
    }

    /// Sends a message: it is written to the outbox first and returned as
    /// `.pending`; it becomes `.sent` once the server stores it, `.failed` when
    /// the retry budget runs out. A client-made `id` makes retries safe (R11).
    @discardableResult
    public func send(_ text: String, id: String? = nil, extraData: [String: JSONValue] = [:]) async throws
        -> ChatMessage
    {
        try await client.send(text, id: id, extraData: extraData, to: cid)
    }

    /// Marks every message read, up to the newest (R3).
    public func markRead() async throws {
        try await client.markRead(cid, upTo: nil)
    }

    /// Marks read every message up to and including `messageID` (R3).
    public func markRead(upTo messageID: String) async throws {
        try await client.markRead(cid, upTo: messageID)
    }

    /// CometChat's name for `markRead(upTo:)`.
    public func markAsRead(messageId: String) async throws {
        try await markRead(upTo: messageId)
    }

    /// Marks `messageID` and everything after it unread: the read cursor moves to just before it.
    public func markUnread(from messageID: String) async throws {
        try await client.markUnread(cid, from: messageID)
    }
}

extension ChannelController {
    /// Replaces an own message's text; its receipts do not change.
    @discardableResult
    public func edit(messageId: String, text: String) async throws -> ChatMessage {
        try await client.edit(messageId: messageId, text: text)
    }

    /// Deletes a message: it stays in the list as deleted and is never unread again.
    @discardableResult
    public func delete(messageId: String, hard: Bool = false) async throws -> ChatMessage {
        try await client.delete(messageId: messageId, hard: hard)
    }

    /// Replies in a message's thread (shown in the channel too when `showInChannel`).
    @discardableResult
    public func reply(to parentId: String, text: String, id: String? = nil, showInChannel: Bool = false) async throws
        -> ChatMessage
    {
        try await client.reply(to: parentId, text: text, id: id, showInChannel: showInChannel, in: cid)
    }

    /// A thread's replies, oldest first.
    public func replies(to parentId: String, limit: Int = 25) async throws -> [ChatMessage] {
        try await client.replies(to: parentId, limit: limit)
    }

    /// Marks a thread read (its own read state; the channel's does not move).
    public func markThreadRead(parentId: String) async throws {
        try await client.markThreadRead(cid, parentId: parentId)
    }
}

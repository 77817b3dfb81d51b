import Foundation
import TicksProtocol

/// Editing and deleting messages, threads, and the user's unread counts.
/// Each call goes to the server; the events it causes (`message.updated`,
/// `message.deleted`, `message.new`) update every open channel, this
/// client's included, as they do for other members.
extension ChatClient {
    /// Replaces an own message's text. Receipts do not change: whoever had
    /// received or read it still has.
    @discardableResult
    public func edit(messageId id: String, text: String) async throws -> ChatMessage {
        let message = try await api().editMessage(id, text: text)
        return try await apply(message, as: .messageUpdated)
    }

    /// Deletes a message (an own one, or any as the channel's manager). It is
    /// never unread again; `hard` removes its text for good.
    @discardableResult
    public func delete(messageId id: String, hard: Bool = false) async throws -> ChatMessage {
        let message = try await api().deleteMessage(id, hard: hard)
        return try await apply(message, as: .messageDeleted)
    }

    /// Replies in the thread of `parentId`. A reply shown only in its thread
    /// counts in the thread's unread count, never the channel's.
    @discardableResult
    public func reply(
        to parentId: String, text: String, id: String? = nil, showInChannel: Bool = false, in cid: ChannelID
    ) async throws -> ChatMessage {
        let id = id ?? UUID().uuidString.lowercased()
        let message = try await api().sendReply(
            id: id, text: text, to: parentId, showInChannel: showInChannel, in: cid)
        return try await apply(message, as: .messageNew)
    }

    /// The thread's replies, oldest first (at most `limit`, the newest ones).
    public func replies(to parentId: String, limit: Int = 25) async throws -> [ChatMessage] {
        let messages = try await api().replies(to: parentId, limit: limit)
        let me = try connectedUserID()
        return messages.map { ChatMessage(thread: $0, currentUserID: me) }
    }

    /// Marks the thread of `parentId` read: its unread count drops to 0; the
    /// channel's read state does not move.
    public func markThreadRead(_ cid: ChannelID, parentId: String) async throws {
        _ = try await api().markThreadRead(cid, parentID: parentId)
    }

    /// The current user's unread counts: in total, by channel and by thread.
    public func unreadCounts() async throws -> UnreadCounts {
        let reply = try await api().unread()
        return UnreadCounts(
            totalUnreadCount: reply.totalUnreadCount,
            channels: Dictionary(
                reply.channels.compactMap { entry in ChannelID(cid: entry.channelID).map { ($0, entry.unreadCount) } },
                uniquingKeysWith: { $1 }),
            threads: Dictionary(reply.threads.map { ($0.parentMessageID, $0.unreadCount) }, uniquingKeysWith: { $1 }))
    }

    /// Why the current user's unread count in `cid` is what it is: the count
    /// the server keeps, the same count made afresh from the messages after
    /// the read cursor, and those messages (the newest 100) with the rule
    /// each followed. For a "stuck" badge: when ``UnreadExplanation/isConsistent``
    /// is false the kept count drifted, and `POST /unread/recount` (server
    /// side) sets it right.
    public func explainUnread(_ cid: ChannelID) async throws -> UnreadExplanation {
        let reply = try await api().explainUnread(cid)
        return UnreadExplanation(
            cid: cid, unreadCount: reply.unreadCount, counted: reply.counted, lastRead: reply.lastRead?.date,
            lastReadMessageId: reply.lastReadMessageID,
            counts: Dictionary(
                reply.counts.compactMap { key, value in UnreadExplanation.Rule(rawValue: key).map { ($0, value) } },
                uniquingKeysWith: { $1 }),
            messages: reply.messages.compactMap { entry in
                UnreadExplanation.Rule(rawValue: entry.rule).map {
                    UnreadExplanation.Entry(messageId: entry.id, createdAt: entry.createdAt.date, rule: $0)
                }
            })
    }

    /// Applies a message the server answered with as its event would, and returns it as the app sees it.
    private func apply(_ message: Message, as type: EventType) async throws -> ChatMessage {
        var event = Event(type: type, createdAt: message.updatedAt, cid: message.cid, user: message.user)
        event.message = message
        await handle(event)
        let me = try connectedUserID()
        if let shown = try? state(of: message.cid).message(withID: message.id) {
            return shown
        }
        return ChatMessage(thread: message, currentUserID: me)
    }
}

/// The current user's unread counts (`ChatClient.unreadCounts()`).
public struct UnreadCounts: Sendable, Equatable {
    public var totalUnreadCount: Int
    /// Channels with unread messages.
    public var channels: [ChannelID: Int]
    /// Threads with unread replies, by parent message id.
    public var threads: [String: Int]
}

/// A channel's unread count explained (``ChatClient/explainUnread(_:)``).
public struct UnreadExplanation: Sendable, Equatable {
    /// Why a message after the read cursor counts, or not.
    public enum Rule: String, Sendable, Equatable, CaseIterable {
        /// Another member's message after the cursor: it counts.
        case counted
        /// The user's own: never unread.
        case own
        /// Deleted: never unread.
        case deleted
        /// A reply shown only in its thread: counts in the thread, not the channel.
        case threadOnly = "thread_only"
    }

    /// A message after the read cursor.
    public struct Entry: Sendable, Equatable {
        public var messageId: String
        public var createdAt: Date
        public var rule: Rule
        public var isCounted: Bool { rule == .counted }
    }

    public var cid: ChannelID
    /// The count the server keeps and serves (channel states, `unreadCounts()`).
    public var unreadCount: Int
    /// The same count made afresh from the messages.
    public var counted: Int
    /// When the user last read the channel; nil when they are not a member.
    public var lastRead: Date?
    public var lastReadMessageId: String?
    /// Every message after the cursor, by rule.
    public var counts: [Rule: Int]
    /// The newest 100 of them at most, oldest first.
    public var messages: [Entry]

    /// Whether the kept count is the count the messages give.
    public var isConsistent: Bool { unreadCount == counted }
}

extension ChatMessage {
    /// A message outside a loaded channel's list (a thread reply): no statuses.
    init(thread message: Message, currentUserID: String) {
        self.init(
            id: message.id, cid: message.cid, text: message.text,
            author: ChatUser(message.user), createdAt: message.createdAt.date, extraData: message.custom,
            isSentByCurrentUser: message.user.id == currentUserID, localState: nil, deliveryStatus: nil, readCount: 0,
            deliveredCount: 0, isDeleted: message.deletedAt != nil, editedAt: message.textUpdatedAt?.date,
            replyCount: message.replyCount, parentId: message.parentID, position: nil)
    }
}

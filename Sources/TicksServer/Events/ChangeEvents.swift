import TicksProtocol
import TicksReceipts

/// The event each kind of committed change owes, built once for the three
/// roads that tell it: live (`EventPublisher`), the webhook outbox
/// (`HookEvents`) and `POST /sync` (`SyncEvents`). Who hears it is not
/// decided here: each road sends to its own audience, and receipts follow
/// `ReceiptHearing`.
///
/// `user` is whom the event is about, as Stream's events have it: the author
/// of a new message, the member who joined, left or read, and for an edit,
/// a deletion or a channel change the user who made it (nil when a server
/// token acted as nobody).
enum ChangeEvents {
    /// `message.new`.
    static func messageNew(_ message: MessageRecord, users: [String: User]) -> Event {
        var event = Event(
            type: .messageNew, createdAt: message.createdAt, cid: message.cid,
            user: Presenter.user(message.userID, users))
        event.message = Presenter.message(message, users: users)
        return event
    }

    /// `notification.message_new`: `message.new` for a member's connections
    /// that do not watch the channel, with the channel (its `config` too),
    /// which a channel list then watches.
    static func notificationMessageNew(_ message: MessageRecord, in channel: Channel, users: [String: User]) -> Event {
        var event = messageNew(message, users: users)
        event.type = .notificationMessageNew
        event.channel = channel
        return event
    }

    /// `message.updated` / `message.deleted`, at the time of the change
    /// (by default its deletion, else its last edit).
    static func messageChanged(
        _ type: EventType, _ message: MessageRecord, by actor: String?, hardDelete: Bool? = nil, at: Timestamp? = nil,
        users: [String: User]
    ) -> Event {
        assert(type == .messageUpdated || type == .messageDeleted)
        var event = Event(
            type: type, createdAt: at ?? message.deletedAt ?? message.updatedAt ?? message.createdAt, cid: message.cid,
            user: actor.map { Presenter.user($0, users) })
        event.message = Presenter.message(message, users: users)
        event.messageID = message.id
        event.hardDelete = hardDelete
        return event
    }

    /// `member.added`, `member.updated`, `member.removed` and the
    /// `notification.*_channel` the member concerned gets: the event is about them.
    static func member(_ type: EventType, _ member: Member, in cid: ChannelID, at: Timestamp) -> Event {
        var event = Event(type: type, createdAt: at, cid: cid, user: member.user)
        event.member = member
        return event
    }

    /// A member who left, as the events that tell it show them (joined at the time they left).
    static func departed(_ userID: String, users: [String: User], at: Timestamp) -> Member {
        Member(user: Presenter.user(userID, users), createdAt: at)
    }

    /// `channel.created` / `.updated` / `.truncated` / `.deleted`, with the
    /// channel as the change left it. A deleted channel has no members and
    /// no messages: it shows `deleted_at`, `truncated_at` and a member count of 0.
    static func channel(
        _ type: EventType, _ record: ChannelRecord, config: ChannelConfig, users: [String: User], by actor: String?,
        at: Timestamp
    ) -> Event {
        var channel = Presenter.channel(record, config: config, users: users)
        if type == .channelDeleted {
            channel.deletedAt = at
            channel.truncatedAt = at
            channel.memberCount = 0
        }
        var event = Event(type: type, createdAt: at, cid: record.cid, user: actor.map { Presenter.user($0, users) })
        event.channel = channel
        return event
    }

    /// `message.read`: `reader` has read up to `lastReadMessageID`.
    static func messageRead(by reader: User, in cid: ChannelID, at: Timestamp, upTo lastReadMessageID: String?) -> Event
    {
        var event = Event(type: .messageRead, createdAt: at, cid: cid, user: reader)
        event.lastReadMessageID = lastReadMessageID
        return event
    }

    /// `message.read` with `thread`: `reader`'s thread read state (live, and in `POST /sync`).
    static func threadRead(_ read: ThreadRead, by reader: User, in cid: ChannelID) -> Event {
        var event = messageRead(by: reader, in: cid, at: read.readAt, upTo: read.lastReadMessageID)
        event.thread = MessageThread(
            parentMessageID: read.parent.id, channelCID: cid.rawValue, createdByUserID: read.parent.userID,
            replyCount: read.parent.replyCount, createdAt: read.parent.createdAt)
        return event
    }

    /// `notification.mark_threads_read` (Ticks' own): every thread of
    /// `reader`'s is read; their counts, as `notification.mark_read` carries them.
    static func markedThreadsRead(by reader: User, at: Timestamp, _ read: ThreadsRead) -> Event {
        var event = Event(type: .notificationMarkThreadsRead, createdAt: at, user: reader)
        event.totalUnreadCount = read.totals.messages
        event.unreadChannels = read.totals.channels
        event.unreadThreads = read.unreadThreads
        return event
    }

    /// `notification.mark_unread` with `thread_id`: `reader` marked a thread unread.
    static func markedThreadUnread(_ unread: ThreadMarkedUnread, by reader: User, in cid: ChannelID, at: Timestamp)
        -> Event
    {
        var event = Event(type: .notificationMarkUnread, createdAt: at, cid: cid, user: reader)
        event.threadID = unread.parentID
        event.unreadThreadMessages = unread.unread
        event.unreadThreads = unread.unreadThreads
        return event
    }

    /// `message.delivered`: `reader`'s devices have received up to `lastDeliveredMessageID`.
    static func messageDelivered(
        by reader: User, in cid: ChannelID, at: Timestamp, deliveredAt: Timestamp, upTo lastDeliveredMessageID: String?
    ) -> Event {
        var event = Event(type: .messageDelivered, createdAt: at, cid: cid, user: reader)
        event.lastDeliveredAt = deliveredAt
        event.lastDeliveredMessageID = lastDeliveredMessageID
        return event
    }

    /// `notification.mark_read`, to the reader alone, with their counts
    /// (`totals` nil when the road stamps them later, as sync does).
    static func markedRead(
        by reader: User, in cid: ChannelID, at: Timestamp, state: MemberState, totals: UnreadTotals?
    ) -> Event {
        var event = Event(type: .notificationMarkRead, createdAt: at, cid: cid, user: reader)
        event.lastReadMessageID = state.lastReadMessageID
        event.unreadCount = state.unread
        event.totalUnreadCount = totals?.messages
        event.unreadChannels = totals?.channels
        return event
    }

    /// `message.read_by_all` / `message.delivered_to_all`: every member but
    /// the author has reached the author's messages up to `messageID` (R13).
    static func reachedAll(_ reached: ReachedAll, in cid: ChannelID, at: Timestamp) -> Event {
        reachedAll(kind: reached.kind, messageID: reached.messageID, in: cid, at: at)
    }

    static func reachedAll(kind: CursorKind, messageID: String, in cid: ChannelID, at: Timestamp) -> Event {
        var event = Event(type: kind == .read ? .messageReadByAll : .messageDeliveredToAll, createdAt: at, cid: cid)
        event.messageID = messageID
        return event
    }

    /// `notification.mark_unread`, which tells the reader's new read position.
    static func markedUnread(_ outcome: CursorOutcome) -> Event {
        var event = Event(
            type: .notificationMarkUnread, createdAt: outcome.at, cid: outcome.channel.cid, user: outcome.reader)
        event.firstUnreadMessageID = outcome.state.firstUnreadMessageID
        event.lastReadAt = outcome.state.lastRead
        event.lastReadMessageID = outcome.state.lastReadMessageID
        event.unreadMessages = outcome.state.unread
        event.totalUnreadCount = outcome.totals.messages
        event.unreadChannels = outcome.totals.channels
        return event
    }
}

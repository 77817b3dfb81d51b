import Logging
import TicksProtocol
import TicksReceipts
import Tracing

/// Turns committed changes into WebSocket events and sends each only to the
/// connections allowed to see it (docs/events.md, "Who receives what"; R8–R10 in docs/receipt-rules.md). Called after the store
/// has committed (R12).
struct EventPublisher: Sendable {
    let hub: ConnectionHub
    /// The other nodes, when several share the store.
    let bus: (any EventBus)?
    let metrics: ServerMetrics
    let logger: Logger
    /// Who hears of receipts; the store applies it when it commits a move.
    let audience: ReceiptAudience
    /// Whether each event is an `events.publish` span (`TicksServerConfiguration.tracing`).
    var tracing = false

    /// `message.new` to every member, each with their own unread counts: the
    /// message is encoded once for all of them (`EncodedEvent`), and each
    /// recipient's frame ends with their counts.
    func messageNew(_ outcome: SendOutcome, channel: ChannelRecord, users: [String: User]) throws {
        var event = Event(
            type: .messageNew, createdAt: outcome.message.createdAt, cid: channel.cid,
            user: Presenter.user(outcome.message.userID, users))
        event.message = Presenter.message(outcome.message, users: users)
        event.watcherCount = hub.connectedCount(among: outcome.recipients.map(\.userID))
        var endings: [String: String] = [:]
        for recipient in outcome.recipients {
            endings[recipient.userID] =
                #","unread_count":\#(recipient.channelUnread),"total_unread_count":\#(recipient.totals.messages),"#
                + #""unread_channels":\#(recipient.totals.channels)"#
        }
        try publish(
            EncodedEvent(object: JSONCoding.data(event), endings: endings), type: .messageNew, to: Array(endings.keys))
    }

    /// The `message.read` event for a read state (also the answer to mark read).
    static func messageRead(_ outcome: CursorOutcome) -> Event {
        var event = Event(type: .messageRead, createdAt: outcome.at, cid: outcome.channel.cid, user: outcome.reader)
        event.lastReadMessageID = outcome.state.lastReadMessageID
        return event
    }

    /// Events for a cursor that moved: `message.read` / `message.delivered` to
    /// the members who may see it (`CursorNotice`), and `notification.mark_read` to the reader.
    func cursorMoved(_ outcome: CursorOutcome) throws {
        guard outcome.update.changed else { return }
        let reader = outcome.reader
        for move in outcome.update.moves {
            (move.kind == .read ? metrics.readMoves : metrics.deliveredMoves).increment()
        }
        let own = [reader.id]
        let told = CursorNotice(outcome)
        if let read = told.read {
            try send(read, to: told.othersSeeRead ? outcome.recipients : own)
            var notification = Event(
                type: .notificationMarkRead, createdAt: outcome.at, cid: outcome.channel.cid, user: reader)
            notification.lastReadMessageID = outcome.state.lastReadMessageID
            notification.unreadCount = outcome.state.unread
            notification.totalUnreadCount = outcome.totals.messages
            notification.unreadChannels = outcome.totals.channels
            try send(notification, to: own)
        }
        guard let delivered = told.delivered else { return }
        if told.othersSeeDelivered {
            // After a visible read the reader's own connections had message.read.
            try send(delivered, to: told.read == nil ? outcome.recipients : outcome.recipients.filter { $0 != reader.id })
        } else if told.read == nil {
            try send(delivered, to: own)
        }
    }

    /// `notification.mark_unread` to the reader's own connections.
    func markedUnread(_ outcome: CursorOutcome) throws {
        guard outcome.update.changed else { return }
        try send(Self.markedUnread(outcome), to: [outcome.reader.id])
    }

    static func markedUnread(_ outcome: CursorOutcome) -> Event {
        var event = Event(
            type: .notificationMarkUnread, createdAt: outcome.at, cid: outcome.channel.cid, user: outcome.reader)
        event.firstUnreadMessageID = outcome.state.firstUnreadMessageID
        event.lastReadAt = outcome.state.readAt
        event.lastReadMessageID = outcome.state.lastReadMessageID
        event.unreadMessages = outcome.state.unread
        event.totalUnreadCount = outcome.totals.messages
        event.unreadChannels = outcome.totals.channels
        return event
    }

    /// `member.added` / `member.removed` to the members and the member concerned.
    func membership(
        _ type: EventType, member: Member, channel: ChannelRecord, recipients: [String], at: Timestamp
    ) throws {
        var event = Event(type: type, createdAt: at, cid: channel.cid, user: member.user)
        event.member = member
        try send(event, to: Set(recipients).union([member.userID]))
    }

    /// `notification.added_to_channel` / `notification.removed_from_channel`
    /// to the member concerned, on all their connections: a channel list
    /// that does not show the channel yet learns of it (or forgets it).
    func membershipNotice(_ type: EventType, member: Member, snapshot: ChannelSnapshot, at: Timestamp) throws {
        var event = Event(type: type, createdAt: at, cid: snapshot.channel.cid, user: member.user)
        event.channel = Presenter.channel(snapshot.channel, config: snapshot.config, users: snapshot.users)
        event.member = member
        try send(event, to: [member.userID])
    }

    func send(_ event: Event, to userIDs: some Sequence<String>) throws {
        try publish(EncodedEvent(JSONCoding.data(event)), type: event.type, to: Array(userIDs))
    }

    /// To this node's connections, and through the bus to the other nodes'. In a trace, an
    /// `events.publish` span: the bus carries its context, so the other nodes' `ws.fanout`
    /// spans are its children.
    func publish(_ event: EncodedEvent, type: EventType, to userIDs: [String]) {
        guard tracing, ServiceContext.current != nil else {
            hub.send(event, to: userIDs)
            bus?.publish(event, to: userIDs)
            metrics.eventsPublished.increment()
            return
        }
        withSpan("events.publish", ofKind: .producer) { span in
            let connections = hub.send(event, to: userIDs)
            bus?.publish(event, to: userIDs)
            metrics.eventsPublished.increment()
            span.attributes["ticks.event.type"] = type.rawValue
            span.attributes["ticks.event.recipients"] = userIDs.count
            span.attributes["ticks.ws.connections"] = connections
        }
    }
}

/// What a committed cursor move tells, and whether members other than the
/// reader may hear it (R1, R8–R10): the one rule behind the live events and
/// the webhooks. A visible read says "delivered" too (R1), so `delivered` is
/// for the others only when no read is told them; a private read (R10) of a
/// message not yet delivered still delivers it, which the others may see.
struct CursorNotice {
    /// `message.read`, when the read cursor moved.
    var read: Event?
    var othersSeeRead = false
    /// `message.delivered`, when the delivered cursor moved and the channel type sends delivery events.
    var delivered: Event?
    var othersSeeDelivered = false

    init(_ outcome: CursorOutcome) {
        guard outcome.update.changed else { return }
        let reader = outcome.reader
        let visibility = ReceiptVisibility(config: outcome.config, users: [reader.id: reader], viewer: nil)
        if outcome.update.moved(.read) {
            read = EventPublisher.messageRead(outcome)
            othersSeeRead = visibility.readVisible(reader.id)
        }
        guard outcome.update.moved(.delivered), outcome.config.deliveryEvents else { return }
        var event = Event(type: .messageDelivered, createdAt: outcome.at, cid: outcome.channel.cid, user: reader)
        event.lastDeliveredAt = outcome.state.deliveredAt
        event.lastDeliveredMessageID = outcome.state.lastDeliveredMessageID
        delivered = event
        othersSeeDelivered = visibility.deliveredVisible(reader.id) && !othersSeeRead
    }

    /// The events anyone but the reader may be told (webhooks, with no viewer).
    var toOthers: [Event] {
        (othersSeeRead ? [read].compactMap { $0 } : []) + (othersSeeDelivered ? [delivered].compactMap { $0 } : [])
    }
}

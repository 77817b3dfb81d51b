import Hummingbird
import TicksProtocol

/// `POST /sync`: the events a client missed in its channels since a time,
/// so it can bring a cache up to date after being offline without loading
/// every channel again (Stream's sync, with Ticks' bounds made explicit).
///
/// Ticks keeps no log of events: what changed is read from the state
/// itself — messages stored, edited or deleted after the time, members who
/// joined or left, and each member's latest read and delivered cursor if it
/// moved — and told as the events that would have said so, in time order.
/// A channel that changed too much for that (`ServerLimits.syncEventsPerChannel`)
/// is named in `reload_cids`; channels past what one answer holds
/// (`syncEventsPerAnswer`) come back in `remaining_cids`, to ask again.
struct SyncController {
    let store: any TicksStore
    let limits: ServerLimits

    func addRoutes(to group: RouterGroup<TicksRequestContext>) {
        group.on(.sync, use: sync)
    }

    struct SyncRequest: Decodable {
        var channelCIDs: [String]?
        var lastSyncAt: String?
        var withInaccessibleCIDs: Bool?
        var userID: String?

        enum CodingKeys: String, CodingKey {
            case channelCIDs = "channel_cids"
            case lastSyncAt = "last_sync_at"
            case withInaccessibleCIDs = "with_inaccessible_cids"
            case userID = "user_id"
        }
    }

    struct SyncResponse: Encodable {
        var events: [Event]
        /// Channels the user cannot read (`with_inaccessible_cids`).
        var inaccessibleCIDs: [String]?
        /// Channels that missed too much to tell: reload them.
        var reloadCIDs: [String]
        /// Channels this answer had no room for: sync them in another call.
        var remainingCIDs: [String]

        enum CodingKeys: String, CodingKey {
            case events
            case inaccessibleCIDs = "inaccessible_cids"
            case reloadCIDs = "reload_cids"
            case remainingCIDs = "remaining_cids"
        }
    }

    @Sendable func sync(_ request: Request, context: TicksRequestContext) async throws -> Response {
        var request = request
        let body = try await request.decodeJSON(SyncRequest.self)
        let userID = try context.requireActingUser(named: body.userID, request.queryParameter("user_id"))
        let cids = try Self.channels(body.channelCIDs)
        let now = Timestamp.now()
        let since = try Self.since(body.lastSyncAt, now: now)

        var inaccessible: [String] = []
        var reload: [String] = []
        var remaining: [String] = []
        // The channels that fit, read one at a time: what is held stays within the answer's bound.
        var events: [Event] = []
        let builder = SyncEvents(userID: userID, since: since, now: now)
        for cid in cids {
            guard remaining.isEmpty else {
                remaining.append(cid.rawValue)
                continue
            }
            let changes = try await store.changes(in: cid, for: userID, since: since, limit: limits.syncEventsPerChannel)
            guard let channelEvents = builder.events(of: changes, in: cid, limit: limits.syncEventsPerChannel) else {
                reload.append(cid.rawValue)
                continue
            }
            guard events.count + channelEvents.count <= limits.syncEventsPerAnswer else {
                remaining.append(cid.rawValue)
                continue
            }
            events += channelEvents
            if changes.access == .gone { inaccessible.append(cid.rawValue) }
        }
        // The totals after every channel was read: the counts the events carry are the latest.
        let totals = try await store.unreadTotals(of: userID)
        events = events.map { SyncEvents.stamp($0, with: totals) }
        return try context.respond(
            SyncResponse(
                events: SyncEvents.inTimeOrder(events),
                inaccessibleCIDs: body.withInaccessibleCIDs == true ? inaccessible : nil,
                reloadCIDs: reload, remainingCIDs: remaining), status: .created)
    }

    /// `channel_cids`: 1 to `SyncLimits.channelsPerCall` valid cids, each once.
    static func channels(_ given: [String]?) throws -> [ChannelID] {
        guard let given, !given.isEmpty else { throw APIError.input("channel_cids is required: the channels to sync") }
        guard given.count <= SyncLimits.channelsPerCall else {
            throw APIError.input("channel_cids has \(given.count) cids; at most \(SyncLimits.channelsPerCall)")
        }
        return try given.uniqued().map { cid in
            guard let channel = ChannelID(cid: cid) else {
                throw APIError.input("cid '\(cid.prefix(64))' is not valid: it is type:id")
            }
            return channel
        }
    }

    /// `last_sync_at`: an RFC 3339 time no older than `SyncLimits.horizon`.
    static func since(_ given: String?, now: Timestamp) throws -> Timestamp {
        guard let given else { throw APIError.input("last_sync_at is required: when the client was last in sync") }
        guard let since = Timestamp(rfc3339: given) else {
            throw APIError.input("last_sync_at '\(given.prefix(64))' is not an RFC 3339 time")
        }
        let horizon = SyncLimits.horizon.components.seconds * 1_000_000
        guard since.microseconds >= now.microseconds - horizon else {
            throw APIError.input(
                "last_sync_at is more than 30 days ago: too much may have changed; reload the channels instead")
        }
        return since
    }
}

/// Turns what changed in a channel into the events that would have told
/// `userID` of it live, with the same visibility rules (R8–R10): one per
/// message stored, edited or deleted, member added or removed, and one for
/// each member's latest read and delivered cursor that moved.
struct SyncEvents {
    let userID: String
    let since: Timestamp
    let now: Timestamp

    /// The channel's events, oldest first; nil when there are more than `limit` (reload it).
    func events(of changes: ChannelChanges, in cid: ChannelID, limit: Int) -> [Event]? {
        switch changes.access {
        case .gone:
            // Nothing of a channel the user cannot read is told, not even whether it exists.
            return [Event(type: .notificationRemovedFromChannel, createdAt: now, cid: cid.rawValue)]
        case .deleted(let at):
            return [Event(type: .channelDeleted, createdAt: at, cid: cid.rawValue)]
        case .member:
            guard !changes.tooMany, let record = changes.channel, let config = changes.config else { return nil }
            let events = memberEvents(changes, record: record, config: config)
            return events.count <= limit ? events : nil
        }
    }

    private func memberEvents(_ changes: ChannelChanges, record: ChannelRecord, config: ChannelConfig) -> [Event] {
        let users = changes.users
        let channel = Presenter.channel(record, config: config, users: users)
        let own = changes.members.first { $0.userID == userID }
        var events: [Event] = []
        func event(_ type: EventType, at: Timestamp, user: String?) -> Event {
            Event(type: type, createdAt: at, cid: record.cid, user: user.map { Presenter.user($0, users) })
        }

        if let truncatedAt = record.truncatedAt, truncatedAt > since {
            var truncated = event(.channelTruncated, at: truncatedAt, user: nil)
            truncated.channel = channel
            events.append(truncated)
        }
        for state in changes.members where state.joinedAt > since {
            var added = event(.memberAdded, at: state.joinedAt, user: state.userID)
            added.member = Presenter.member(state, of: record, users: users)
            events.append(added)
        }
        for removal in changes.removals {
            var removed = event(.memberRemoved, at: removal.at, user: removal.userID)
            removed.member = Member(user: Presenter.user(removal.userID, users), createdAt: removal.at)
            events.append(removed)
        }
        for message in changes.newMessages where !message.hardDeleted {
            var new = event(.messageNew, at: message.createdAt, user: message.userID)
            new.message = Presenter.message(message, users: users)
            new.unreadCount = own?.unread
            events.append(new)
        }
        for message in changes.changedMessages {
            let deleted = message.deletedAt.map { $0 > since } ?? false
            var changed = event(
                deleted ? .messageDeleted : .messageUpdated,
                at: deleted ? message.deletedAt! : (message.updatedAt ?? message.createdAt), user: nil)
            changed.message = Presenter.message(message, users: users)
            changed.messageID = message.id
            if deleted { changed.hardDelete = message.hardDeleted }
            events.append(changed)
        }
        let visibility = ReceiptVisibility(config: config, users: users, viewer: userID)
        for state in changes.members {
            events += cursorEvents(state, record: record, config: config, visibility: visibility, event: event)
        }
        if record.updatedAt > since {
            var updated = event(.channelUpdated, at: record.updatedAt, user: nil)
            updated.channel = channel
            events.append(updated)
        }
        return Self.inTimeOrder(events)
    }

    /// The member's latest read (and, past it, delivered) cursor, if it moved
    /// after `since` and the user may see it; for the user themselves, also
    /// `notification.mark_read` with their counts.
    private func cursorEvents(
        _ state: MemberState, record: ChannelRecord, config: ChannelConfig, visibility: ReceiptVisibility,
        event: (EventType, Timestamp, String?) -> Event
    ) -> [Event] {
        var events: [Event] = []
        // Cursors at or below a truncation point at messages that are gone.
        let readShown =
            state.readAt > since && state.cursors.read > record.truncatedSeq && state.lastReadMessageID != nil
            && visibility.readVisible(state.userID)
        if readShown {
            var read = event(.messageRead, state.readAt, state.userID)
            read.lastReadMessageID = state.lastReadMessageID
            events.append(read)
            if state.userID == userID {
                var notification = event(.notificationMarkRead, state.readAt, state.userID)
                notification.lastReadMessageID = state.lastReadMessageID
                notification.unreadCount = state.unread
                events.append(notification)
            }
        }
        let deliveredShown =
            state.deliveredAt > since && state.cursors.delivered > record.truncatedSeq
            && state.lastDeliveredMessageID != nil && visibility.deliveredVisible(state.userID)
            && (config.deliveryEvents || state.userID == userID)
            // A read shown at the same cursor says delivered already.
            && !(readShown && state.cursors.delivered == state.cursors.read)
        if deliveredShown {
            var delivered = event(.messageDelivered, state.deliveredAt, state.userID)
            delivered.lastDeliveredAt = state.deliveredAt
            delivered.lastDeliveredMessageID = state.lastDeliveredMessageID
            events.append(delivered)
        }
        return events
    }

    /// The user's totals on the events that carry them (`message.new`, the
    /// user's `notification.mark_read`), read once after every channel.
    static func stamp(_ event: Event, with totals: UnreadTotals) -> Event {
        guard event.type == .messageNew || event.type == .notificationMarkRead else { return event }
        var event = event
        event.totalUnreadCount = totals.messages
        event.unreadChannels = totals.channels
        return event
    }

    /// Oldest first; events of the same time keep their order (a member
    /// added before the read that joining gave them).
    static func inTimeOrder(_ events: [Event]) -> [Event] {
        events.enumerated().sorted { ($0.element.createdAt, $0.offset) < ($1.element.createdAt, $1.offset) }.map(\.element)
    }
}

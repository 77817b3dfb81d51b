import TicksProtocol
import TicksReceipts

/// Turns what changed in a channel into the events that would have told
/// `userID` of it live, with the same visibility rules (R8–R10): one per
/// message stored, edited or deleted, member added or removed, one for
/// each member's latest read and delivered cursor that moved, and where
/// "read / delivered by everyone" of the user's messages stands (R13).
struct SyncEvents {
    let userID: String
    let since: Timestamp
    let now: Timestamp
    /// R15: the user sees the others' reads only as deliveries.
    var seesReadsAsDeliveries = false

    /// The channel's events, oldest first; nil when there are more than `limit` (reload it).
    /// `reached`: where "read / delivered by everyone" of the user's own messages stands
    /// now (R13), when `mayHaveReachedAll` asked for it.
    func events(of changes: ChannelChanges, reached: AllReachedUpTo? = nil, in cid: ChannelID, limit: Int) -> [Event]? {
        switch changes.access {
        case .gone:
            // Nothing of a channel the user cannot read is told, not even whether it exists.
            return [Event(type: .notificationRemovedFromChannel, createdAt: now, cid: cid)]
        case .deleted(let at):
            let deleter = changes.actors.deletedBy.map { Presenter.user($0, changes.users) }
            return [Event(type: .channelDeleted, createdAt: at, cid: cid, user: deleter)]
        case .member:
            guard !changes.tooMany, let record = changes.channel, let config = changes.config else { return nil }
            let events = memberEvents(changes, record: record, config: config, reached: reached)
            return events.count <= limit ? events : nil
        }
    }

    /// Whether "read / delivered by everyone" of the user's own messages may
    /// have moved after `since`: another member's cursor moved, or a member
    /// left. Then the caller reads where it stands (`TicksStore.allReached`)
    /// and the answer tells it, as the live `message.read_by_all` /
    /// `message.delivered_to_all` would have; a client that missed those
    /// would otherwise never learn it without reloading the channel.
    func mayHaveReachedAll(_ changes: ChannelChanges) -> Bool {
        changes.access == .member && othersLastMove(changes) != nil
    }

    /// The latest time after `since` another member's cursor moved or a member left; nil if none did.
    private func othersLastMove(_ changes: ChannelChanges) -> Timestamp? {
        let moves = changes.members.filter { $0.userID != userID }.map { max($0.readAt, $0.deliveredAt) }
        return (moves + changes.removals.map(\.at)).filter { $0 > since }.max()
    }

    private func memberEvents(
        _ changes: ChannelChanges, record: ChannelRecord, config: ChannelConfig, reached: AllReachedUpTo?
    ) -> [Event] {
        let users = changes.users
        let own = changes.members.first { $0.userID == userID }
        var events: [Event] = []
        // Who truncated, edited, deleted or updated: as the live events name them (`ChangeActors`).
        let actors = changes.actors
        if let truncatedAt = record.truncatedAt, truncatedAt > since {
            events.append(
                ChangeEvents.channel(
                    .channelTruncated, record, config: config, users: users, by: actors.truncatedBy, at: truncatedAt))
        }
        for state in changes.members where state.joinedAt > since {
            let member = Presenter.member(state, of: record, users: users)
            events.append(ChangeEvents.member(.memberAdded, member, in: record.cid, at: state.joinedAt))
        }
        for removal in changes.removals {
            let member = ChangeEvents.departed(removal.userID, users: users, at: removal.at)
            events.append(ChangeEvents.member(.memberRemoved, member, in: record.cid, at: removal.at))
        }
        for message in changes.newMessages where !message.hardDeleted {
            var new = ChangeEvents.messageNew(message, users: users)
            new.unreadCount = own?.unread
            events.append(new)
        }
        for message in changes.changedMessages {
            let deleted = message.deletedAt.map { $0 > since } ?? false
            events.append(
                ChangeEvents.messageChanged(
                    deleted ? .messageDeleted : .messageUpdated, message, by: actors.messages[message.id],
                    hardDelete: deleted ? message.hardDeleted : nil,
                    at: deleted ? message.deletedAt : (message.updatedAt ?? message.createdAt), users: users))
        }
        let visibility = ReceiptVisibility(
            config: config, users: users, viewer: userID, seesReadsAsDeliveries: seesReadsAsDeliveries)
        for state in changes.members {
            events += cursorEvents(state, record: record, visibility: visibility, users: users)
        }
        if let reached {
            events += reachedAllEvents(reached, changes: changes, in: record.cid)
        }
        // The user's own thread read states (others' are told live only, docs/api.md "Sync").
        for read in changes.threadReads {
            events.append(ChangeEvents.threadRead(read, by: Presenter.user(userID, users), in: record.cid))
        }
        if record.updatedAt > since {
            events.append(
                ChangeEvents.channel(
                    .channelUpdated, record, config: config, users: users, by: actors.updatedBy, at: record.updatedAt))
        }
        return Self.inTimeOrder(events)
    }

    /// The member's latest read (and, past it, delivered) cursor, if it moved
    /// after `since` and the user may see it; for the user themselves, also
    /// `notification.mark_read` with their counts.
    private func cursorEvents(
        _ state: MemberState, record: ChannelRecord, visibility: ReceiptVisibility, users: [String: User]
    ) -> [Event] {
        let shown = SyncedCursors(state, in: record, visibility: visibility, since: since)
        let member = Presenter.user(state.userID, users)
        var events: [Event] = []
        if shown.read {
            events.append(
                ChangeEvents.messageRead(by: member, in: record.cid, at: state.readAt, upTo: state.lastReadMessageID))
            if state.userID == userID {
                events.append(
                    ChangeEvents.markedRead(by: member, in: record.cid, at: state.readAt, state: state, totals: nil))
            }
        }
        if shown.delivered {
            events.append(
                ChangeEvents.messageDelivered(
                    by: member, in: record.cid, at: state.deliveredAt, deliveredAt: state.deliveredAt,
                    upTo: state.lastDeliveredMessageID))
        }
        return events
    }

    /// `message.delivered_to_all` and (unless R15 shows the user reads as
    /// deliveries) `message.read_by_all` for the newest of the user's messages
    /// everyone has reached, stamped with the latest move or departure that
    /// may have completed it, so they come after the cursor events in time
    /// order. A client keeps them only forward, so telling a position it
    /// already knew changes nothing.
    private func reachedAllEvents(_ reached: AllReachedUpTo, changes: ChannelChanges, in cid: ChannelID) -> [Event] {
        let at = othersLastMove(changes) ?? now
        var events: [Event] = []
        if let read = reached.read, !seesReadsAsDeliveries {
            events.append(ChangeEvents.reachedAll(kind: .read, messageID: read, in: cid, at: at))
        }
        if let delivered = reached.delivered {
            events.append(ChangeEvents.reachedAll(kind: .delivered, messageID: delivered, in: cid, at: at))
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
        events.enumerated().sorted { ($0.element.createdAt, $0.offset) < ($1.element.createdAt, $1.offset) }.map(
            \.element)
    }
}

import TicksProtocol
import TicksReceipts

/// The events a committed change owes the webhooks, built in the change's
/// transaction from what the store just wrote and what it read for them
/// (`reads(for:wanted:)`), so the outbox holds them before the commit
/// (docs/webhooks.md). Pure functions: the store does every read. `user` is
/// whom the event is about: the author, the reader, the member. Receipts
/// are the `Telling`'s webhook half, the same rules as for other members
/// live: a private read is never sent.
enum HookEvents {
    /// What the events `change` owes whose kinds are `wanted` need read; nil when it owes none.
    static func reads(for change: StoreChange, wanted: (EventType) -> Bool) -> ChangeReads? {
        switch change {
        case .messageSent(let outcome, _):
            let new = outcome.created && wanted(.messageNew)
            guard new || outcome.reachedAll.contains(where: { wanted(kind(of: $0)) }) else { return nil }
            return ChangeReads(users: new ? [outcome.message.userID] : [])
        case .messageUpdated(let record):
            return wanted(.messageUpdated) ? ChangeReads(users: [record.userID]) : nil
        case .messageDeleted(let record, _):
            return wanted(.messageDeleted) ? ChangeReads(users: [record.userID]) : nil
        case .channelCreated(let record, _): return channelReads(.channelCreated, record, wanted)
        case .channelUpdated(let record, _): return channelReads(.channelUpdated, record, wanted)
        case .channelTruncated(let record, _): return channelReads(.channelTruncated, record, wanted)
        case .channelDeleted(let record, _): return channelReads(.channelDeleted, record, wanted)
        case .membersAdded(let states, _, _):
            return !states.isEmpty && wanted(.memberAdded) ? ChangeReads(users: states.map(\.userID)) : nil
        case .membersRemoved(let userIDs, _, _):
            return !userIDs.isEmpty && wanted(.memberRemoved) ? ChangeReads(users: userIDs) : nil
        case .cursorsMoved:
            // Every receipt comes this way: the outcome carries all its events need (its hearers' privacy too).
            let kinds: [EventType] = [.messageRead, .messageDelivered, .messageReadByAll, .messageDeliveredToAll]
            return kinds.contains(where: wanted) ? ChangeReads() : nil
        case .markedUnread:
            return wanted(.notificationMarkUnread) ? ChangeReads() : nil
        case .messagePlayed:
            return wanted(.messagePlayed) ? ChangeReads() : nil
        }
    }

    /// The events `change` owes whose kinds are `wanted`, from what the store read for them.
    static func of(_ change: StoreChange, context: ChangeContext, wanted: (EventType) -> Bool) -> [HookEvent] {
        switch change {
        case .messageSent(let outcome, let channel): messageNew(outcome, in: channel, context, wanted)
        case .messageUpdated(let record): [message(.messageUpdated, record, context)]
        case .messageDeleted(let record, let hard): [message(.messageDeleted, record, hardDelete: hard, context)]
        case .channelCreated(let record, let at): channel(.channelCreated, record, at: at, context)
        case .channelUpdated(let record, let at): channel(.channelUpdated, record, at: at, context)
        case .channelTruncated(let record, let at): channel(.channelTruncated, record, at: at, context)
        case .channelDeleted(let record, let at): channel(.channelDeleted, record, at: at, context)
        case .membersAdded(let states, let record, let at): membersAdded(states, to: record, at: at, context)
        case .membersRemoved(let userIDs, let record, let at): membersRemoved(userIDs, from: record, at: at, context)
        case .cursorsMoved(let outcomes): cursors(outcomes)
        case .markedUnread(let outcome):
            CursorNotice.markedUnreadToOthers(outcome).map { [HookEvent(event: $0, channel: outcome.channel.cid)] }
                ?? []
        case .messagePlayed(let outcome): played(outcome)
        }
    }

    private static func kind(of reached: ReachedAll) -> EventType {
        reached.kind == .read ? .messageReadByAll : .messageDeliveredToAll
    }

    private static func channelReads(_ type: EventType, _ record: ChannelRecord, _ wanted: (EventType) -> Bool)
        -> ChangeReads?
    {
        wanted(type) ? ChangeReads(users: record.createdBy.map { [$0] } ?? [], channelType: record.type) : nil
    }

    /// `message.new` with the members to push to: every member but the
    /// author, for a message the channel shows (a reply shown only in its
    /// thread changes nobody's unread count, and is not pushed); then what the
    /// author's cursors jumping to their message made read by all (R13), as
    /// each author may see it (R15).
    private static func messageNew(
        _ outcome: SendOutcome, in channel: ChannelRecord, _ context: ChangeContext, _ wanted: (EventType) -> Bool
    ) -> [HookEvent] {
        let message = outcome.message
        let reached = Telling(reachedBy: outcome, in: channel.cid).toOthers.filter { wanted($0.type) }.map {
            HookEvent(event: $0, channel: channel.cid)
        }
        guard outcome.created, wanted(.messageNew) else { return reached }
        let threadOnly = message.parentID != nil && !message.showInChannel
        let push = threadOnly ? [] : context.recipients.filter { $0.userID != message.userID }
        let new = HookEvent(
            event: ChangeEvents.messageNew(message, users: context.users), channel: message.cid, pushCandidates: push)
        return [new] + reached
    }

    /// `message.read` / `message.delivered` as the other members may see them (`Telling`).
    private static func cursors(_ outcomes: [CursorOutcome]) -> [HookEvent] {
        outcomes.flatMap { outcome in
            Telling(outcome).toOthers.map { HookEvent(event: $0, channel: outcome.channel.cid) }
        }
    }

    /// `message.played`, when the other members may hear of it (R14: a private player's is never sent).
    private static func played(_ outcome: PlayOutcome) -> [HookEvent] {
        let notice = PlayNotice(outcome)
        return notice.othersSee ? [HookEvent(event: notice.event, channel: outcome.channel.cid)] : []
    }

    /// `message.updated` / `message.deleted`. The event names the author, who
    /// alone may edit (a server token or a moderator deleting is told live as the actor).
    private static func message(
        _ type: EventType, _ record: MessageRecord, hardDelete: Bool? = nil, _ context: ChangeContext
    ) -> HookEvent {
        HookEvent(
            event: ChangeEvents.messageChanged(
                type, record, by: record.userID, hardDelete: hardDelete, users: context.users),
            channel: record.cid)
    }

    /// `member.added` for each new member.
    private static func membersAdded(
        _ states: [MemberState], to channel: ChannelRecord, at: Timestamp, _ context: ChangeContext
    ) -> [HookEvent] {
        states.map { state in
            HookEvent(
                event: ChangeEvents.member(
                    .memberAdded, Presenter.member(state, of: channel, users: context.users), in: channel.cid, at: at),
                channel: channel.cid)
        }
    }

    /// `member.removed` for each member who left.
    private static func membersRemoved(
        _ userIDs: [String], from channel: ChannelRecord, at: Timestamp, _ context: ChangeContext
    ) -> [HookEvent] {
        userIDs.map { userID in
            HookEvent(
                event: ChangeEvents.member(
                    .memberRemoved, ChangeEvents.departed(userID, users: context.users, at: at), in: channel.cid,
                    at: at),
                channel: channel.cid)
        }
    }

    /// `channel.created` / `.updated` / `.truncated` / `.deleted`, with the
    /// channel as the change left it; none for a channel whose type is gone.
    private static func channel(_ type: EventType, _ record: ChannelRecord, at: Timestamp, _ context: ChangeContext)
        -> [HookEvent]
    {
        guard let config = context.config else { return [] }
        return [
            HookEvent(
                event: ChangeEvents.channel(type, record, config: config, users: context.users, by: nil, at: at),
                channel: record.cid)
        ]
    }
}

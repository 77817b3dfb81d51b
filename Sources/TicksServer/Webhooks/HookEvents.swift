import TicksProtocol
import TicksReceipts

/// The events a committed change owes the webhooks, built in the change's
/// transaction from what the store just wrote (so the outbox holds them
/// before the commit, docs/webhooks.md). `user` is whom the event is about:
/// the author, the reader, the member. Receipts follow the same privacy
/// rules as for other members (`CursorNotice`): a private read is never sent.
enum HookEvents {
    static func none() -> StoreProgram<[HookEvent]> { .done([]) }

    /// `message.new` with the members to push to: every member but the
    /// author, for a message the channel shows (a reply shown only in its
    /// thread changes nobody's unread count, and is not pushed).
    static func messageNew(_ outcome: SendOutcome, in channel: ChannelRecord, _ hooks: WebhookRecorder)
        -> StoreProgram<[HookEvent]>
    {
        guard outcome.created, hooks.wants(.messageNew) else { return none() }
        let message = outcome.message
        return Fetch.users([message.userID]).map { users in
            var event = Event(
                type: .messageNew, createdAt: message.createdAt, cid: channel.cid,
                user: Presenter.user(message.userID, users))
            event.message = Presenter.message(message, users: users)
            let threadOnly = message.parentID != nil && !message.showInChannel
            let push = threadOnly ? [] : outcome.recipients.filter { $0.userID != message.userID }
            return [HookEvent(event: event, pushCandidates: push)]
        }
    }

    /// `message.read` / `message.delivered` as the other members may see them.
    static func cursors(_ outcomes: [CursorOutcome]) -> StoreProgram<[HookEvent]> {
        .done(outcomes.flatMap { CursorNotice($0).toOthers }.map { HookEvent(event: $0) })
    }

    /// `notification.mark_unread`, which tells the member's read position:
    /// only when their reads are visible to the others (R8, R10).
    static func markedUnread(_ outcome: CursorOutcome) -> StoreProgram<[HookEvent]> {
        let reader = outcome.reader
        let visible = ReceiptVisibility(config: outcome.config, users: [reader.id: reader], viewer: nil)
            .readVisible(reader.id)
        return .done(outcome.update.changed && visible ? [HookEvent(event: EventPublisher.markedUnread(outcome))] : [])
    }

    /// `message.updated` / `message.deleted`.
    static func message(_ type: EventType, _ record: MessageRecord, hardDelete: Bool? = nil, _ hooks: WebhookRecorder)
        -> StoreProgram<[HookEvent]>
    {
        guard hooks.wants(type) else { return none() }
        return Fetch.users([record.userID]).map { users in
            var event = Event(
                type: type, createdAt: record.deletedAt ?? record.updatedAt ?? record.createdAt, cid: record.cid,
                user: Presenter.user(record.userID, users))
            event.message = Presenter.message(record, users: users)
            event.messageID = record.id
            event.hardDelete = hardDelete
            return [HookEvent(event: event)]
        }
    }

    /// `member.added` for each new member.
    static func membersAdded(
        _ states: [MemberState], to channel: ChannelRecord, at: Timestamp, _ hooks: WebhookRecorder
    )
        -> StoreProgram<[HookEvent]>
    {
        guard !states.isEmpty, hooks.wants(.memberAdded) else { return none() }
        return Fetch.users(states.map(\.userID)).map { users in
            states.map { state in
                let member = Presenter.member(state, of: channel, users: users)
                var event = Event(type: .memberAdded, createdAt: at, cid: channel.cid, user: member.user)
                event.member = member
                return HookEvent(event: event)
            }
        }
    }

    /// `member.removed` for each member who left.
    static func membersRemoved(
        _ userIDs: [String], from channel: ChannelRecord, at: Timestamp, _ hooks: WebhookRecorder
    )
        -> StoreProgram<[HookEvent]>
    {
        guard !userIDs.isEmpty, hooks.wants(.memberRemoved) else { return none() }
        return Fetch.users(userIDs).map { users in
            userIDs.map { userID in
                let member = Member(user: Presenter.user(userID, users), createdAt: at)
                var event = Event(type: .memberRemoved, createdAt: at, cid: channel.cid, user: member.user)
                event.member = member
                return HookEvent(event: event)
            }
        }
    }

    /// `channel.created` / `.updated` / `.truncated` / `.deleted`, with the channel as it is now.
    static func channel(_ type: EventType, _ record: ChannelRecord, at: Timestamp, _ hooks: WebhookRecorder)
        -> StoreProgram<[HookEvent]>
    {
        guard hooks.wants(type) else { return none() }
        return Fetch.texts(StoreSQL.channelType(record.type)).then { configs in
            Fetch.users(record.createdBy.map { [$0] } ?? []).map { users in
                guard let config = try configs.first.map(StoredJSON.config) else { return [] }
                var channel = Presenter.channel(record, config: config, users: users)
                if type == .channelDeleted {
                    channel.deletedAt = at
                    channel.memberCount = 0
                }
                var event = Event(type: type, createdAt: at, cid: record.cid)
                event.channel = channel
                return [HookEvent(event: event)]
            }
        }
    }
}

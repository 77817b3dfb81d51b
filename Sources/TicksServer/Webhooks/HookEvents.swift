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
            let threadOnly = message.parentID != nil && !message.showInChannel
            let push = threadOnly ? [] : outcome.recipients.filter { $0.userID != message.userID }
            return [HookEvent(event: ChangeEvents.messageNew(message, users: users), pushCandidates: push)]
        }
    }

    /// `message.read` / `message.delivered` as the other members may see them.
    static func cursors(_ outcomes: [CursorOutcome]) -> StoreProgram<[HookEvent]> {
        .done(outcomes.flatMap { CursorNotice($0).toOthers }.map { HookEvent(event: $0) })
    }

    /// `notification.mark_unread`, which tells the member's read position:
    /// only when their reads are visible to the others (R8, R10).
    static func markedUnread(_ outcome: CursorOutcome) -> StoreProgram<[HookEvent]> {
        .done(CursorNotice.markedUnreadToOthers(outcome).map { [HookEvent(event: $0)] } ?? [])
    }

    /// `message.updated` / `message.deleted`. The store does not know who
    /// made the change; the event names the author, who alone may edit (a
    /// server token or a moderator deleting is told live as the actor).
    static func message(_ type: EventType, _ record: MessageRecord, hardDelete: Bool? = nil, _ hooks: WebhookRecorder)
        -> StoreProgram<[HookEvent]>
    {
        guard hooks.wants(type) else { return none() }
        return Fetch.users([record.userID]).map { users in
            [HookEvent(event: ChangeEvents.messageChanged(type, record, by: record.userID, hardDelete: hardDelete, users: users))]
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
                HookEvent(event: ChangeEvents.member(
                    .memberAdded, Presenter.member(state, of: channel, users: users), in: channel.cid, at: at))
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
                HookEvent(event: ChangeEvents.member(
                    .memberRemoved, ChangeEvents.departed(userID, users: users, at: at), in: channel.cid, at: at))
            }
        }
    }

    /// `channel.created` / `.updated` / `.truncated` / `.deleted`, with the
    /// channel as the change left it; the store does not know who made the change.
    static func channel(_ type: EventType, _ record: ChannelRecord, at: Timestamp, _ hooks: WebhookRecorder)
        -> StoreProgram<[HookEvent]>
    {
        guard hooks.wants(type) else { return none() }
        return Fetch.texts(StoreSQL.channelType(record.type)).then { configs in
            Fetch.users(record.createdBy.map { [$0] } ?? []).map { users in
                guard let config = try configs.first.map(StoredJSON.config) else { return [] }
                return [HookEvent(event: ChangeEvents.channel(type, record, config: config, users: users, by: nil, at: at))]
            }
        }
    }
}

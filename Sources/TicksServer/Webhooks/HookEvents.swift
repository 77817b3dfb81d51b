import TicksProtocol
import TicksReceipts

/// The events a committed change owes the webhooks, built in the change's
/// transaction from what the store just wrote (so the outbox holds them
/// before the commit, docs/webhooks.md). `user` is whom the event is about:
/// the author, the reader, the member. Receipts follow the same privacy
/// rules as for other members (`CursorNotice`): a private read is never sent.
enum HookEvents {
    static func none() -> StoreProgram<[HookEvent]> { .done([]) }

    /// The events `change` owes whose kinds are `wanted`.
    static func of(_ change: StoreChange, wanted: @escaping @Sendable (EventType) -> Bool, options: AppOptions)
        -> StoreProgram<[HookEvent]>
    {
        switch change {
        case .messageSent(let outcome, let channel): messageNew(outcome, in: channel, wanted, options)
        case .messageUpdated(let record): message(.messageUpdated, record, wanted)
        case .messageDeleted(let record, let hard): message(.messageDeleted, record, hardDelete: hard, wanted)
        case .channelCreated(let record, let at): channel(.channelCreated, record, at: at, wanted)
        case .channelUpdated(let record, let at): channel(.channelUpdated, record, at: at, wanted)
        case .channelTruncated(let record, let at): channel(.channelTruncated, record, at: at, wanted)
        case .channelDeleted(let record, let at): channel(.channelDeleted, record, at: at, wanted)
        case .membersAdded(let states, let record, let at): membersAdded(states, to: record, at: at, wanted)
        case .membersRemoved(let userIDs, let record, let at): membersRemoved(userIDs, from: record, at: at, wanted)
        case .cursorsMoved(let outcomes): cursors(outcomes, wanted, options)
        case .markedUnread(let outcome): markedUnread(outcome)
        case .messagePlayed(let outcome): played(outcome, wanted)
        }
    }

    /// `message.new` with the members to push to: every member but the
    /// author, for a message the channel shows (a reply shown only in its
    /// thread changes nobody's unread count, and is not pushed).
    private static func messageNew(
        _ outcome: SendOutcome, in channel: ChannelRecord, _ wanted: @escaping (EventType) -> Bool, _ options: AppOptions
    ) -> StoreProgram<[HookEvent]> {
        let message = outcome.message
        // What the author's cursors jumping to their message made read by all (R13), as each author may see it (R15).
        let reachedAll = outcome.reachedAll.filter { wanted($0.kind == .read ? .messageReadByAll : .messageDeliveredToAll) }
        let readByAllAuthors = reachedAll.filter { $0.kind == .read }.map(\.author)
        return seeReadsAsDeliveries(among: readByAllAuthors, options).then { hiding in
            let reached = reachedAll.filter { $0.kind != .read || !hiding.contains($0.author) }
                .map { HookEvent(event: ChangeEvents.reachedAll($0, in: channel.cid, at: message.createdAt), channel: channel.cid) }
            guard outcome.created, wanted(.messageNew) else { return .done(reached) }
            return Fetch.users([message.userID]).map { users in
                let threadOnly = message.parentID != nil && !message.showInChannel
                let push = threadOnly ? [] : outcome.recipients.filter { $0.userID != message.userID }
                return [
                    HookEvent(event: ChangeEvents.messageNew(message, users: users), channel: message.cid, pushCandidates: push)
                ] + reached
            }
        }
    }

    /// `message.read` / `message.delivered` as the other members may see them.
    private static func cursors(
        _ outcomes: [CursorOutcome], _ wanted: (EventType) -> Bool, _ options: AppOptions
    ) -> StoreProgram<[HookEvent]> {
        // Every receipt comes this way: build its events only when a receiver wants one of them.
        let kinds: [EventType] = [.messageRead, .messageDelivered, .messageReadByAll, .messageDeliveredToAll]
        guard kinds.contains(where: wanted) else { return none() }
        let notices = outcomes.map { ($0, CursorNotice($0)) }
        return seeReadsAsDeliveries(among: notices.flatMap { $0.1.readByAllAuthors }, options).map { hiding in
            notices.flatMap { outcome, notice in
                notice.toOthers(seeReadsAsDeliveries: hiding).map { HookEvent(event: $0, channel: outcome.channel.cid) }
            }
        }
    }

    /// R15: those of `authors` who see the others' reads only as deliveries; none unless the
    /// app's reciprocal read receipts are on (and then only when there is an author to ask of).
    private static func seeReadsAsDeliveries(among authors: [String], _ options: AppOptions) -> StoreProgram<Set<String>> {
        guard options.reciprocalReadReceipts, !authors.isEmpty else { return .done([]) }
        return Fetch.users(Array(Set(authors))).map { users in Set(users.values.filter { !$0.sharesReadReceipts }.map(\.id)) }
    }

    /// `message.played`, when the other members may hear of it (R14: a private player's is never sent).
    private static func played(_ outcome: PlayOutcome, _ wanted: (EventType) -> Bool) -> StoreProgram<[HookEvent]> {
        let notice = PlayNotice(outcome)
        guard notice.othersSee, wanted(.messagePlayed) else { return none() }
        return .done([HookEvent(event: notice.event, channel: outcome.channel.cid)])
    }

    /// `notification.mark_unread`, which tells the member's read position:
    /// only when their reads are visible to the others (R8, R10).
    private static func markedUnread(_ outcome: CursorOutcome) -> StoreProgram<[HookEvent]> {
        .done(CursorNotice.markedUnreadToOthers(outcome).map { [HookEvent(event: $0, channel: outcome.channel.cid)] } ?? [])
    }

    /// `message.updated` / `message.deleted`. The store does not know who
    /// made the change; the event names the author, who alone may edit (a
    /// server token or a moderator deleting is told live as the actor).
    private static func message(_ type: EventType, _ record: MessageRecord, hardDelete: Bool? = nil, _ wanted: (EventType) -> Bool)
        -> StoreProgram<[HookEvent]>
    {
        guard wanted(type) else { return none() }
        return Fetch.users([record.userID]).map { users in
            [HookEvent(
                event: ChangeEvents.messageChanged(type, record, by: record.userID, hardDelete: hardDelete, users: users),
                channel: record.cid)]
        }
    }

    /// `member.added` for each new member.
    private static func membersAdded(
        _ states: [MemberState], to channel: ChannelRecord, at: Timestamp, _ wanted: (EventType) -> Bool
    )
        -> StoreProgram<[HookEvent]>
    {
        guard !states.isEmpty, wanted(.memberAdded) else { return none() }
        return Fetch.users(states.map(\.userID)).map { users in
            states.map { state in
                HookEvent(
                    event: ChangeEvents.member(
                        .memberAdded, Presenter.member(state, of: channel, users: users), in: channel.cid, at: at),
                    channel: channel.cid)
            }
        }
    }

    /// `member.removed` for each member who left.
    private static func membersRemoved(
        _ userIDs: [String], from channel: ChannelRecord, at: Timestamp, _ wanted: (EventType) -> Bool
    )
        -> StoreProgram<[HookEvent]>
    {
        guard !userIDs.isEmpty, wanted(.memberRemoved) else { return none() }
        return Fetch.users(userIDs).map { users in
            userIDs.map { userID in
                HookEvent(
                    event: ChangeEvents.member(
                        .memberRemoved, ChangeEvents.departed(userID, users: users, at: at), in: channel.cid, at: at),
                    channel: channel.cid)
            }
        }
    }

    /// `channel.created` / `.updated` / `.truncated` / `.deleted`, with the
    /// channel as the change left it; the store does not know who made the change.
    private static func channel(_ type: EventType, _ record: ChannelRecord, at: Timestamp, _ wanted: (EventType) -> Bool)
        -> StoreProgram<[HookEvent]>
    {
        guard wanted(type) else { return none() }
        return Fetch.texts(StoreSQL.channelType(record.type)).then { configs in
            Fetch.users(record.createdBy.map { [$0] } ?? []).map { users in
                guard let config = try configs.first.map(StoredJSON.config) else { return [] }
                return [HookEvent(
                    event: ChangeEvents.channel(type, record, config: config, users: users, by: nil, at: at),
                    channel: record.cid)]
            }
        }
    }
}

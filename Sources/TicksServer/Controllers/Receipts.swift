import TicksProtocol
import TicksReceipts

/// Marking read and delivered, for both ways a client asks: an HTTP request
/// (`ChannelsController`, Stream's API) and a frame on its open WebSocket
/// (`ConnectController`, Ticks' extension). The same checks, the same store
/// calls and the same events, whichever way the receipt came.
struct Receipts: Sendable {
    let store: any TicksStore
    let events: EventPublisher
    /// Who hears of receipts; the store applies it when it commits a move.
    let audience: ReceiptAudience
    /// The app's settings: reciprocal read receipts (R15) change what a viewer sees.
    let options: AppOptionsCache

    /// At most this many entries in one mark delivered (Stream's limit).
    static let maxDeliveredEntries = 100

    /// The channel `type:id` for `action`, one that every member may take
    /// (`ChannelPermissions.memberActions`): it must exist (404) and the rule
    /// must let `principal` take it (403: for a user, being a member).
    func channel(_ cid: ChannelID, for principal: Principal, to action: ChannelPermissions.Action)
        async throws -> ChannelRecord
    {
        assert(ChannelPermissions.memberActions.contains(action), "\(action) needs more than membership")
        guard case .user(let userID) = principal else {
            guard let channel = try await store.channel(cid) else {
                throw APIError.notFound("channel \(cid) does not exist")
            }
            return channel
        }
        guard let (channel, isMember) = try await store.channel(cid, member: userID) else {
            throw APIError.notFound("channel \(cid) does not exist")
        }
        try ChannelPermissions.require(
            [action], in: channel.cid, as: principal,
            standing: ChannelPermissions.standing(of: principal, isMember: isMember))
        return channel
    }

    /// R1–R3 for `reader`; the `message.read` event (the answer to mark read).
    /// The channel must exist (404) and have `reader` as a member (403): the
    /// store checks both in the round trip that moves the cursor.
    func markRead(_ reader: String, in channel: ChannelID, upTo messageID: String?) async throws -> Event {
        if let messageID { try requireValidID(messageID, "message_id") }
        let outcome = try await store.markRead(
            reader, in: channel, upTo: messageID, audience: audience, now: .now())
        try tell(outcome)
        return CursorNotice.messageRead(outcome)
    }

    /// Tells a committed move live (`EventPublisher.cursorMoved`): who hears it, R15 included,
    /// is a function of the outcome, which carries its hearers' privacy.
    func tell(_ outcome: CursorOutcome) throws {
        guard outcome.update.changed else { return }
        events.count(outcome)
        // No one to tell: nothing built.
        guard events.anyoneHears(outcome.recipients + [outcome.reader.id] + outcome.reachedAll.map(\.author)) else {
            return
        }
        try events.cursorMoved(outcome)
    }

    /// R15 for `viewer` reading receipts, channel state or sync (not a change's hearers, whose
    /// privacy the change's outcome carries): whether they see the others' reads only as
    /// deliveries; `known` may hold them already (a snapshot's users).
    func seesReadsAsDeliveries(_ viewer: String?, known: [String: User] = [:]) async throws -> Bool {
        guard let viewer, try await options.current().reciprocalReadReceipts else { return false }
        let user = if let known = known[viewer] { known } else { try await store.users(ids: [viewer])[viewer] }
        return user.map {
            ReceiptVisibility.seesReadsAsDeliveries(sharesReads: $0.sharesReadReceipts, reciprocal: true)
        }
            ?? false
    }

    /// Marks the thread of `parentID` read for `reader` (their thread read
    /// state, not the channel's cursors); the `message.read` event with the
    /// thread goes to the members who may see `reader`'s reads (R8, R10).
    func markThreadRead(_ reader: String, in cid: ChannelID, parentID: String) async throws -> Event {
        try requireValidID(parentID, "thread_id")
        guard let channel = try await store.channel(cid) else {
            throw APIError.notFound("channel \(cid) does not exist")
        }
        let read = try await store.markThreadRead(reader, in: channel, parentID: parentID, now: .now())
        let users = try await store.users(ids: [reader])
        let notice = ThreadReadNotice(
            read, by: Presenter.user(reader, users), in: channel,
            config: try await store.channelType(named: channel.type))
        try events.send(notice.event, to: try await notice.recipients { try await store.memberIDs(of: channel) })
        return notice.event
    }

    /// Marks the thread of `parentID` unread for `reader`, a member;
    /// `notification.mark_unread` with `thread_id` goes to the reader's own
    /// connections alone, as the channel's mark unread does.
    func markThreadUnread(_ reader: String, in channel: ChannelRecord, parentID: String) async throws {
        try requireValidID(parentID, "thread_id")
        let now = Timestamp.now()
        let unread = try await store.markThreadUnread(reader, in: channel, parentID: parentID, now: now)
        let user = Presenter.user(reader, try await store.users(ids: [reader]))
        try events.send(ChangeEvents.markedThreadUnread(unread, by: user, in: channel.cid, at: now), to: [reader])
    }

    /// Marks every thread of `reader` read (404 for an unknown user); when any
    /// moved, `notification.mark_threads_read` goes to the reader's own
    /// connections alone: one event however many threads. How many moved.
    func markThreadsRead(_ reader: String) async throws -> Int {
        let now = Timestamp.now()
        guard let read = try await store.markThreadsRead(reader, now: now) else {
            throw APIError.notFound("user '\(reader)' does not exist")
        }
        guard !read.parentIDs.isEmpty else { return 0 }
        let user = Presenter.user(reader, try await store.users(ids: [reader]))
        try events.send(ChangeEvents.markedThreadsRead(by: user, at: now, read), to: [reader])
        return read.parentIDs.count
    }

    /// A `latest_delivered_messages` entry, the same over HTTP and on a socket.
    typealias DeliveredEntry = SocketReceipt.DeliveredEntry

    /// Marks `reader`'s devices as having received up to each entry's message.
    func markDelivered(_ reader: String, _ entries: [DeliveredEntry]) async throws {
        guard !entries.isEmpty else { throw APIError.input("latest_delivered_messages must not be empty") }
        guard entries.count <= Self.maxDeliveredEntries else {
            throw APIError.input(
                "latest_delivered_messages has \(entries.count) entries; at most \(Self.maxDeliveredEntries)")
        }
        let targets = try entries.map { entry in
            try requireValidID(entry.id, "message id")
            return DeliveredTarget(channel: try requireCID(entry.cid, "cid"), messageID: entry.id)
        }
        for outcome in try await store.markDelivered(reader, targets, audience: audience, now: .now()) {
            try tell(outcome)
        }
    }
}

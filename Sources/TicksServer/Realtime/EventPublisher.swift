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
    /// Reads the counts of a new message's members connected here (the store's).
    let counts: RecipientCountsReader?
    let metrics: ServerMetrics
    let logger: Logger
    /// Whether each event is an `events.publish` span (`TicksServerConfiguration.tracing`).
    var tracing = false

    /// `message.new` to every member's connections that watch the channel
    /// (or never watched any), each with their own unread counts; their
    /// connections that watch other channels but not this one get
    /// `notification.message_new` instead, with the channel, for a message
    /// shown in the channel (docs/events.md, "Watching"). The message is
    /// encoded once for all (`EncodedEvent`), and only the members connected
    /// to a node get counts, read by that node after the commit, one
    /// statement for all of them (`RecipientCountsReader`): the bus carries
    /// the message for every member, without counts (`Personal.countsToRead`).
    /// A send into a channel of 1,000 members with no one connected reads and
    /// writes no one's counts for its events. In a large channel the members
    /// are not even listed (`SendOutcome.everyMember`): the same read finds
    /// which connected users are members (`membersHere`), here and on every
    /// node. The author's jump to their message (R4) may make others' messages
    /// read by all (R13): each to its author as they may see it (`Telling`, R15).
    func messageNew(_ outcome: SendOutcome, channel: ChannelRecord, config: ChannelConfig, users: [String: User])
        async throws
    {
        let members = outcome.recipients
        if outcome.everyMember ? bus != nil || hub.connectedUserCount > 0 : bus != nil || hub.anyConnected(among: members) {
            // Those connected here, with their counts, read once for both events.
            let here: [String]
            let counted: [String: UnreadEnding]?
            if outcome.everyMember {
                (here, counted) = await Self.membersHere(
                    of: channel.pk, memberCount: channel.memberCount, in: hub, reading: counts, logger: logger)
            } else {
                here = hub.connected(among: members)
                counted =
                    here.isEmpty
                    ? nil : await Self.readCounts(in: channel.pk, for: here, reading: counts, metrics: metrics, logger: logger)
            }
            let cid = channel.cid.description
            let message = outcome.message
            var event = ChangeEvents.messageNew(message, users: users)
            event.watcherCount = hub.watchers(of: cid, among: here).count
            var encoded = [(EncodedEvent, EventType)]()
            encoded.append(
                (try EncodedEvent(object: JSONCoding.data(event), countsToReadIn: channel.pk, audience: .watchers(cid)),
                 .messageNew))
            if message.parentID == nil || message.showInChannel,
                bus != nil || hub.anyConnected(among: here, hearing: .notWatching(cid))
            {
                var shown = channel
                shown.lastMessageAt = message.createdAt
                let notice = ChangeEvents.notificationMessageNew(
                    message, in: Presenter.channel(shown, config: config, users: users), users: users)
                encoded.append(
                    (try EncodedEvent(
                        object: JSONCoding.data(notice), countsToReadIn: channel.pk, audience: .notWatching(cid)),
                     .notificationMessageNew))
            }
            for (event, type) in encoded {
                let local = here.isEmpty ? nil : event.counted(counted, for: here)
                if outcome.everyMember {
                    fanOut(local, to: here, type: type, recipients: channel.memberCount) {
                        $0.publish(toEveryMember: event, memberCount: channel.memberCount)
                    }
                } else {
                    fanOut(local, to: here, type: type, recipients: members.count) { $0.publish(event, to: members) }
                }
            }
        }
        // The author's cursors jumped to their message (R4): others' messages it made read by all, to their authors.
        guard !outcome.reachedAll.isEmpty else { return }
        for (event, userIDs) in Telling(reachedBy: outcome, in: channel.cid).live {
            try send(event, to: userIDs)
        }
    }

    /// The members of the channel `channelPK` (of about `memberCount` members) connected to `hub`,
    /// with their counts as they are now, for a new message to every member (`SendOutcome.everyMember`),
    /// in one read: of the connected users' counts when the node holds fewer users than the
    /// channel has members, else of every member's. When the read fails, no one here can be told
    /// and whom it was for is unknown: every connection here that may be a member's (all of them
    /// when the node holds more users than the channel has members) is closed, and their clients
    /// reconnect and refresh, as for an event the bus lost.
    static func membersHere(
        of channelPK: Int64, memberCount: Int, in hub: ConnectionHub, reading counts: RecipientCountsReader?,
        logger: Logger
    ) async -> (users: [String], counts: [String: UnreadEnding]) {
        let connected = hub.connectedUsers(upTo: memberCount)
        if connected?.isEmpty == true { return ([], [:]) }
        do {
            guard let counts else { throw MembersUnread.noReader }
            let members = try await counts(channelPK, connected)
            // In join order, each once, connected now.
            return (hub.connected(among: members.map(\.userID)), UnreadEnding.byUser(members))
        } catch {
            let closed: Int
            if let connected {
                closed = hub.close(usersOf: connected)
            } else {
                closed = hub.connectionCount
                hub.closeAll()
            }
            logger.error(
                "message.new to every member could not be told here: its members' counts could not be read; their connections were closed so they refresh",
                metadata: ["connections": "\(closed)", "error": "\(String(reflecting: error))"])
            return ([], [:])
        }
    }

    private enum MembersUnread: Error { case noReader }

    /// The counts of `userIDs` in the channel `channelPK` as they are now, for a new message here
    /// or from the bus; nil, logged, when they cannot be read (the message then goes without them).
    /// Those it leaves without counts are counted (`ticks_message_new_counts_missing_total`).
    static func readCounts(
        in channelPK: Int64, for userIDs: [String], reading counts: RecipientCountsReader?, metrics: ServerMetrics,
        logger: Logger
    ) async -> [String: UnreadEnding]? {
        var byUser: [String: UnreadEnding]?
        if let counts {
            do {
                byUser = UnreadEnding.byUser(try await counts(channelPK, userIDs))
            } catch {
                logger.warning(
                    "message.new goes without its unread counts: they could not be read",
                    metadata: ["users": "\(userIDs.count)", "error": "\(String(reflecting: error))"])
            }
        }
        let missing = userIDs.count - (byUser.map { byUser in userIDs.count { byUser[$0] != nil } } ?? 0)
        if missing > 0 { metrics.messageNewCountsMissing.increment(by: missing) }
        return byUser
    }

    /// Events for a cursor that moved (`Telling`): `message.read` / `message.delivered` to
    /// the members who may see it, and `notification.mark_read` to the reader; those who see
    /// reads only as deliveries hear a read as a delivery (R15).
    func cursorMoved(_ outcome: CursorOutcome) throws {
        guard outcome.update.changed else { return }
        for (event, userIDs) in Telling(outcome).live {
            try send(event, to: userIDs)
        }
    }

    /// Counts the cursors that moved (`ticks_cursor_moves_total`),
    /// whether or not anyone hears of them.
    func count(_ outcome: CursorOutcome) {
        for move in outcome.update.moves {
            (move.kind == .read ? metrics.readMoves : metrics.deliveredMoves).increment()
        }
    }

    /// Whether an event to `userIDs` can reach anyone: one of them is connected to
    /// this node, or other nodes share the store (each hears through the bus).
    /// When no one can, the events are neither built nor encoded (issue 39: at
    /// 1,000 receipts/s with no socket, building them was 4 % of the server's CPU).
    func anyoneHears(_ userIDs: some Sequence<String>) -> Bool {
        bus != nil || hub.anyConnected(among: userIDs)
    }

    /// `message.played` to `recipients` (`PlayNotice.recipients`), for a first play only.
    func played(_ play: PlayOutcome, notice: PlayNotice, to recipients: [String]) throws {
        guard play.created else { return }
        metrics.played.increment()
        try send(notice.event, to: recipients)
    }

    /// `typing.start` / `typing.stop` to the channel's members (`TypingNotice.recipients`).
    func typing(_ notice: TypingNotice, members: [String]) throws {
        try send(notice.event, to: notice.recipients(members: members))
    }

    /// `notification.mark_unread` to the reader's own connections.
    func markedUnread(_ outcome: CursorOutcome) throws {
        guard outcome.update.changed else { return }
        try send(ChangeEvents.markedUnread(outcome), to: [outcome.reader.id])
    }

    /// `member.added` / `member.removed` to the members and the member concerned.
    func membership(
        _ type: EventType, member: Member, channel: ChannelRecord, recipients: [String], at: Timestamp
    ) throws {
        try send(ChangeEvents.member(type, member, in: channel.cid, at: at), to: Set(recipients).union([member.userID]))
    }

    /// `notification.added_to_channel` / `notification.removed_from_channel`
    /// to the member concerned, on all their connections: a channel list
    /// that does not show the channel yet learns of it (or forgets it).
    func membershipNotice(_ type: EventType, member: Member, snapshot: ChannelSnapshot, at: Timestamp) throws {
        var event = ChangeEvents.member(type, member, in: snapshot.channel.cid, at: at)
        event.channel = Presenter.channel(snapshot.channel, config: snapshot.config, users: snapshot.users)
        try send(event, to: [member.userID])
    }

    /// A channel's events to the connections watching it (or never watching
    /// any), the others to all of each user's connections (`EventType.isChannelEvent`).
    func send(_ event: Event, to userIDs: some Sequence<String>) throws {
        guard anyoneHears(userIDs) else { return }
        var encoded = try EncodedEvent(EventJSON.data(event))
        if event.type.isChannelEvent, let cid = event.cid { encoded.audience = .watchers(cid.description) }
        publish(encoded, type: event.type, to: Array(userIDs))
    }

    /// Starts or stops a connection's watch of a channel, on the node that
    /// holds the connection: here, or, when it is not here, through the bus on
    /// the others (nothing about watches is shared or stored).
    /// Returns how to take a watch started here back (nil: nothing changed here).
    @discardableResult
    func watch(_ change: WatchChange) throws(ConnectionHub.WatchRefusal) -> ConnectionHub.WatchStarted? {
        if change.watching {
            do throws(ConnectionHub.WatchRefusal) {
                return try hub.watch(change.cid, connectionID: change.connection, userID: change.user)
            } catch .unknownConnection {
                // On another node, if any.
            }
        } else if hub.stopWatching(change.cid, connectionID: change.connection, userID: change.user) {
            return nil
        }
        bus?.watch(change)
        return nil
    }

    /// To this node's connections, and through the bus to the other nodes'. In a trace, an
    /// `events.publish` span: the bus carries its context, so the other nodes' `ws.fanout`
    /// spans are its children.
    func publish(_ event: EncodedEvent, type: EventType, to userIDs: [String]) {
        fanOut(event, to: userIDs, type: type, recipients: userIDs.count) { $0.publish(event, to: userIDs) }
    }

    /// `local` to the connections here of `localUsers`, and `publishing` on the bus, if any, for
    /// the other nodes' (an event for `recipients` users in all).
    private func fanOut(
        _ local: EncodedEvent?, to localUsers: [String], type: EventType, recipients: Int,
        bus publishing: (any EventBus) -> Void
    ) {
        func send() -> Int {
            let connections = local.map { hub.send($0, to: localUsers) } ?? 0
            if let bus { publishing(bus) }
            metrics.eventsPublished.increment()
            return connections
        }
        guard tracing, ServiceContext.current != nil else {
            _ = send()
            return
        }
        withSpan("events.publish", ofKind: .producer) { span in
            let connections = send()
            span.attributes["ticks.event.type"] = type.rawValue
            span.attributes["ticks.event.recipients"] = recipients
            span.attributes["ticks.ws.connections"] = connections
        }
    }
}

import TicksProtocol
import TicksReceipts

// Who may hear of a receipt, decided here and nowhere else: which members a
// committed move may be told to (`ReceiptAudience`), which members' receipts a
// viewer may see (`ReceiptVisibility`, R8–R10), and from those what each
// road tells — a move live and to the webhooks (`CursorNotice`), a thread
// read, and a member's cursors since a time (`SyncedCursors`). PostgreSQL's
// one-statement move computes the audience in SQL (`StoreSQL.moves`); it is
// checked against `ReceiptAudience` on every row (`OneStatementMove`). The
// store applies the audience through its own protocol (`MoveAudience`) and
// knows nothing of this file.

/// Who hears of a member's read and delivered receipts (docs/events.md, "Large channels"): in a
/// channel of up to `fullChannelLimit` members every member, as Stream does;
/// in a larger one only the authors of the messages the move covered and the
/// member's own devices — nobody else shows a status for those messages, and a
/// channel of M members where everyone reads sends O(M) frames, not O(M²).
public struct ReceiptAudience: MoveAudience, Equatable {
    public var fullChannelLimit: Int

    public init(fullChannelLimit: Int) { self.fullChannelLimit = fullChannelLimit }

    /// What to read for `update` in `channel`; nil when nothing moved. A read
    /// move decides when there is one (it covers the delivered move too, R1).
    public func source(of update: CursorUpdate, in channel: ChannelRecord) -> AudienceSource? {
        guard let move = update.moves.first(where: { $0.kind == .read }) ?? update.moves.first else { return nil }
        guard channel.memberCount > fullChannelLimit else { return .members }
        return .authors(after: min(move.from, move.to), through: max(move.from, move.to))
    }

    /// The recipients from the ids `source` read: every member, or the authors and the reader.
    public func recipients(_ ids: [String], from source: AudienceSource, reader: String) -> [String] {
        switch source {
        case .members: ids
        case .authors: Array(Set(ids).union([reader]))
        }
    }
}

/// Which members' receipts a viewer may see (R8, R10, R15). A member always
/// sees their own; others see them only when the channel type has read events
/// and the member shares them; and a viewer who hides their own reads, where
/// the app's reciprocal read receipts are on, sees the others' reads only as
/// deliveries (R15).
struct ReceiptVisibility {
    let config: ChannelConfig
    let users: [String: User]
    /// The user looking; nil for anyone but the member (the other members, a webhook).
    let viewer: String?
    /// R15: the viewer hides their reads and the app's reciprocal read receipts are on.
    let seesReadsAsDeliveries: Bool

    /// - Parameter seesReadsAsDeliveries: R15 for `viewer` (`Receipts.seesReadsAsDeliveries`).
    init(config: ChannelConfig, users: [String: User], viewer: String?, seesReadsAsDeliveries: Bool) {
        self.config = config
        self.users = users
        self.viewer = viewer
        self.seesReadsAsDeliveries = viewer != nil && seesReadsAsDeliveries
    }

    /// R15, decided here and nowhere else: whether a viewer sees the others' reads only as
    /// deliveries — they hide their own reads (R10) and the app's reciprocal read receipts are on.
    static func seesReadsAsDeliveries(sharesReads: Bool, reciprocal: Bool) -> Bool {
        reciprocal && !sharesReads
    }

    func readVisible(_ userID: String) -> Bool {
        guard userID == viewer || !seesReadsAsDeliveries else { return false }
        return (users[userID] ?? User(id: userID)).readsVisible(to: viewer, readEvents: config.readEvents)
    }

    func deliveredVisible(_ userID: String) -> Bool {
        (users[userID] ?? User(id: userID)).deliveriesVisible(
            to: viewer, readEvents: config.readEvents, deliveryEvents: config.deliveryEvents)
    }

    /// Whether members other than `reader` may hear of `reader`'s reads (before R15, which is the hearer's).
    static func othersSeeReads(of reader: User, config: ChannelConfig) -> Bool {
        ReceiptVisibility(config: config, users: [reader.id: reader], viewer: nil, seesReadsAsDeliveries: false)
            .readVisible(reader.id)
    }
}

extension HearersPrivacy {
    /// Those of a change's hearers who see the others' reads only as deliveries (R15).
    var readsAsDeliveries: Set<String> {
        // Each of `hidingReads` hides their reads: R15 holds for them all, or for none.
        ReceiptVisibility.seesReadsAsDeliveries(sharesReads: false, reciprocal: reciprocal) ? hidingReads : []
    }
}

/// What a committed change tells, as one value: the live half (each event and
/// the users it goes to, `live`) and what anyone but the member may be told
/// (`toOthers`: the webhooks). A function of the change's outcome alone — the
/// outcome carries its hearers' privacy, read in the change's transaction
/// (`HearersPrivacy`) — so the two halves agree, and neither road looks a
/// user up: the recorder takes the webhook half in the transaction, the
/// publisher the live half after the commit.
struct Telling {
    var live: [(event: Event, to: [String])] = []
    var toOthers: [Event] = []

    /// A cursor move (`CursorNotice`), to the move's recipients.
    init(_ outcome: CursorOutcome) {
        let notice = CursorNotice(outcome)
        live = notice.live(to: outcome.recipients)
        toOthers = notice.toOthers
    }

    /// What a send made read by all (R13), each to its author as they may see it (R15). `message.new`
    /// is not a receipt: its recipients are every member, each with their own counts (`EventPublisher`).
    init(reachedBy outcome: SendOutcome, in cid: ChannelID) {
        let readsAsDeliveries = outcome.hearers.readsAsDeliveries
        let told = outcome.reachedAll.filter { $0.kind != .read || !readsAsDeliveries.contains($0.author) }.map {
            (event: ChangeEvents.reachedAll($0, in: cid, at: outcome.message.createdAt), to: [$0.author])
        }
        live = told
        toOthers = told.map(\.event)
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
    /// Whether the others may see the reader's deliveries at all: those who see reads
    /// only as deliveries (R15) are told `delivered` where the others are told `read`.
    var deliveredVisibleToOthers = false
    /// `message.read_by_all` / `message.delivered_to_all`, each to its author alone (R13).
    var reachedAll: [(event: Event, author: String)] = []
    /// The move, for the event only the reader's own connections get.
    private let outcome: CursorOutcome

    /// R15: those of the move's hearers who see reads only as deliveries.
    private var readsAsDeliveries: Set<String> { outcome.hearers.readsAsDeliveries }

    /// `notification.mark_read` with the reader's counts, for the reader alone, with `read`; built
    /// only when asked (the live road), as the webhooks never send it.
    var markedRead: Event? {
        guard read != nil else { return nil }
        return ChangeEvents.markedRead(
            by: outcome.reader, in: outcome.channel.cid, at: outcome.at, state: outcome.state, totals: outcome.totals)
    }

    init(_ outcome: CursorOutcome) {
        self.outcome = outcome
        guard outcome.update.changed else { return }
        reachedAll = outcome.reachedAll.map {
            (ChangeEvents.reachedAll($0, in: outcome.channel.cid, at: outcome.at), $0.author)
        }
        let reader = outcome.reader
        let visibility = ReceiptVisibility(
            config: outcome.config, users: [reader.id: reader], viewer: nil, seesReadsAsDeliveries: false)
        if outcome.update.moved(.read) {
            read = Self.messageRead(outcome)
            othersSeeRead = visibility.readVisible(reader.id)
        }
        guard outcome.update.moved(.delivered), outcome.config.deliveryEvents else { return }
        delivered = ChangeEvents.messageDelivered(
            by: reader, in: outcome.channel.cid, at: outcome.at, deliveredAt: outcome.state.deliveredAt,
            upTo: outcome.state.lastDeliveredMessageID)
        deliveredVisibleToOthers = visibility.deliveredVisible(reader.id)
        othersSeeDelivered = deliveredVisibleToOthers && !othersSeeRead
    }

    /// The `message.read` event for a read state (also the answer to mark read).
    static func messageRead(_ outcome: CursorOutcome) -> Event {
        ChangeEvents.messageRead(
            by: outcome.reader, in: outcome.channel.cid, at: outcome.at, upTo: outcome.state.lastReadMessageID)
    }

    /// The live events and whom each goes to, of `recipients` (the move's
    /// `ReceiptAudience`): `message.read` to them when the others may see the
    /// read, else to the reader alone, with `notification.mark_read` to the
    /// reader; `message.delivered` to them when the others may see it and no
    /// read told them (the reader's own connections had `message.read`), else
    /// to the reader alone unless a read told them already. Those who see
    /// reads only as deliveries (R15, the outcome's `hearers`) hear a read as
    /// `message.delivered`, and never "read by all".
    func live(to recipients: [String]) -> [(event: Event, to: [String])] {
        // After the receipts that made them: "read by all" follows the last reader's message.read.
        let all = reachedAll.compactMap { reached in
            reached.event.type == .messageReadByAll && readsAsDeliveries.contains(reached.author)
                ? nil : (event: reached.event, to: [reached.author])
        }
        guard let reader = (read ?? delivered)?.user?.id else { return all }
        var sends: [(event: Event, to: [String])] = []
        if let read {
            let hearers =
                othersSeeRead ? recipients.filter { !readsAsDeliveries.contains($0) || $0 == reader } : [reader]
            sends.append((read, hearers))
            if let markedRead { sends.append((markedRead, [reader])) }
        }
        if let delivered {
            if othersSeeDelivered {
                sends.append((delivered, read == nil ? recipients : recipients.filter { $0 != reader }))
            } else if read == nil {
                sends.append((delivered, [reader]))
            } else if othersSeeRead && deliveredVisibleToOthers {
                let told = recipients.filter { readsAsDeliveries.contains($0) && $0 != reader }
                if !told.isEmpty { sends.append((delivered, told)) }
            }
        }
        return sends + all
    }

    /// The events anyone but the reader may be told (webhooks, with no viewer). A "read by
    /// all" is its author's view: not told of an author who sees reads only as deliveries (R15).
    var toOthers: [Event] {
        (othersSeeRead ? [read].compactMap { $0 } : []) + (othersSeeDelivered ? [delivered].compactMap { $0 } : [])
            + reachedAll.filter { $0.event.type != .messageReadByAll || !readsAsDeliveries.contains($0.author) }
            .map(\.event)
    }

    /// `notification.mark_unread` is told to the others (the webhooks) only
    /// when the member's reads are: it tells their read position.
    static func markedUnreadToOthers(_ outcome: CursorOutcome) -> Event? {
        guard outcome.update.changed, ReceiptVisibility.othersSeeReads(of: outcome.reader, config: outcome.config)
        else { return nil }
        return ChangeEvents.markedUnread(outcome)
    }
}

/// What a thread marked read tells (`POST /channels/{type}/{id}/read` with
/// `thread_id`): `message.read` with the thread, to every member when the
/// reader's reads are visible to the others (R8, R10), else to the reader's
/// own connections alone. It moves no channel cursor, so no webhook hears it;
/// `POST /sync` tells the reader their own thread read states (`SyncEvents`).
struct ThreadReadNotice {
    let event: Event
    /// Whether members other than the reader hear it.
    let toOthers: Bool
    let reader: String

    init(_ read: ThreadRead, by reader: User, in channel: ChannelRecord, config: ChannelConfig?) {
        event = ChangeEvents.threadRead(read, by: reader, in: channel.cid)
        self.reader = reader.id
        toOthers = config.map { ReceiptVisibility.othersSeeReads(of: reader, config: $0) } ?? false
        readsAsDeliveries = read.hearers.readsAsDeliveries
    }

    /// Those of the members who see reads only as deliveries (R15): a thread read has no
    /// delivery to tell them instead, so they are told nothing.
    let readsAsDeliveries: Set<String>

    /// Who hears it: the channel's `members` (read only when they do) but those who see reads
    /// only as deliveries, or the reader alone.
    func recipients(members: () async throws -> [String]) async rethrows -> [String] {
        guard toOthers else { return [reader] }
        return try await members().filter { !readsAsDeliveries.contains($0) || $0 == reader }
    }
}

/// What `POST /sync` tells `viewer` of one member's cursors after `since`:
/// the latest read, and the latest delivered past it, each only if it moved
/// after `since`, still points at a message (not at or below a truncation)
/// and `viewer` may see it (R8–R10; delivery events off hide others'
/// deliveries, R9). A read shown at the same cursor says delivered already (R1).
struct SyncedCursors {
    var read = false
    var delivered = false

    init(_ state: MemberState, in record: ChannelRecord, visibility: ReceiptVisibility, since: Timestamp) {
        read =
            state.readAt > since && state.cursors.read > record.truncatedSeq && state.lastReadMessageID != nil
            && visibility.readVisible(state.userID)
        delivered =
            state.deliveredAt > since && state.cursors.delivered > record.truncatedSeq
            && state.lastDeliveredMessageID != nil && visibility.deliveredVisible(state.userID)
            && (visibility.config.deliveryEvents || state.userID == visibility.viewer)
            && !(read && state.cursors.delivered == state.cursors.read)
    }
}

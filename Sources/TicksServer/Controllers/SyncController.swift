import Hummingbird
import TicksProtocol

/// `POST /sync`: the events a client missed in its channels since a time,
/// so it can bring a cache up to date after being offline without loading
/// every channel again (Stream's sync, with Ticks' bounds made explicit).
///
/// Ticks keeps no log of events: what changed is read from the state
/// itself — messages stored, edited or deleted after the time, members who
/// joined or left, and each member's latest read and delivered cursor if it
/// moved, and where "read / delivered by everyone" of the user's own messages
/// stands when one of those may have moved it — and told as the events that
/// would have said so, in time order.
/// A channel that changed too much for that (`ServerLimits.syncEventsPerChannel`)
/// is named in `reload_cids`; channels past what one answer holds
/// (`syncEventsPerAnswer`) come back in `remaining_cids`, to ask again.
struct SyncController {
    let store: any TicksStore
    let limits: ServerLimits
    /// For R15: whether the user sees the others' reads only as deliveries.
    let receipts: Receipts

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
        let builder = SyncEvents(
            userID: userID, since: since, now: now,
            seesReadsAsDeliveries: try await receipts.seesReadsAsDeliveries(userID))
        for cid in cids {
            guard remaining.isEmpty else {
                remaining.append(cid.rawValue)
                continue
            }
            let changes = try await store.changes(in: cid, for: userID, since: since, limit: limits.syncEventsPerChannel)
            var reached: AllReachedUpTo? = nil
            if builder.mayHaveReachedAll(changes), let record = changes.channel {
                reached = try await store.allReached(in: record, by: userID)
            }
            guard
                let channelEvents = builder.events(
                    of: changes, reached: reached, in: cid, limit: limits.syncEventsPerChannel)
            else {
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

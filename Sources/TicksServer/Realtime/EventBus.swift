/// Carries events between the nodes that share one store: every node sends
/// its own connections' frames itself and hands them to the bus for the
/// connections on the others.
public protocol EventBus: Sendable {
    /// Queues `event` for the connections of `userIDs` on the other nodes.
    /// Never waits; an event it cannot deliver makes those users' connections
    /// on the other nodes close, so their clients resync.
    func publish(_ event: EncodedEvent, to userIDs: [String])
    /// Queues a new message (`EncodedEvent.Personal.countsToRead`) for the connections of every
    /// member of the channel whose counts it reads (about `memberCount`) on the other nodes,
    /// unlisted: each node finds its own as it reads their counts (`SendOutcome.everyMember`).
    /// If it is lost, every connection on the other nodes closes.
    func publish(toEveryMember event: EncodedEvent, memberCount: Int)
    /// Tells the other nodes that a connection starts or stops watching a
    /// channel; the node holding the connection applies it (`ConnectionHub.apply`).
    func watch(_ change: WatchChange)
    /// Until cancelled: hands what the other nodes publish to `hub`.
    func run(hub: ConnectionHub) async throws
    /// How the bus is doing now (`GET /admin/status`).
    var status: EventBusStatus { get }
    /// Returns once the bus hears the other nodes (at once if it does), or when the calling task
    /// is cancelled: a WebSocket says hello only then (`ConnectController`).
    func untilListening() async
}

/// An event bus's state, for the status view.
public struct EventBusStatus: Sendable, Codable, Equatable {
    /// This node's name on the bus.
    public var node: String
    /// Whether the node hears the other nodes now.
    public var listening: Bool
    /// Events waiting to be published, and their size.
    public var queuedEvents: Int
    public var queuedBytes: Int
    /// Events that could not reach the other nodes since the start (their users resynced).
    public var eventsLost: Int

    enum CodingKeys: String, CodingKey {
        case node, listening
        case queuedEvents = "queued_events"
        case queuedBytes = "queued_bytes"
        case eventsLost = "events_lost"
    }
}

/// A connection that starts or stops watching a channel (Stream's query with
/// `watch: true`, and `stop-watching`), named by its `connection_id`.
public struct WatchChange: Codable, Sendable, Equatable {
    /// The connection's id (`health.check`'s `connection_id`).
    public var connection: String
    /// Its user: a watch names a connection of the caller's own.
    public var user: String
    /// The channel, `type:id`.
    public var cid: String
    /// True to start watching, false to stop.
    public var watching: Bool
}

import Foundation
import Logging
import TicksProtocol

/// The entry point of the Ticks SDK: connect as a user, open channels, send
/// messages through a durable outbox, and follow their receipts.
///
/// ```swift
/// let client = try ChatClient(configuration: .init(
///     baseURL: URL(string: "http://127.0.0.1:3030")!, apiKey: key,
///     outbox: .file(URL(fileURLWithPath: "outbox.sqlite"))))
/// try await client.connect(userID: "alice", token: token)
/// let trip = await client.channel(ChannelID(type: "messaging", id: "trip"))
/// try await trip.load()
/// let sent = try await trip.send("Tickets booked")          // .pending, then .sent
/// for await channel in await trip.updates() {
///     print(channel.message(withID: sent.id)?.deliveryStatus as Any)  // sent → delivered → read
/// }
/// ```
///
/// Everything the client knows is kept inside this actor and changed in the
/// order events arrive; apps read it as `ChatChannel` values.
public actor ChatClient {
    public nonisolated let configuration: ChatClientConfiguration
    let outbox: Outbox
    /// The server's state as the device keeps it, for an app opened offline.
    let cache: ChannelCache
    var logger: Logger { configuration.logger }

    struct Session: Sendable {
        let userID: String
        let api: APIClient
        let socket: EventSocket
    }

    var session: Session?
    /// Receipts sent as frames on the open socket (Ticks' extension to Stream's protocol).
    let socketRequests = SocketRequests()
    /// The current user as the server last described them (`health.check`'s `me`).
    var me: User?
    private(set) var status: ConnectionStatus = .disconnected
    var connectionTask: Task<Void, Never>?

    var models: [ChannelID: ChannelModel] = [:]
    /// Channels the app opened: their state is refreshed after every reconnect.
    var openChannels: Set<ChannelID> = []
    var reloads: [ChannelID: Task<Void, Never>] = [:]
    /// Channel lists the app asked for, by filter and order.
    var lists: [ChannelListQuery: ChannelListState] = [:]
    /// Each channel's row in a list, made again after the channel changes.
    var summaries: [ChannelID: ChatChannelSummary] = [:]
    /// The current user's unread totals over all their channels.
    var totals = ChatUnreadTotals(totalUnreadCount: 0, unreadChannels: 0)
    let totalsBroadcast = Broadcast<ChatUnreadTotals>(bufferSize: 16)

    /// Channels changed since the cache was last written, and its writer.
    var changedSinceFlush: Set<ChannelID> = []
    var cacheFlush: Task<Void, Never>?
    /// The server time up to which every change is known here (kept in the cache).
    var syncedThrough: Timestamp?
    /// The server's time when the socket (re)connected: changes after it arrive live.
    var connectedAt: Timestamp?
    /// Whether the changes made while the client was away have been caught up with: false from
    /// the moment a socket ends until the catch-up of the next one is done, so that no event of the
    /// new connection moves `syncedThrough` past what the socket missed.
    var isCaughtUp = false
    /// Counts the sockets that ended: a catch-up started on one connection that ended meanwhile
    /// does not count as caught up (the next connection's catch-up runs again).
    var socketsEnded = 0
    /// Loads under way, and the events that arrived meanwhile (replayed on the loaded state).
    var loadsInFlight: [ChannelID: Int] = [:]
    var eventsDuringLoad: [ChannelID: [Event]] = [:]
    /// The current user's outbox, by message id.
    var local: [String: OutboxEntry] = [:]
    /// One sender per channel with messages waiting.
    var senders: [ChannelID: Task<Void, Never>] = [:]

    /// Channel types' configs as last seen, by name.
    var typeConfigs: [String: ChannelConfig] = [:]
    /// Messages waiting for their channel type's config before they can be marked delivered.
    var awaitingType: [String: [(message: Message, cid: ChannelID)]] = [:]
    var delivery: DeliveryBatcher
    var deliveryTask: Task<Void, Never>?
    /// When the last mark-delivered call ended, on `time`.
    var lastDeliveryCall: Duration?
    /// The configuration's clock, read as durations.
    nonisolated let time: TimeSource

    let receiptBroadcast = Broadcast<MessageReceipt>()
    let statusBroadcast = Broadcast<ConnectionStatus>()
    var channelBroadcasts: [ChannelID: Broadcast<ChatChannel>] = [:]

    public init(configuration: ChatClientConfiguration) throws {
        self.configuration = configuration
        self.time = TimeSource(clock: configuration.clock)
        let database = try LocalDatabase(configuration.outbox)
        self.outbox = Outbox(database)
        self.cache = ChannelCache(database, limits: configuration.cacheLimits)
        self.delivery = DeliveryBatcher(batchSize: max(1, min(configuration.deliveryBatchSize, 100)))
    }

    public init(baseURL: URL, apiKey: String, outbox: OutboxLocation = .inMemory) throws {
        try self.init(configuration: ChatClientConfiguration(baseURL: baseURL, apiKey: apiKey, outbox: outbox))
    }

    // The one place `status` changes, so that every change is broadcast.
    func setStatus(_ new: ConnectionStatus) {
        guard new != status else { return }
        status = new
        statusBroadcast.yield(new)
    }
}

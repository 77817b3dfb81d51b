import Foundation
import Logging
import TicksProtocol
import TicksReceipts

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
    private let socketRequests = SocketRequests()
    /// The current user as the server last described them (`health.check`'s `me`).
    var me: User?
    private(set) var status: ConnectionStatus = .disconnected
    private var connectionTask: Task<Void, Never>?

    var models: [ChannelID: ChannelModel] = [:]
    /// Channels the app opened: their state is refreshed after every reconnect.
    var openChannels: Set<ChannelID> = []
    private var reloads: [ChannelID: Task<Void, Never>] = [:]
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
    /// Whether the changes made while the client was away have been caught up with.
    var isCaughtUp = false
    /// Loads under way, and the events that arrived meanwhile (replayed on the loaded state).
    private var loadsInFlight: [ChannelID: Int] = [:]
    private var eventsDuringLoad: [ChannelID: [Event]] = [:]
    /// The current user's outbox, by message id.
    private var local: [String: OutboxEntry] = [:]
    /// One sender per channel with messages waiting.
    private var senders: [ChannelID: Task<Void, Never>] = [:]

    /// Channel types' configs as last seen, by name.
    private var typeConfigs: [String: ChannelConfig] = [:]
    /// Messages waiting for their channel type's config before they can be marked delivered.
    private var awaitingType: [String: [(message: Message, cid: ChannelID)]] = [:]
    private var delivery: DeliveryBatcher
    private var deliveryTask: Task<Void, Never>?
    /// When the last mark-delivered call ended, on `time`.
    private var lastDeliveryCall: Duration?
    /// The configuration's clock, read as durations.
    nonisolated let time: TimeSource

    private let receiptBroadcast = Broadcast<MessageReceipt>()
    private let statusBroadcast = Broadcast<ConnectionStatus>()
    private var channelBroadcasts: [ChannelID: Broadcast<ChatChannel>] = [:]

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

    // MARK: Connection

    /// The user the client is connected as (or connecting as).
    public var currentUserID: String? { session?.userID }

    public var connectionStatus: ConnectionStatus { status }

    /// The connection status now, then every change.
    public func connectionStatuses() -> AsyncStream<ConnectionStatus> {
        statusBroadcast.subscribe(startingWith: status)
    }

    /// Receipts from other members as they arrive, live or caught up after a
    /// reconnect (CometChat's `onMessagesDelivered` / `onMessagesRead`).
    public nonisolated func receiptEvents() -> AsyncStream<MessageReceipt> {
        receiptBroadcast.subscribe()
    }

    /// Connects as `userID` and stays connected, reconnecting with backoff.
    ///
    /// Returns once the first attempt has an outcome: connected, or the server
    /// could not be reached (the client keeps trying in the background, and
    /// messages wait in the outbox). Throws only when the server refuses the
    /// credentials. Messages left in the outbox by an earlier run are sent.
    public func connect(userID: String, token: String) async throws {
        guard Identifier.isValid(userID) else {
            throw TicksClientError.api(statusCode: 400, code: 4, message: "'\(userID)' is not a valid user id")
        }
        await disconnect()
        if session?.userID != userID {
            models = [:]
            lists = [:]
            summaries = [:]
            me = nil
            syncedThrough = nil
        }
        let api = APIClient(
            baseURL: configuration.baseURL, apiKey: configuration.apiKey, token: token,
            timeout: configuration.requestTimeout)
        let socket = EventSocket(
            baseURL: configuration.baseURL, apiKey: configuration.apiKey, userID: userID, token: token,
            healthCheckInterval: configuration.healthCheckInterval, time: time, requests: socketRequests,
            logger: logger)
        session = Session(userID: userID, api: api, socket: socket)
        local = Dictionary(uniqueKeysWithValues: try await outbox.entries(of: userID).map { ($0.id, $0) })
        // What the device kept from an earlier run shows at once, before the network answers.
        if models.isEmpty { await restoreFromCache(userID) }
        isCaughtUp = false
        publishAll()

        let statuses = statusBroadcast.subscribe()
        connectionTask = Task { await self.runConnection(socket) }
        for cid in Set(local.values.compactMap { ChannelID(cid: $0.cid) }) {
            startSending(cid)
        }
        for await status in statuses {
            switch status {
            case .connected: return
            case .refused(let error): throw error
            case .disconnected: return
            case .connecting: continue
            }
        }
    }

    /// Closes the socket and stops sending; messages still in the outbox wait
    /// for the next `connect`.
    public func disconnect() async {
        let task = connectionTask
        connectionTask = nil
        task?.cancel()
        await task?.value
        for task in senders.values { task.cancel() }
        senders = [:]
        deliveryTask?.cancel()
        deliveryTask = nil
        for task in reloads.values { task.cancel() }
        reloads = [:]
        isCaughtUp = false
        await flushCache()
        if status != .disconnected, !isRefused { setStatus(.disconnected) }
    }

    private var isRefused: Bool {
        if case .refused = status { return true }
        return false
    }

    private func setStatus(_ new: ConnectionStatus) {
        guard new != status else { return }
        status = new
        statusBroadcast.yield(new)
    }

    /// Keeps a socket open until cancelled or refused.
    private func runConnection(_ socket: EventSocket) async {
        var failures = 0
        while !Task.isCancelled {
            setStatus(.connecting)
            do {
                try await socket.run { event in await self.handle(event) }
                failures = 0
            } catch let error as TicksClientError where !error.isTransient {
                logger.error("the server refused the connection", metadata: ["error": "\(error)"])
                setStatus(.refused(error))
                return
            } catch is CancellationError {
                break
            } catch {
                logger.debug("could not connect", metadata: ["error": "\(error)"])
            }
            if Task.isCancelled { break }
            setStatus(.disconnected)
            failures += 1
            try? await time.sleep(for: configuration.reconnectBackoff.delay(after: failures))
        }
    }

    /// After every (re)connect: send what waits in the outbox, catch up with
    /// what changed while away (`POST /sync` for every known channel, reloads
    /// where that cannot tell), and mark delivered what arrived meanwhile.
    private func didConnect() {
        guard let session else { return }
        if configuration.resendsFailedOnReconnect {
            for entry in local.values where entry.state == .failed {
                Task { try? await self.resend(messageId: entry.id) }
            }
        }
        for cid in Set(local.values.compactMap { ChannelID(cid: $0.cid) }) {
            startSending(cid)
        }
        Task { await self.catchUp(session) }
        if configuration.marksDelivered {
            Task { await self.catchUpDelivered(session) }
        }
    }

    // MARK: Events

    func handle(_ event: Event) async {
        guard let session else { return }
        if isCaughtUp, syncedThrough.map({ $0 < event.createdAt }) ?? true { syncedThrough = event.createdAt }
        if event.type == .healthCheck {
            if let me = event.me {
                self.me = me.user
                setTotals(ChatUnreadTotals(totalUnreadCount: me.totalUnreadCount, unreadChannels: me.unreadChannels))
            }
            if let connectionID = event.connectionID, !status.isConnected {
                connectedAt = event.createdAt
                setStatus(.connected(connectionID: connectionID))
                didConnect()
            }
            return
        }
        if let total = event.totalUnreadCount {
            setTotals(ChatUnreadTotals(totalUnreadCount: total, unreadChannels: event.unreadChannels ?? totals.unreadChannels))
        }
        guard let cid = event.cid.flatMap(ChannelID.init(cid:)) else { return }
        if event.type == .messageNew, let message = event.message, message.user.id == session.userID,
            local[message.id] != nil
        {
            // Committed on the server (R12): the outbox can let go of it.
            await acknowledge(message.id)
        }
        if loadsInFlight[cid, default: 0] > 0 { eventsDuringLoad[cid, default: []].append(event) }
        var model = models[cid] ?? ChannelModel(cid: cid)
        let outcome = model.apply(event, currentUserID: session.userID)
        models[cid] = model
        for receipt in outcome.receipts { receiptBroadcast.yield(receipt) }
        // A channel heard of but not known here: load it, for the lists it may join.
        let unknown = model.channel == nil && model.isMember && !lists.isEmpty
        if outcome.needsReload || unknown { scheduleReload(cid, delay: .milliseconds(50)) }
        if outcome.changed { publish(cid) }
        if event.type == .messageNew, let message = event.message, message.user.id != session.userID {
            noteArrived(message, in: cid)
        }
    }

    // MARK: Channels

    /// A handle on a channel. Nothing is fetched yet: call `load()`, or wait
    /// for the next connect, which loads every channel opened this way.
    /// What the device cache kept of it shows at once.
    public func channel(_ cid: ChannelID) -> ChannelController {
        openChannels.insert(cid)
        if models[cid] == nil { models[cid] = ChannelModel(cid: cid) }
        if models[cid]?.hasOlderInCache == true {
            Task { await self.restoreCachedMessages(cid) }
        }
        return ChannelController(cid: cid, client: self)
    }

    /// The connected session's HTTP API.
    func api() throws -> APIClient {
        guard let session else { throw TicksClientError.notConnected }
        return session.api
    }

    func connectedUserID() throws -> String {
        guard let session else { throw TicksClientError.notConnected }
        return session.userID
    }

    func state(of cid: ChannelID) throws -> ChatChannel {
        guard let session else { throw TicksClientError.notConnected }
        let model = models[cid] ?? ChannelModel(cid: cid)
        return model.snapshot(
            currentUserID: session.userID, currentUser: me, outbox: outboxEntries(in: cid),
            policy: configuration.groupPolicy)
    }

    func updates(of cid: ChannelID) -> AsyncStream<ChatChannel> {
        let broadcast = channelBroadcasts[cid] ?? Broadcast<ChatChannel>(bufferSize: 64)
        channelBroadcasts[cid] = broadcast
        return broadcast.subscribe(startingWith: try? state(of: cid))
    }

    func outboxEntries(in cid: ChannelID) -> [OutboxEntry] {
        local.values.filter { $0.cid == cid.rawValue }.sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
    }

    /// A channel changed: its subscribers, the lists that show it (or now
    /// should) and the cache hear of it.
    func publish(_ cid: ChannelID) {
        summaries[cid] = nil
        noteChangedForCache(cid)
        updateLists(for: cid)
        guard let broadcast = channelBroadcasts[cid], broadcast.subscriberCount > 0,
            let snapshot = try? state(of: cid)
        else { return }
        broadcast.yield(snapshot)
    }

    private func publishAll() {
        summaries = [:]
        for cid in channelBroadcasts.keys { publish(cid) }
        for query in lists.keys { publishList(query) }
    }

    /// Fetches the channel's state; creates the channel with `members` if it
    /// does not exist and members are given. With the server out of reach,
    /// a channel the device cache kept shows what it kept (and is loaded
    /// again after the next connect) rather than failing.
    func load(_ cid: ChannelID, members: [String]? = nil) async throws {
        guard let session else { throw TicksClientError.notConnected }
        openChannels.insert(cid)
        await restoreCachedMessages(cid)
        do {
            try await fetch(cid, members: members, session: session)
        } catch let error as TicksClientError where error.isTransient && models[cid]?.isLoaded == true {
            logger.debug("showing the cached channel", metadata: ["cid": "\(cid)", "error": "\(error)"])
        }
    }

    /// The channel's newest messages and read states from the server.
    func fetch(_ cid: ChannelID, members: [String]?, session: Session) async throws {
        loadsInFlight[cid, default: 0] += 1
        defer {
            loadsInFlight[cid, default: 1] -= 1
            if loadsInFlight[cid] == 0 {
                loadsInFlight[cid] = nil
                eventsDuringLoad[cid] = nil
            }
        }
        let state = try await session.api.queryChannel(
            cid, messageLimit: configuration.messagePageSize, members: members)
        guard self.session?.userID == session.userID else { return }
        await absorb(state, session: session, replaying: eventsDuringLoad[cid] ?? [])
    }

    /// Takes a channel's state from the server (a load, or a list's page).
    /// Events that arrived while it was on its way may be newer than it:
    /// they are applied again (cursor moves are forward-only, so this is
    /// safe; their receipts were already reported).
    func absorb(_ state: ChannelState, session: Session, replaying events: [Event] = [], pageSize: Int? = nil) async {
        guard let cid = ChannelID(cid: state.channel.cid) else { return }
        typeConfigs[cid.type] = state.channel.config
        var model = models[cid] ?? ChannelModel(cid: cid)
        let missed = model.load(state, currentUserID: session.userID)
        if state.messages.count < (pageSize ?? configuration.messagePageSize), !model.hasOlderInCache {
            model.hasOlderMessages = false
        }
        for event in events {
            _ = model.apply(event, currentUserID: session.userID)
        }
        models[cid] = model
        for receipt in missed { receiptBroadcast.yield(receipt) }
        // Messages the server has that the outbox still holds were sent (a lost answer).
        for message in state.messages where message.user.id == session.userID && local[message.id] != nil {
            await acknowledge(message.id)
        }
        publish(cid)
        if let message = model.undeliveredFromOthers(currentUserID: session.userID) {
            noteArrived(message, in: cid)
        }
    }

    /// Up to `limit` messages older than the oldest loaded one: from the
    /// device cache when it has them, else from the server (`id_lt`), with
    /// their receipts. Returns how many were added (0: the beginning).
    func loadOlder(_ cid: ChannelID, limit: Int) async throws -> Int {
        guard let session else { throw TicksClientError.notConnected }
        let before = models[cid]?.messages.count ?? 0
        await restoreCachedMessages(cid)
        let restored = (models[cid]?.messages.count ?? 0) - before
        if restored > 0 { return restored }
        guard let model = models[cid], model.isLoaded else {
            try await load(cid)
            return models[cid]?.messages.count ?? 0
        }
        guard let oldest = model.messages.first, model.hasOlderMessages else { return 0 }
        let page = try await session.api.queryChannel(cid, messageLimit: limit, before: oldest.id)
        guard var current = models[cid] else { return 0 }
        let added = current.prependOlder(page.messages)
        if page.messages.count < limit { current.hasOlderMessages = false }
        models[cid] = current
        publish(cid)
        return added
    }

    /// Reloads a channel soon, once, however many events ask for it.
    func scheduleReload(_ cid: ChannelID, delay: Duration) {
        guard reloads[cid] == nil, let session else { return }
        reloads[cid] = Task {
            try? await self.time.sleep(for: delay)
            do {
                try await self.fetch(cid, members: nil, session: session)
            } catch {
                self.logger.debug("could not reload a channel", metadata: ["cid": "\(cid)", "error": "\(error)"])
            }
            self.reloadFinished(cid)
        }
    }

    private func reloadFinished(_ cid: ChannelID) {
        reloads[cid] = nil
    }

    // MARK: Sending

    /// Writes the message to the outbox, then sends it. Returns it as pending.
    func send(_ text: String, id: String?, extraData: [String: JSONValue], to cid: ChannelID) async throws
        -> ChatMessage
    {
        guard let session else { throw TicksClientError.notConnected }
        guard !text.isEmpty else {
            throw TicksClientError.api(statusCode: 400, code: 4, message: "a message needs text")
        }
        let id = id ?? UUID().uuidString.lowercased()
        guard Identifier.isValid(id) else {
            throw TicksClientError.api(statusCode: 400, code: 4, message: "'\(id)' is not a valid message id")
        }
        if let existing = try state(of: cid).message(withID: id) { return existing }
        let custom = try JSONEncoder().encode(extraData)
        let entry = OutboxEntry(
            id: id, userID: session.userID, cid: cid.rawValue, text: text,
            custom: String(decoding: custom, as: UTF8.self), createdAt: Timestamp.now().microseconds,
            state: .pending, attempts: 0, lastError: nil)
        // Durable before any network call.
        try await outbox.add(entry)
        local[id] = entry
        publish(cid)
        startSending(cid)
        guard let message = try state(of: cid).message(withID: id) else { throw TicksClientError.unknownMessage(id) }
        return message
    }

    /// Moves a failed message back to pending and sends it again.
    public func resend(messageId id: String) async throws {
        guard var entry = local[id] else { throw TicksClientError.unknownMessage(id) }
        guard entry.state == .failed else { return }
        entry.state = .pending
        entry.attempts = 0
        entry.lastError = nil
        try await outbox.update(entry)
        local[id] = entry
        guard let cid = ChannelID(cid: entry.cid) else { return }
        publish(cid)
        startSending(cid)
    }

    /// Sends the channel's pending messages one at a time, oldest first, so
    /// they reach the server in the order they were written.
    private func startSending(_ cid: ChannelID) {
        guard senders[cid] == nil, let session, nextPending(in: cid) != nil else { return }
        let attempts = max(configuration.sendAttempts, 1)
        let backoff = configuration.sendBackoff
        senders[cid] = Task {
            while !Task.isCancelled, let entry = self.nextPending(in: cid) {
                var attempt = 0
                while !Task.isCancelled {
                    attempt += 1
                    do {
                        let message = try await session.api.sendMessage(
                            id: entry.id, text: entry.text, custom: entry.extraData, to: cid)
                        await self.sent(message, cid: cid)
                        break
                    } catch let error as TicksClientError where error.isTransient && attempt < attempts {
                        await self.recordAttempt(entry.id, attempt: attempt, error: error)
                        try? await self.time.sleep(for: backoff.delay(after: attempt))
                    } catch is CancellationError {
                        break
                    } catch {
                        await self.failed(entry.id, attempt: attempt, error: error)
                        break
                    }
                }
            }
            self.senders[cid] = nil
        }
    }

    /// The oldest message of the channel still waiting to be sent.
    private func nextPending(in cid: ChannelID) -> OutboxEntry? {
        outboxEntries(in: cid).first { $0.state == .pending }
    }

    private func recordAttempt(_ id: String, attempt: Int, error: any Error) async {
        guard var entry = local[id] else { return }
        entry.attempts = attempt
        entry.lastError = String(describing: error)
        local[id] = entry
        try? await outbox.update(entry)
    }

    private func failed(_ id: String, attempt: Int, error: any Error) async {
        guard var entry = local[id] else { return }
        logger.info("a message could not be sent", metadata: ["id": "\(id)", "error": "\(error)"])
        entry.state = .failed
        entry.attempts = attempt
        entry.lastError = String(describing: error)
        local[id] = entry
        do {
            try await outbox.update(entry)
        } catch {
            logger.error("the outbox could not be updated", metadata: ["id": "\(id)", "error": "\(error)"])
        }
        if let cid = ChannelID(cid: entry.cid) { publish(cid) }
    }

    private func sent(_ message: Message, cid: ChannelID) async {
        var model = models[cid] ?? ChannelModel(cid: cid)
        model.stored(message, currentUserID: currentUserID ?? message.user.id)
        models[cid] = model
        await acknowledge(message.id)
        publish(cid)
    }

    /// The server has the message: it leaves the outbox.
    private func acknowledge(_ id: String) async {
        guard let entry = local.removeValue(forKey: id) else { return }
        do {
            try await outbox.remove(id)
        } catch {
            logger.error("the outbox could not be updated", metadata: ["id": "\(id)", "error": "\(error)"])
        }
        if let cid = ChannelID(cid: entry.cid) { publish(cid) }
    }

    // MARK: Read and unread

    func markRead(_ cid: ChannelID, upTo messageID: String?) async throws {
        guard let session else { throw TicksClientError.notConnected }
        let event: Event
        if configuration.receiptsOnSocket,
            let ack = try await onSocket({ .markRead(cid.rawValue, upTo: messageID, requestID: $0) }),
            let answered = ack.event
        {
            event = answered
        } else {
            event = try await session.api.markRead(cid, upTo: messageID)
        }
        await handle(event)
    }

    /// Sends a receipt as a frame on the open socket and returns the server's
    /// ack; nil when no socket could carry it (HTTP must). A refusal throws,
    /// as HTTP's would.
    private func onSocket(_ request: @Sendable (String) -> SocketReceipt.Request) async throws -> SocketReceipt.Ack? {
        let ack: SocketReceipt.Ack
        do {
            ack = try await socketRequests.send(request)
        } catch let error as TicksClientError where error.isTransient {
            return nil
        }
        if let error = ack.error {
            throw TicksClientError.api(statusCode: error.statusCode, code: error.code, message: error.message)
        }
        return ack
    }

    func markUnread(_ cid: ChannelID, from messageID: String) async throws {
        guard let session else { throw TicksClientError.notConnected }
        try await session.api.markUnread(cid, from: messageID)
        // The server's notification.mark_unread brings the new cursor and counts.
    }

    /// Every member's receipt for the message (Ticks' receipts endpoint): exact
    /// times, or upper bounds flagged by `MessageReceipt.readAtIsExact` and
    /// `deliveredAtIsExact` once the server pruned the moves from its receipt log.
    public func receipts(for messageId: String) async throws -> MessageReceipts {
        guard let session else { throw TicksClientError.notConnected }
        let response = try await session.api.receipts(for: messageId)
        guard let cid = response.cid.flatMap(ChannelID.init(cid:)) ?? models.values.first(where: { $0.hasMessage(messageId) })?.cid
        else { throw TicksClientError.invalidResponse("the receipts of '\(messageId)' name no channel") }
        return MessageReceipts(
            receipts: response.receipts.map { receipt in
                MessageReceipt(
                    messageId: messageId, cid: cid, user: ChatUser(receipt.user),
                    receiptType: receipt.readAt != nil ? .read : .delivered,
                    deliveredAt: receipt.deliveredAt?.date, readAt: receipt.readAt?.date,
                    deliveredAtIsExact: receipt.deliveredAtExact ?? true, readAtIsExact: receipt.readAtExact ?? true)
            }, readCount: response.readCount, deliveredCount: response.deliveredCount)
    }

    // MARK: Delivered

    /// Whether this device should tell senders their messages arrived.
    var marksDelivered: Bool {
        configuration.marksDelivered && (me?.sharesDeliveryReceipts ?? true)
    }

    /// A message from someone else reached this device: mark it delivered soon,
    /// unless the channel type has no delivery events (R9) or it is already.
    private func noteArrived(_ message: Message, in cid: ChannelID) {
        guard marksDelivered, let session else { return }
        guard let config = models[cid]?.config ?? typeConfigs[cid.type] else {
            // A channel not opened here: learn its type's config first.
            awaitingType[cid.type, default: []].append((message, cid))
            if awaitingType[cid.type]?.count == 1 {
                Task { await self.fetchTypeConfig(cid.type, session) }
            }
            return
        }
        guard config.deliveryEvents else { return }
        if models[cid]?.isDelivered(message.id, currentUserID: session.userID) == true { return }
        delivery.add(.init(cid: cid, messageID: message.id, createdAt: message.createdAt.microseconds))
        scheduleDeliveryFlush()
    }

    private func fetchTypeConfig(_ name: String, _ session: Session) async {
        do {
            typeConfigs[name] = try await session.api.channelType(named: name)
        } catch {
            logger.debug("could not read a channel type", metadata: ["type": "\(name)", "error": "\(error)"])
        }
        let waiting = awaitingType.removeValue(forKey: name) ?? []
        guard typeConfigs[name] != nil else { return }
        for (message, cid) in waiting { noteArrived(message, in: cid) }
    }

    /// At most one call per `deliveryThrottle`, each with at most `deliveryBatchSize` channels.
    private func scheduleDeliveryFlush() {
        guard deliveryTask == nil, !delivery.isEmpty else { return }
        let due = lastDeliveryCall.map { $0 + configuration.deliveryThrottle } ?? .zero
        deliveryTask = Task {
            try? await self.time.sleep(until: due)
            guard !Task.isCancelled else { return }
            await self.flushDelivered()
        }
    }

    private func flushDelivered() async {
        guard let session else {
            deliveryTask = nil
            return
        }
        let batch = delivery.takeBatch().filter { mark in
            !(models[mark.cid]?.isDelivered(mark.messageID, currentUserID: session.userID) ?? false)
        }
        if !batch.isEmpty {
            do {
                let entries = batch.map { SocketReceipt.DeliveredEntry(cid: $0.cid.rawValue, id: $0.messageID) }
                var sent = false
                if configuration.receiptsOnSocket {
                    sent = try await onSocket({ .markDelivered(entries, requestID: $0) }) != nil
                }
                if !sent { try await session.api.markDelivered(batch.map { ($0.cid, $0.messageID) }) }
            } catch let error as TicksClientError where error.isTransient {
                logger.debug("mark delivered failed; will retry", metadata: ["error": "\(error)"])
                delivery.restore(batch)
            } catch is CancellationError {
                delivery.restore(batch)
            } catch {
                logger.warning("mark delivered refused", metadata: ["error": "\(error)"])
            }
            // The next call waits a full period after this one ended.
            lastDeliveryCall = time.now
        }
        deliveryTask = nil
        if status.isConnected { scheduleDeliveryFlush() }
    }

    /// After a connect: the newest message of each recent channel, if it came
    /// from someone else and this user's devices have not marked it delivered.
    private func catchUpDelivered(_ session: Session) async {
        do {
            let states = try await session.api.queryChannels(
                of: session.userID, limit: min(max(configuration.deliveryCatchUpChannels, 1), 30), messageLimit: 1)
            for state in states {
                typeConfigs[state.channel.type] = state.channel.config
                guard state.channel.config.deliveryEvents, let newest = state.messages.last,
                    newest.user.id != session.userID,
                    let cid = ChannelID(cid: state.channel.cid)
                else { continue }
                let own = state.read.first { $0.user.id == session.userID }
                if own?.lastDeliveredMessageID == newest.id || own?.lastReadMessageID == newest.id { continue }
                noteArrived(newest, in: cid)
            }
        } catch {
            logger.debug("delivered catch-up failed", metadata: ["error": "\(error)"])
        }
    }
}

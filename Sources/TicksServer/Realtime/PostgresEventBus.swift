import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization
import TicksProtocol
import Tracing

/// The event bus of several nodes on one PostgreSQL database, with no broker
/// but PostgreSQL itself: `NOTIFY` to publish, `LISTEN` to receive.
///
/// Events queued by `publish` go out in order, several to a notification. A
/// notification carries at most 8,000 bytes, so a run of events too large
/// for one is stored in `event_batch`, as one row, and the notification
/// carries its id; nothing is cut. An event with per-recipient parts
/// (`message.new`) travels once, with each recipient's counts beside it.
/// Each event is written to JSON once, by hand, as it is queued, and a
/// notification is those bytes put together: no encoder, and every size is
/// known (one send to 1,000 members wrote 2,000 endings through
/// `JSONEncoder`, about a tenth of the node's CPU: BENCHMARKS.md).
///
/// Nothing is dropped silently. An event this node cannot publish (the queue
/// is full, or publishing failed twice) names users whose connections on the
/// other nodes may have missed it: once publishing works again, the first
/// notification tells the other nodes to close those users' connections, and
/// the clients reconnect and refresh their state (the SDK does that after
/// every reconnect). Likewise the listener: when its connection drops,
/// notifications sent meanwhile are gone, so once it is back the node closes
/// every WebSocket it holds. The node serves from its start, and the listener
/// connects beside it: `GET /ready` answers 503 until the bus listens (and
/// whenever it does not), so a balancer sends no socket there that would miss
/// the other nodes' events.
///
/// Traced (`ticks serve --otel-endpoint`), each entry carries the W3C trace
/// context of the span that published it, and the receiving node hands the
/// frame to its sockets inside a `ws.fanout` span, that span's child: one
/// trace from the request on one node to the socket writes on the others.
/// The fields are optional, so nodes of the release before, which neither
/// send nor read them, share the bus with traced ones (docs/storage.md).
public final class PostgresEventBus: EventBus {
    /// Batches that did not fit a notification are kept this long for nodes to fetch.
    static let storedBatchLifetime: Duration = .seconds(600)
    /// What a notification may carry (PostgreSQL's limit is 8,000 bytes), with room to spare.
    static let payloadLimit = 7_900
    /// Users named in one resync notice before it becomes "everyone".
    static let resyncUserLimit = 10_000
    /// What one stored batch holds at most, unless a single event is larger.
    static let storedBatchBytes = 1 << 20

    let pool: PostgresPool
    let configuration: PostgresConnection.Configuration
    /// The notification channel: one per database schema, so stores in other schemas never hear it.
    let channel: String
    /// This node, so it skips its own notifications.
    let node: String
    /// `{"node":"…"`, how every batch of this node begins (`opening(of:)`).
    private let opening: [UInt8]
    /// The field that marks this node's own notifications (`ownField(of:)`).
    private let ownField: String
    /// Whether entries carry their trace context and received ones are `ws.fanout` spans.
    let tracing: Bool
    let logger: Logger
    /// What may wait to be published, in bytes (`ServerLimits.busQueueBytes`).
    let queueBytes: Int
    /// The clock of the reconnection backoffs and the pruning (a test's clock in tests).
    let time: TimeSource
    /// How long a round of publishing, or a fetch of a stored batch, may take: past it the
    /// connection under it is closed and the round counts as failed (`StoreDeadline`).
    let deadline: StoreDeadline
    /// Reads the counts of a new message's members connected here (`Entry.countsOf`).
    private let counts: RecipientCountsReader?
    private let state = Mutex(State())
    private let doorbell: AsyncStream<Void>
    private let ring: AsyncStream<Void>.Continuation

    /// What waits to go out.
    private struct State {
        /// Entries waiting, oldest first, and their size.
        var queue: [Queued] = []
        var queuedBytes = 0
        /// Users whose connections on the other nodes missed an event.
        var resync: Set<String> = []
        /// Too many to name: every connection of the other nodes missed one.
        var resyncEveryone = false
        /// The local hub, once running (its metrics count lost events).
        var hub: ConnectionHub?
        /// Whether the listener's connection is up.
        var listening = false
        /// Callers of `untilListening()` waiting for it, by their number (`nextAwaiting`).
        var awaitingListening: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextAwaiting = 0
        /// Events lost since the start.
        var eventsLost = 0

        mutating func lost(_ entries: some Sequence<Queued>) -> Int {
            var count = 0
            for entry in entries {
                count += 1
                guard !resyncEveryone else { continue }
                resync.formUnion(entry.users)
                if entry.everyone || resync.count > PostgresEventBus.resyncUserLimit {
                    resync = []
                    resyncEveryone = true
                }
            }
            return count
        }
    }

    /// An entry ready to go: its JSON (`entry(_:to:trace:)`), and the users
    /// whose connections on the other nodes miss it if it is lost (a lost
    /// watch: its user's, and their clients watch again); everyone's, for
    /// a message to every member of a channel, whom no one listed.
    struct Queued: Sendable {
        var json: [UInt8]
        var users: [String]
        var everyone = false
    }

    /// An entry of a batch, as the receiving node reads it.
    struct Entry: Codable, Sendable {
        /// The frame; with `endings`, the part every recipient shares.
        var frame: String
        var users: [String]
        /// With `counts`, each user's unread counts: three numbers a user, in
        /// `users`' order (`UnreadEnding`), added at the end of the frame, a
        /// whole object (a node of the release before sends it as it is).
        var counts: [Int]?
        /// Each user's ending of the frame (same order as `users`): what a
        /// node of the release before sends instead of `counts`.
        var endings: [String]?
        /// For the connections watching this channel (or none): a channel event (`ConnectionAudience`).
        var watchers: String?
        /// For the connections watching channels but not this one (`notification.message_new`).
        var unwatched: String?
        /// Instead of an event (`frame` empty, no `users`): a connection starts or stops
        /// watching a channel. A node of the release before sends the empty frame to no one.
        var watch: WatchChange?
        /// The W3C trace context of the span that published it (traced nodes only).
        var traceparent: String?
        var tracestate: String?
        /// A new message for every member of this channel (its pk), without counts: the receiving
        /// node reads the counts of those connected to it (`RecipientCountsReader`). A node of the
        /// release before ignores it and sends the frame, a whole object, without counts.
        var countsOf: Int64?
        /// With `countsOf` and no `users`: the message is for every member of that channel (this
        /// many when sent), unlisted; the receiving node finds its connected members as it reads
        /// their counts (`EventPublisher.membersHere`). Sent only where sends count by positions,
        /// which no node of a release before this field runs (docs/operations.md).
        var everyMember: Int?

        enum CodingKeys: String, CodingKey {
            case frame, users, counts, endings, watchers, unwatched, watch, traceparent, tracestate
            case countsOf = "counts_of"
            case everyMember = "every_member"
        }
    }

    struct Batch: Codable {
        var node: String
        var entries: [Entry]?
        /// Set instead of `entries` when the batch is in `event_batch`.
        var stored: Int64?
        /// Users whose connections must close: they missed an event of this node.
        var resync: [String]?
        /// Every connection must close.
        var resyncEveryone: Bool?

        enum CodingKeys: String, CodingKey {
            case node, entries, stored, resync
            case resyncEveryone = "resync_everyone"
        }
    }

    /// - Parameters:
    ///   - pool: the store's connection pool, to fetch and prune stored batches.
    ///   - configuration: how to open the connections of its own (one to publish, one to listen).
    ///   - schema: the store's schema; it names the notification channel.
    ///   - queueBytes: what may wait to be published; past it, events are lost and their users resync.
    ///   - time: the clock of the reconnection backoffs and the pruning of stored batches.
    ///   - node: this node's name on the bus (`TicksServerConfiguration.nodeID`).
    ///   - tracing: carry trace contexts to the other nodes and make `ws.fanout` spans of theirs.
    ///   - deadline: how long one round of publishing or one fetch may take.
    ///   - counts: reads the counts of a new message's members connected here (the store's);
    ///     without it, a new message from another node reaches them without counts.
    init(
        pool: PostgresPool, configuration: PostgresConnection.Configuration, schema: String,
        queueBytes: Int = ServerLimits().busQueueBytes, time: TimeSource = .system,
        node: String = UUID().uuidString.lowercased(), tracing: Bool = false, deadline: StoreDeadline = StoreDeadline(),
        counts: RecipientCountsReader? = nil, logger: Logger
    ) {
        self.counts = counts
        self.deadline = deadline
        self.node = node
        self.opening = Self.opening(of: node)
        self.ownField = Self.ownField(of: node)
        self.tracing = tracing
        self.time = time
        self.pool = pool
        self.configuration = configuration
        self.channel = "ticks_events_" + schema.lowercased().filter { $0.isLetter || $0.isNumber || $0 == "_" }
        self.queueBytes = queueBytes
        self.logger = logger
        (doorbell, ring) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    public func publish(_ event: EncodedEvent, to userIDs: [String]) {
        guard let entry = Self.entry(event, to: userIDs, trace: tracing ? TraceContext.current() : nil) else { return }
        enqueue(entry)
    }

    public func publish(toEveryMember event: EncodedEvent, memberCount: Int) {
        guard
            let entry = Self.entry(
                event, to: [], everyMember: memberCount, trace: tracing ? TraceContext.current() : nil)
        else { return }
        enqueue(entry)
    }

    public func watch(_ change: WatchChange) {
        enqueue(Self.entry(change))
    }

    /// `event`'s entry for those of `userIDs` it is for (an event with
    /// personal parts is for those it has them for); nil when none.
    /// `{"frame":…,"users":[…],"counts":[…],"watchers":…,"traceparent":…}`,
    /// the keys `Entry` reads.
    /// With `everyMember` (the channel's member count), a new message (`countsToRead`) for every
    /// member of its channel, `userIDs` empty: `"users":[]` and `"every_member"`.
    static func entry(
        _ event: EncodedEvent, to userIDs: [String], everyMember memberCount: Int? = nil, trace: TraceContext?
    ) -> Queued? {
        var users = userIDs
        switch event.personal {
        case nil: break
        case .counts(let byUser)?: users = userIDs.filter { byUser[$0] != nil }
        case .endings(let byUser)?: users = userIDs.filter { byUser[$0] != nil }
        case .countsToRead?: break
        }
        if memberCount != nil {
            guard case .countsToRead? = event.personal else {
                assertionFailure("a message to every member of a channel is one whose counts are read there")
                return nil
            }
        } else if users.isEmpty {
            return nil
        }
        var writer = EventJSON.Writer()
        writer.out.reserveCapacity(event.shared.readableBytes + 20 * users.count + 100)
        writer.raw(#"{"frame":"#)
        switch event.personal {
        case .counts?, .countsToRead?: writer.string(String(buffer: event.shared) + "}")  // a whole object
        default: writer.string(String(buffer: event.shared))
        }
        writer.raw(#","users":"#)
        writer.strings(users)
        switch event.personal {
        case nil:
            break
        case .counts(let byUser)?:
            // Three numbers a user, in `users`' order, written as they are read.
            writer.raw(#","counts":["#)
            for (index, user) in users.enumerated() {
                let ending = byUser[user]!  // `users` holds only those with counts
                if index > 0 { writer.raw(",") }
                writer.integer(Int64(ending.channel))
                writer.raw(",")
                writer.integer(Int64(ending.messages))
                writer.raw(",")
                writer.integer(Int64(ending.channels))
            }
            writer.raw("]")
        case .endings(let byUser)?:
            writer.raw(#","endings":"#)
            writer.strings(users.map { String(buffer: byUser[$0]!) })
        case .countsToRead(let channelPK)?:
            writer.raw(#","counts_of":"#)
            writer.integer(channelPK)
            if let memberCount {
                writer.raw(#","every_member":"#)
                writer.integer(Int64(memberCount))
            }
        }
        switch event.audience {
        case .everyConnection: break
        case .watchers(let cid): writer.field("watchers", cid)
        case .notWatching(let cid): writer.field("unwatched", cid)
        }
        writer.field("traceparent", trace?.traceparent)
        writer.field("tracestate", trace?.tracestate)
        writer.raw("}")
        return Queued(json: writer.out, users: users, everyone: memberCount != nil)
    }

    /// A watch's entry: an empty `frame` for no `users` (a node of the
    /// release before sends it to no one), and the change.
    static func entry(_ change: WatchChange) -> Queued {
        var writer = EventJSON.Writer()
        writer.raw(#"{"frame":"","users":[],"watch":{"connection":"#)
        writer.string(change.connection)
        writer.field("user", change.user)
        writer.field("cid", change.cid)
        writer.raw(change.watching ? #","watching":true}}"# : #","watching":false}}"#)
        return Queued(json: writer.out, users: [change.user])
    }

    private func enqueue(_ entry: Queued) {
        let size = entry.json.count
        let dropped = state.withLock { state -> Int in
            guard state.queuedBytes + size <= queueBytes else { return state.lost([entry]) }
            state.queue.append(entry)
            state.queuedBytes += size
            return 0
        }
        if dropped > 0 {
            recordLost(dropped, reason: "the queue for the other nodes is full")
        }
        ring.yield()
    }

    public func run(hub: ConnectionHub) async throws {
        state.withLock { $0.hub = hub }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await self.sendQueued() }
            group.addTask { await self.listen(hub: hub) }
            group.addTask { await self.pruneStoredBatches() }
            try await group.next()
            group.cancelAll()
        }
    }

    public var status: EventBusStatus {
        state.withLock { state in
            EventBusStatus(
                node: node, listening: state.listening, queuedEvents: state.queue.count,
                queuedBytes: state.queuedBytes, eventsLost: state.eventsLost)
        }
    }

    private func recordLost(_ count: Int, reason: String) {
        let hub = state.withLock { state in
            state.eventsLost += count
            return state.hub
        }
        hub?.metrics.busEventsLost.increment(by: count)
        logger.error(
            "events could not reach the other nodes; their users' connections there will be closed to resync",
            metadata: ["events": "\(count)", "reason": "\(reason)"])
    }

    // MARK: Sending

    /// Sends the queued entries in order, as few notifications as fit, on a
    /// connection of its own: through the store's pool, under load every
    /// notification waited behind the receipts queued for a connection, and
    /// the other nodes heard of events seconds late (BENCHMARKS.md). A resync
    /// notice owed goes first; a round that fails twice is lost, and its users
    /// are owed one.
    private func sendQueued() async {
        var connection: PostgresConnection?
        var backoff = Duration.milliseconds(100)
        for await _ in doorbell {
            let (round, resync, everyone) = state.withLock { state in
                defer {
                    state.queue.removeAll(keepingCapacity: true)
                    state.queuedBytes = 0
                    state.resync = []
                    state.resyncEveryone = false
                }
                return (state.queue, state.resync, state.resyncEveryone)
            }
            guard !round.isEmpty || !resync.isEmpty || everyone else { continue }
            var sent = false
            // A connection that failed is replaced and the round sent once more.
            for attempt in 1...2 {
                do {
                    // Within the deadline: a connection behind a silent partition, or one that
                    // closed as the round went out, would otherwise hold the publisher for good.
                    let reused = connection
                    // A connection the round opened or kept after the publisher stopped waiting
                    // (its deadline, or the node stopping) is closed: no one holds it any more.
                    connection = try await deadline.run({ [self] in
                        let open: PostgresConnection
                        if let reused {
                            open = reused
                        } else {
                            open = try await PostgresConnection.connect(
                                configuration: configuration, id: 2, logger: logger)
                        }
                        let expiry = StoreDeadline.expiry
                        let registration = expiry?.closes(open)
                        defer { expiry?.forget(registration) }
                        do {
                            if everyone || !resync.isEmpty {
                                try await sendResync(Array(resync), everyone: everyone, on: open)
                            }
                            try await send(round, on: open)
                        } catch {
                            await close(open)
                            throw error
                        }
                        return open
                    }, leftover: { [self] open in await close(open) })
                    sent = true
                    break
                } catch {
                    if let failed = connection { await close(failed) }
                    connection = nil
                    guard attempt == 2 else { continue }
                    logger.error(
                        "could not publish events to the other nodes",
                        metadata: ["error": "\(String(reflecting: error))", "frames": "\(round.count)"])
                }
            }
            if sent {
                backoff = .milliseconds(100)
                continue
            }
            // Owed again, with what this round carried; retried after a pause even if nothing new comes.
            let lost = state.withLock { state in
                if everyone { state.resyncEveryone = true }
                if !state.resyncEveryone { state.resync.formUnion(resync) }
                return state.lost(round)
            }
            if lost > 0 { recordLost(lost, reason: "publishing failed") }
            do { try await time.sleep(for: backoff) } catch { break }
            backoff = min(backoff * 2, .seconds(5))
            ring.yield()
        }
        if let connection { await close(connection) }
    }

    /// Tells the other nodes to close the connections of `users` (or all).
    private func sendResync(_ users: [String], everyone: Bool, on connection: PostgresConnection) async throws {
        if everyone {
            try await notify(payload: batch { $0.raw(#","resync_everyone":true"#) }, on: connection)
            return
        }
        // `,"resync":[` and `]}` after the opening.
        let overhead = opening.count + 13
        var chunk: [String] = []
        var size = overhead
        for user in users {
            let userSize = EventJSON.Writer.size(of: user) + 1
            if !chunk.isEmpty, size + userSize > Self.payloadLimit {
                try await notify(payload: batch(resync: chunk), on: connection)
                chunk.removeAll()
                size = overhead
            }
            chunk.append(user)
            size += userSize
        }
        if !chunk.isEmpty {
            try await notify(payload: batch(resync: chunk), on: connection)
        }
        logger.warning(
            "told the other nodes to close connections that missed events",
            metadata: ["users": "\(everyone ? "all" : String(users.count))"])
    }

    private func batch(resync users: [String]) -> String {
        Self.batch(opening) { writer in
            writer.raw(#","resync":"#)
            writer.strings(users)
        }
    }

    private func batch(_ fields: (inout EventJSON.Writer) -> Void) -> String {
        Self.batch(opening, fields)
    }

    /// A batch: its `opening` (`opening(of:)`), what `fields` write, `}`.
    static func batch(_ opening: [UInt8], _ fields: (inout EventJSON.Writer) -> Void) -> String {
        var writer = EventJSON.Writer()
        writer.out = opening
        fields(&writer)
        writer.raw("}")
        return String(decoding: writer.out, as: UTF8.self)
    }

    /// A batch of `entries`: `{"node":"…","entries":[…]}`.
    static func batch(_ opening: [UInt8], entries: [Queued]) -> String {
        batch(opening) { writer in
            writer.raw(#","entries":["#)
            for (index, entry) in entries.enumerated() {
                if index > 0 { writer.raw(",") }
                writer.out += entry.json
            }
            writer.raw("]")
        }
    }

    /// `{"node":"…"`: how every batch of `node` begins.
    static func opening(of node: String) -> [UInt8] {
        var writer = EventJSON.Writer()
        writer.raw("{")
        writer.key("node")
        writer.string(node)
        return writer.out
    }

    /// Sends `entries` in order, in the batches `batches(of:overhead:)` makes.
    private func send(_ entries: [Queued], on connection: PostgresConnection) async throws {
        for batch in Self.batches(of: entries, overhead: opening.count + Self.entriesOverhead) {
            try await notify(batch, on: connection)
        }
    }

    /// `,"entries":[` and `]}` around a batch's entries, after its opening.
    static let entriesOverhead = 14

    /// `entries` in order, as many to a batch as fit a notification. A run
    /// of entries too large for one becomes one batch of up to
    /// `storedBatchBytes` (one larger alone is a batch alone), stored in
    /// `event_batch`: a send to a large channel (`message.new` and
    /// `notification.message_new`) is one row, not one for each.
    /// - Parameter overhead: a batch's bytes besides its entries and their commas.
    static func batches(of entries: [Queued], overhead: Int) -> [[Queued]] {
        var batches: [[Queued]] = []
        var batch: [Queued] = []
        var size = overhead
        for entry in entries {
            let stored = size > payloadLimit
            if !batch.isEmpty, size + 1 + entry.json.count > (stored ? storedBatchBytes : payloadLimit) {
                batches.append(batch)
                batch.removeAll()
                size = overhead
            }
            size += (batch.isEmpty ? 0 : 1) + entry.json.count
            batch.append(entry)
        }
        if !batch.isEmpty { batches.append(batch) }
        return batches
    }

    /// One notification for `entries`: the batch itself when it fits, else its id in `event_batch`.
    private func notify(_ entries: [Queued], on connection: PostgresConnection) async throws {
        let payload = Self.batch(opening, entries: entries)
        guard payload.utf8.count > Self.payloadLimit else {
            try await notify(payload: payload, on: connection)
            return
        }
        guard !connection.isClosed else { throw ConnectionClosed() }
        guard
            let id = try await connection.query(
                "INSERT INTO event_batch (body) VALUES (\(payload)) RETURNING id", logger: logger
            ).collect().first?.makeRandomAccess()[0].decode(Int64.self)
        else { throw PostgresEventBusError.storeFailed }
        try await notify(payload: batch { $0.raw(#","stored":"#); $0.integer(id) }, on: connection)
    }

    /// A query on a connection the server has already dropped is never
    /// answered (postgres-nio writes it to a closed channel and its promise
    /// is left pending), which left the publisher stuck for good after a
    /// database restart: a closed connection fails here instead, and is replaced.
    struct ConnectionClosed: Error {}

    private func notify(payload: String, on connection: PostgresConnection) async throws {
        guard !connection.isClosed else { throw ConnectionClosed() }
        for try await _ in try await connection.execute(Notify(channel: channel, payload: payload), logger: logger) {}
    }

    /// `pg_notify`, prepared once on the publishing connection rather than
    /// parsed and planned for every notification (issue 39: every statement
    /// on a hot path is prepared).
    private struct Notify: PostgresPreparedStatement {
        static let name = "ticks_notify"
        static let sql = "SELECT pg_notify($1, $2)"
        static let bindingDataTypes: [PostgresDataType] = [.text, .text]

        let channel: String
        let payload: String

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 2)
            bindings.append(channel)
            bindings.append(payload)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws {}
    }

    /// Closes `connection`; a connection may not be dropped open.
    private func close(_ connection: PostgresConnection) async {
        do {
            try await connection.close()
        } catch {
            logger.debug("event bus connection did not close cleanly", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Receiving

    /// Returns once the listener listens (at once if it does), or when the calling task is
    /// cancelled: for a caller that must not miss what the other nodes publish (a WebSocket's
    /// hello, tests; `GET /ready` reads `status` instead).
    public func untilListening() async {
        let number = state.withLock { state in
            defer { state.nextAwaiting += 1 }
            return state.nextAwaiting
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                // Cancelled before the continuation was kept: the handler below found nothing to resume.
                let now = state.withLock { state -> Bool in
                    guard !state.listening, !Task.isCancelled else { return true }
                    state.awaitingListening[number] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.awaitingListening.removeValue(forKey: number) }?.resume()
        }
    }

    /// Listens on a connection of its own; after it was lost, closes the local WebSockets (see above).
    private func listen(hub: ConnectionHub) async {
        var lostBefore = false
        var backoff = Duration.milliseconds(100)
        while !Task.isCancelled {
            do {
                let connection = try await PostgresConnection.connect(
                    configuration: configuration, id: 1, logger: logger)
                let heartbeat = startHeartbeat(on: connection)
                defer { heartbeat.cancel() }
                let ended: any Error
                do {
                    try await connection.listen(on: channel) { notifications in
                        let awaiting = state.withLock { state in
                            state.listening = true
                            defer { state.awaitingListening = [:] }
                            return state.awaitingListening.values
                        }
                        for continuation in awaiting { continuation.resume() }
                        if lostBefore {
                            closeAll(hub, because: "the event bus listener is back after it was lost")
                        }
                        backoff = .milliseconds(100)
                        for try await notification in notifications {
                            await deliver(notification.payload, to: hub)
                        }
                    }
                    ended = PostgresEventBusError.listenerEnded
                } catch {
                    ended = error
                }
                state.withLock { $0.listening = false }
                await close(connection)  // also when cancelled
                throw ended
            } catch is CancellationError {
                return
            } catch {
                if Task.isCancelled { return }
                lostBefore = true
                logger.error(
                    "event bus listener lost; reconnecting", metadata: ["error": "\(String(reflecting: error))"])
                do { try await time.sleep(for: backoff) } catch { return }
                backoff = min(backoff * 2, .seconds(5))
            }
        }
    }

    /// Asks the listener's connection `SELECT 1` every deadline, and closes it
    /// when no answer comes within one (which ends `listen` and so reconnects).
    /// A listening connection is silent: cut off by a partition, and dropped
    /// by the server meanwhile (its keepalives), it stayed open on this side
    /// for good once the network was back, and no event of another node
    /// arrived again.
    private func startHeartbeat(on connection: PostgresConnection) -> Task<Void, Never> {
        Task { [deadline, time, logger] in
            while true {
                do {
                    try await time.sleep(for: deadline.timeout)
                } catch {
                    return
                }
                do {
                    try await deadline.run { _ = try await connection.query("SELECT 1", logger: logger).collect() }
                } catch {
                    if Task.isCancelled { return }
                    logger.warning(
                        "the event bus listener's connection did not answer; reconnecting",
                        metadata: ["error": "\(error)"])
                    try? await connection.close()
                    return
                }
            }
        }
    }

    /// The `"node":"…"` field of `node`'s notifications, closing quote
    /// included, as its batches begin (`opening(of:)`), escaped as
    /// `JSONEncoder` escapes, as nodes of the release before wrote it.
    static func ownField(of node: String) -> String {
        String(decoding: opening(of: node).dropFirst(), as: UTF8.self)
    }

    /// Whether `payload` carries `field`, so is a notification of that node,
    /// told without decoding it: in a batch's JSON, `"node":"` with bare
    /// quotes can only be its own key (the frames inside are JSON strings,
    /// their quotes escaped; no other object of a batch has a `node` key; an
    /// array's strings are followed by `,` or `]`, never `:`), and the value's
    /// closing quote ends the name.
    static func isOwn(_ payload: String, field: String) -> Bool {
        payload.utf8.firstRange(of: field.utf8) != nil
    }

    private func deliver(_ payload: String, to hub: ConnectionHub) async {
        // Every event this node publishes comes back to it: on one node, all of them. Dropped
        // before Foundation's decoder reads it whole (14–15 % of a one-node PostgreSQL server's
        // CPU at 1,000 receipts/s went to encoding, notifying and decoding its own events).
        guard !Self.isOwn(payload, field: ownField) else { return }
        let batch: Batch
        do {
            batch = try JSONCoding.decode(Batch.self, from: payload)
        } catch {
            // Not knowing whom it was for, every client here resyncs.
            closeAll(hub, because: "could not read an event batch", error: error)
            return
        }
        guard batch.node != node else { return }
        if batch.resyncEveryone == true {
            closeAll(hub, because: "another node lost events for everyone")
        }
        if let users = batch.resync {
            let closed = hub.close(usersOf: users)
            logger.warning(
                "another node lost events for some users: closed their WebSockets",
                metadata: ["users": "\(users.count)", "connections": "\(closed)"])
        }
        var entries = batch.entries ?? []
        if let id = batch.stored {
            do {
                // Within the deadline: the listener waits for it, and must not wait for ever.
                guard
                    let body = try await deadline.run({ [pool, logger] in
                        try await pool.client.query("SELECT body FROM event_batch WHERE id = \(id)", logger: logger)
                            .collect().first?.makeRandomAccess()[0].decode(String.self)
                    })
                else { throw PostgresEventBusError.storedBatchGone(id) }
                entries = try JSONCoding.decode(Batch.self, from: body).entries ?? []
            } catch {
                closeAll(hub, because: "could not fetch a stored event batch", error: error)
                return
            }
        }
        // A channel's members here, read once for all the entries of this batch to every member
        // of it (`message.new` and `notification.message_new`, and sends that came together).
        var membersHere: [Int64: (users: [String], counts: [String: UnreadEnding])] = [:]
        for entry in entries {
            if let change = entry.watch {
                hub.apply(change)
                continue
            }
            var event = Self.event(of: entry)
            var users = entry.users
            if let channelPK = entry.countsOf, let memberCount = entry.everyMember {
                // A new message for every member, unlisted: those connected here, found by reading their counts.
                let found: (users: [String], counts: [String: UnreadEnding])
                if let known = membersHere[channelPK] {
                    found = known
                } else {
                    found = await EventPublisher.membersHere(
                        of: channelPK, memberCount: memberCount, in: hub, reading: counts, logger: logger)
                    membersHere[channelPK] = found
                }
                users = found.users
                if users.isEmpty { continue }
                event = event.counted(found.counts, for: users)
            } else if let channelPK = entry.countsOf {
                // A new message: its members connected here, with the counts read now.
                users = hub.connected(among: entry.users)
                if users.isEmpty { continue }
                let counted = await EventPublisher.readCounts(
                    in: channelPK, for: users, reading: counts, metrics: hub.metrics, logger: logger)
                event = event.counted(counted, for: users)
            }
            guard tracing, let traceparent = entry.traceparent else {
                hub.send(event, to: users)
                continue
            }
            let parent = TraceContext(traceparent: traceparent, tracestate: entry.tracestate)
            withSpan("ws.fanout", context: parent.serviceContext, ofKind: .consumer) { span in
                let connections = hub.send(event, to: users)
                span.attributes["messaging.system"] = "postgresql"
                span.attributes["messaging.destination.name"] = channel
                span.attributes["ticks.bus.from_node"] = batch.node
                span.attributes["ticks.event.recipients"] = users.count
                span.attributes["ticks.ws.connections"] = connections
            }
        }
    }

    /// What `entry` carries, as this node's sockets take it. Counts that do
    /// not match the users leave the frame whole, without them.
    static func event(of entry: Entry) -> EncodedEvent {
        var shared = ByteBuffer(string: entry.frame)
        var personal: EncodedEvent.Personal?
        if let channelPK = entry.countsOf, entry.frame.utf8.last == UInt8(ascii: "}") {
            shared.moveWriterIndex(to: shared.writerIndex - 1)
            personal = .countsToRead(channelPK: channelPK)
        } else if let counts = entry.counts, counts.count == entry.users.count * 3,
            entry.frame.utf8.last == UInt8(ascii: "}")
        {
            shared.moveWriterIndex(to: shared.writerIndex - 1)
            var byUser: [String: UnreadEnding] = [:]
            byUser.reserveCapacity(entry.users.count)
            for (index, user) in entry.users.enumerated() where byUser[user] == nil {
                byUser[user] = UnreadEnding(
                    channel: counts[3 * index], messages: counts[3 * index + 1], channels: counts[3 * index + 2])
            }
            personal = .counts(byUser)
        } else if let endings = entry.endings, endings.count == entry.users.count {
            personal = .endings(
                Dictionary(
                    zip(entry.users, endings.map { ByteBuffer(string: $0) }), uniquingKeysWith: { first, _ in first }))
        }
        let audience: ConnectionAudience =
            if let cid = entry.watchers { .watchers(cid) } else if let cid = entry.unwatched { .notWatching(cid) } else {
                .everyConnection
            }
        return EncodedEvent(shared: shared, personal: personal, audience: audience)
    }

    /// Closes every WebSocket of this node, so its clients reconnect and refresh what they may have missed.
    private func closeAll(_ hub: ConnectionHub, because reason: String, error: (any Error)? = nil) {
        let closed = hub.connectionCount
        hub.closeAll()
        var metadata: Logger.Metadata = ["reason": "\(reason)", "connections": "\(closed)"]
        if let error { metadata["error"] = "\(String(reflecting: error))" }
        logger.error("closed every WebSocket so clients refresh", metadata: metadata)
    }

    /// Deletes stored batches every node has had time to fetch.
    private func pruneStoredBatches() async {
        let seconds = Int64(Self.storedBatchLifetime.components.seconds)
        while !Task.isCancelled {
            do {
                try await time.sleep(for: .seconds(60))
                try await deadline.run { [pool, logger] in
                    try await pool.client.query(
                        "DELETE FROM event_batch WHERE created_at < now() - make_interval(secs => \(seconds))",
                        logger: logger)
                }
            } catch is CancellationError {
                return
            } catch {
                logger.warning("could not prune stored event batches", metadata: ["error": "\(error)"])
            }
        }
    }
}

enum PostgresEventBusError: Error {
    case storeFailed
    case listenerEnded
    case storedBatchGone(Int64)
}

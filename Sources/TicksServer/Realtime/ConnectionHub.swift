import Foundation
import Logging
import Synchronization
import TicksProtocol

/// The open WebSocket connections, by user (a user may have several devices).
///
/// Sending never waits for a client: each connection has its own buffer,
/// bounded in bytes, and a connection whose buffer would pass the bound is
/// closed (it reconnects and refreshes its state). Frames in the buffers share
/// their bytes (`OutboundFrame`), so an event to many connections costs one
/// encoding, not one per connection.
public final class ConnectionHub: Sendable {
    /// One connection's outbound side.
    final class Outbox: Sendable {
        let id: String
        let userID: String
        let continuation: AsyncStream<OutboundFrame>.Continuation
        /// Bytes queued and not yet taken by the connection's writer.
        let queuedBytes = Atomic<Int>(0)
        /// Set when the buffer overflowed.
        let overflowed = Atomic<Bool>(false)
        /// Ends when the buffer overflowed (or the connection is gone): the
        /// connection's handler then drops the socket at once, even while its
        /// writer is stuck on a client that does not read.
        let overflow: AsyncStream<Void>
        private let overflowContinuation: AsyncStream<Void>.Continuation

        /// The channels (cids) this connection watches: Stream's query with
        /// `watch: true` and its `connection_id`. Nil until it first watches
        /// one: until then it hears every channel event of its user's
        /// channels, as every connection did before watching (TicksClient,
        /// the web demo, `ticks-chat`; docs/events.md, "Watching").
        let watched = Mutex<Set<String>?>(nil)

        var isOverflowed: Bool { overflowed.load(ordering: .relaxed) }

        /// How many channels it watches.
        var watchCount: Int { watched.withLock { $0?.count ?? 0 } }

        /// Whether an event for `audience` goes to this connection.
        func hears(_ audience: ConnectionAudience) -> Bool {
            switch audience {
            case .everyConnection: true
            case .watchers(let cid): watched.withLock { $0?.contains(cid) ?? true }
            case .notWatching(let cid): watched.withLock { $0.map { !$0.contains(cid) } ?? false }
            }
        }

        init(id: String, userID: String, continuation: AsyncStream<OutboundFrame>.Continuation) {
            self.id = id
            self.userID = userID
            self.continuation = continuation
            (overflow, overflowContinuation) = AsyncStream.makeStream(of: Void.self)
        }

        /// Marks the connection as fallen behind; true the first time.
        func markOverflowed() -> Bool {
            let first = !overflowed.exchange(true, ordering: .relaxed)
            finish()
            return first
        }

        /// The writer took `frame` out of the buffer.
        func taken(_ frame: OutboundFrame) {
            queuedBytes.subtract(ConnectionHub.cost(of: frame), ordering: .relaxed)
        }

        func finish() {
            continuation.finish()
            overflowContinuation.finish()
        }
    }

    /// Why a connection could not be registered.
    enum RegistrationError: Error, Equatable {
        case tooManyConnections(limit: Int)
        /// The node is shutting down (`shutDown`): it takes no new connection.
        case shuttingDown
    }

    private let connections = Mutex<[String: [String: Outbox]]>([:])
    /// Set by `shutDown`, under `connections`' lock, so a connection registers before it (and is
    /// closed by it) or is refused.
    private let closing = Atomic<Bool>(false)
    /// Told of each unregistering while `shutDown` waits for the last connection to end.
    private let unregistered = Mutex<AsyncStream<Void>.Continuation?>(nil)
    /// How many bytes may wait for one connection before it is closed as too slow.
    public let bufferBytes: Int
    /// How many connections one user may hold at once.
    public let maxConnectionsPerUser: Int
    let metrics: ServerMetrics
    private let logger: Logger
    /// Connections closed as too slow since the start (`GET /admin/status`; the metric counts them too).
    let slowClosed = Atomic<Int>(0)

    init(bufferBytes: Int, maxConnectionsPerUser: Int, metrics: ServerMetrics, logger: Logger) {
        self.bufferBytes = bufferBytes
        self.maxConnectionsPerUser = maxConnectionsPerUser
        self.metrics = metrics
        self.logger = logger
    }

    /// What a queued frame counts against its buffer: the memory its bytes
    /// hold and the bookkeeping around them, so many tiny frames are bounded too.
    static func cost(of frame: OutboundFrame) -> Int { frame.allocatedBytes + 64 }

    /// Registers a connection; its frames arrive on the returned stream.
    /// Throws when the user already holds `maxConnectionsPerUser` connections.
    func register(userID: String) throws(RegistrationError) -> (outbox: Outbox, frames: AsyncStream<OutboundFrame>) {
        // Unbounded for the stream itself: `enqueue` bounds it in bytes.
        let (frames, continuation) = AsyncStream.makeStream(of: OutboundFrame.self, bufferingPolicy: .unbounded)
        let outbox = Outbox(id: UUID().uuidString.lowercased(), userID: userID, continuation: continuation)
        let refusal = connections.withLock { all -> RegistrationError? in
            guard !closing.load(ordering: .relaxed) else { return .shuttingDown }
            guard all[userID, default: [:]].count < maxConnectionsPerUser else {
                return .tooManyConnections(limit: maxConnectionsPerUser)
            }
            all[userID, default: [:]][outbox.id] = outbox
            return nil
        }
        if let refusal {
            continuation.finish()
            throw refusal
        }
        metrics.connections.increment()
        return (outbox, frames)
    }

    func unregister(_ outbox: Outbox) {
        let removed = connections.withLock { all -> Bool in
            let removed = all[outbox.userID]?.removeValue(forKey: outbox.id) != nil
            if all[outbox.userID]?.isEmpty == true { all[outbox.userID] = nil }
            return removed
        }
        outbox.finish()
        if removed { metrics.connections.decrement() }
        unregistered.withLock { _ = $0?.yield() }
    }

    /// Queues `event` for the connections of `userIDs` in its audience
    /// (`EncodedEvent.audience`); returns how many connections got it.
    @discardableResult
    public func send(_ event: EncodedEvent, to userIDs: some Sequence<String>) -> Int {
        let targets = connections.withLock { all in userIDs.flatMap { all[$0].map { Array($0.values) } ?? [] } }
        var delivered = 0
        var bytes = 0
        for outbox in targets where outbox.hears(event.audience) {
            guard let frame = event.frame(for: outbox.userID) else { continue }
            if enqueue(frame, on: outbox) {
                delivered += 1
                bytes += frame.byteCount
            }
        }
        metrics.framesSent.increment(by: delivered)
        metrics.bytesSent.increment(by: bytes)
        return delivered
    }

    /// Queues a frame for one connection. A buffer that would pass its bound closes the connection.
    @discardableResult
    func enqueue(_ frame: OutboundFrame, on outbox: Outbox) -> Bool {
        let cost = Self.cost(of: frame)
        let queued = outbox.queuedBytes.add(cost, ordering: .relaxed).newValue
        guard queued <= bufferBytes else {
            outbox.queuedBytes.subtract(cost, ordering: .relaxed)
            if outbox.markOverflowed() {
                logger.warning(
                    "closing a connection that fell behind",
                    metadata: [
                        "user_id": "\(outbox.userID)", "connection_id": "\(outbox.id)",
                        "queued_bytes": "\(queued - cost)",
                    ])
                metrics.slowConnectionsClosed.increment()
                slowClosed.add(1, ordering: .relaxed)
            }
            return false
        }
        switch outbox.continuation.yield(frame) {
        case .enqueued:
            return true
        case .terminated, .dropped:
            outbox.queuedBytes.subtract(cost, ordering: .relaxed)
            return false
        @unknown default:
            return false
        }
    }

    // MARK: Watching

    /// Why a watch was not started.
    enum WatchRefusal: Error, Equatable {
        /// No connection of that id and user on this node (it may be on another).
        case unknownConnection
        /// The user's connections on this node watch `limit` channels already, all together.
        case tooMany(limit: Int)
    }

    /// Makes connection `connectionID` of `userID` a watcher of `cid`: from
    /// now on it hears that channel's events, and `notification.message_new`
    /// for the channels it does not watch.
    /// Returns how to take this watch back (`unwatch`), nil when it changed nothing.
    /// The user's connections here watch at most `maxWatchedChannelsPerUser` channels
    /// together: counted under the hub's lock, so that two watches at once on two
    /// of the user's connections cannot both pass the bound.
    @discardableResult
    func watch(_ cid: String, connectionID: String, userID: String) throws(WatchRefusal) -> WatchStarted? {
        let limit = ServerLimits.maxWatchedChannelsPerUser
        let outcome = connections.withLock { all -> Result<WatchStarted?, WatchRefusal> in
            guard let outboxes = all[userID], let outbox = outboxes[connectionID] else {
                return .failure(.unknownConnection)
            }
            let byOthers = outboxes.values.reduce(0) { $1 === outbox ? $0 : $0 + $1.watchCount }
            return outbox.watched.withLock { watched in
                guard watched?.contains(cid) != true else { return .success(nil) }
                guard byOthers + (watched?.count ?? 0) < limit else { return .failure(.tooMany(limit: limit)) }
                let started = WatchStarted(
                    cid: cid, connectionID: connectionID, userID: userID, firstWatch: watched == nil)
                if watched == nil { watched = [cid] } else { watched?.insert(cid) }  // in place, no copy
                return .success(started)
            }
        }
        return try outcome.get()
    }

    /// A watch `watch` started, to take back when the request that asked for it fails.
    struct WatchStarted: Sendable, Equatable {
        let cid: String
        let connectionID: String
        let userID: String
        /// The connection had never watched: taken back, it hears every channel again.
        let firstWatch: Bool
    }

    /// Takes back a watch this node started, as if it had never been asked for.
    func unwatch(_ started: WatchStarted) {
        guard let outbox = connections.withLock({ $0[started.userID]?[started.connectionID] }) else { return }
        outbox.watched.withLock { watched in
            _ = watched?.remove(started.cid)
            if started.firstWatch, watched?.isEmpty == true { watched = nil }
        }
    }

    /// Takes back watches this node started for one request, newest first: a connection whose first
    /// watch is among them is left as it was, hearing every channel (a channel list that fails part way).
    func unwatch(_ started: [WatchStarted]) {
        for watch in started.reversed() { unwatch(watch) }
    }

    /// The channels connection `connectionID` of `userID` watches here: nil when it never watched
    /// (it hears every channel) or is not here.
    func watchedChannels(connectionID: String, userID: String) -> Set<String>? {
        connections.withLock { $0[userID]?[connectionID] }?.watched.withLock { $0 }
    }

    /// Stops connection `connectionID` of `userID` watching `cid`; false when no such connection is here.
    /// It stays a watching connection: the channel's new messages now reach it as notifications.
    /// A connection that never watched any channel is left as it is.
    @discardableResult
    func stopWatching(_ cid: String, connectionID: String, userID: String) -> Bool {
        guard let outbox = connections.withLock({ $0[userID]?[connectionID] }) else { return false }
        // A connection that never watched stays one: it hears every channel, this one too.
        outbox.watched.withLock { _ = $0?.remove(cid) }
        return true
    }

    /// A watch started or stopped on another node for a connection of this
    /// one (`EventBus.watch`); nothing when the connection is not here.
    func apply(_ change: WatchChange) {
        guard change.watching else {
            stopWatching(change.cid, connectionID: change.connection, userID: change.user)
            return
        }
        do throws(WatchRefusal) {
            _ = try watch(change.cid, connectionID: change.connection, userID: change.user)
        } catch {
            switch error {
            case .unknownConnection:
                break  // another node's, or gone
            case .tooMany(let limit):
                logger.warning(
                    "a connection watches too many channels; a watch from another node was not started",
                    metadata: ["connection_id": "\(change.connection)", "limit": "\(limit)"])
            }
        }
    }

    /// Those of `userIDs` with a connection here that hears `cid`'s channel
    /// events (one that watches it, or one that never watched any): Stream's
    /// `watchers`, and `watcher_count` is their number.
    public func watchers(of cid: String, among userIDs: some Sequence<String>) -> [String] {
        connections.withLock { all in
            userIDs.filter { user in all[user]?.values.contains { $0.hears(.watchers(cid)) } ?? false }
        }
    }

    /// Whether any of `userIDs` has a connection to this node (in `audience`).
    func anyConnected(among userIDs: some Sequence<String>, hearing audience: ConnectionAudience = .everyConnection)
        -> Bool
    {
        connections.withLock { all in
            userIDs.contains { user in all[user]?.values.contains { $0.hears(audience) } ?? false }
        }
    }

    /// Those of `userIDs` with a connection to this node, in their order (each once).
    func connected(among userIDs: [String]) -> [String] {
        connections.withLock { all in
            var seen = Set<String>()
            return userIDs.filter { all[$0] != nil && seen.insert($0).inserted }
        }
    }

    /// Every user with a connection to this node, when there are at most `limit` of them; nil
    /// when there are more (a message to every member of a channel of `limit` members reads
    /// the members' counts rather than look each connected user up: `EventPublisher.membersHere`).
    func connectedUsers(upTo limit: Int) -> [String]? {
        connections.withLock { all in
            guard all.count <= limit else { return nil }
            return all.compactMap { $0.value.isEmpty ? nil : $0.key }
        }
    }

    /// Those of `userIDs` with no connection to this node (the push hook's recipients).
    func unconnected(among userIDs: [String]) -> [String] {
        connections.withLock { all in userIDs.filter { all[$0] == nil } }
    }

    /// The number of open connections.
    public var connectionCount: Int { connections.withLock { $0.values.reduce(0) { $0 + $1.count } } }

    /// Users with at least one connection here.
    var connectedUserCount: Int { connections.withLock { $0.values.count { !$0.isEmpty } } }

    /// Connections closed as too slow since the start.
    var slowClosedCount: Int { slowClosed.load(ordering: .relaxed) }

    /// Graceful shutdown, before the HTTP server's own: takes no new connection, ends every
    /// open one (each closes with 1011, so Stream's clients come back, to another node or to
    /// this one once it is up again, where the HTTP server's shutdown would close them with
    /// 1000, which those clients take as final), and waits until each has closed, or `limit`
    /// on `time` has passed. Returns whether every connection closed in time.
    @discardableResult
    func shutDown(within limit: Duration, time: TimeSource) async -> Bool {
        let (ended, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        unregistered.withLock { $0 = continuation }
        defer {
            unregistered.withLock { $0 = nil }
            continuation.finish()
        }
        connections.withLock { _ in closing.store(true, ordering: .relaxed) }
        closeAll()
        return await time.holds(within: limit) { [self] in
            if connectionCount == 0 { return true }
            for await _ in ended where connectionCount == 0 { return true }
            return false
        }
    }

    /// Ends every connection's frame stream (graceful shutdown, or a node that may have missed events).
    func closeAll() {
        let all = connections.withLock { $0.values.flatMap(\.values) }
        for outbox in all { outbox.finish() }
    }

    /// Ends the connections of `userIDs`, so their clients reconnect and
    /// refresh (they may have missed an event); returns how many were closed.
    @discardableResult
    func close(usersOf userIDs: some Sequence<String>) -> Int {
        let targets = connections.withLock { all in userIDs.flatMap { all[$0].map { Array($0.values) } ?? [] } }
        for outbox in targets { outbox.finish() }
        return targets.count
    }
}

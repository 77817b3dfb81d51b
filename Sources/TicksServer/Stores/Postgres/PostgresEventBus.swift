import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization
import TicksProtocol

/// The event bus of several nodes on one PostgreSQL database, with no broker
/// but PostgreSQL itself: `NOTIFY` to publish, `LISTEN` to receive.
///
/// Frames queued by `publish` go out in order, several to a notification. A
/// notification carries at most 8,000 bytes, so a batch that would not fit is
/// stored in `event_batch` and the notification carries its id; nothing is cut.
///
/// The listener holds a connection of its own. When that connection drops,
/// notifications sent meanwhile are gone, so once it is back the node closes
/// every WebSocket it holds: the clients reconnect and refresh their state
/// (the SDK does that after every reconnect), and miss no receipt.
public final class PostgresEventBus: EventBus {
    /// Batches that did not fit a notification are kept this long for nodes to fetch.
    static let storedBatchLifetime: Duration = .seconds(600)
    /// What a notification may carry (PostgreSQL's limit is 8,000 bytes), with room to spare.
    static let payloadLimit = 7_900

    let client: PostgresClient
    let configuration: PostgresConnection.Configuration
    /// The notification channel: one per database schema, so stores in other schemas never hear it.
    let channel: String
    /// This node, so it skips its own notifications.
    let node = UUID().uuidString.lowercased()
    let logger: Logger
    /// Entries waiting to go out, oldest first, and a doorbell rung when some arrive.
    private let queued = Mutex<[Entry]>([])
    private let doorbell: AsyncStream<Void>
    private let ring: AsyncStream<Void>.Continuation
    /// Entries queued beyond this (the database unreachable for long) are dropped, oldest first.
    static let queueLimit = 100_000

    struct Entry: Codable, Sendable {
        var frame: String
        var users: [String]
    }

    struct Batch: Codable {
        var node: String
        var entries: [Entry]?
        /// Set instead of `entries` when the batch is in `event_batch`.
        var stored: Int64?
    }

    /// - Parameters:
    ///   - client: the store's connection pool, to fetch and prune stored batches.
    ///   - configuration: how to open the connections of its own (one to publish, one to listen).
    ///   - schema: the store's schema; it names the notification channel.
    public init(client: PostgresClient, configuration: PostgresConnection.Configuration, schema: String, logger: Logger) {
        self.client = client
        self.configuration = configuration
        self.channel = "ticks_events_" + schema.lowercased().filter { $0.isLetter || $0.isNumber || $0 == "_" }
        self.logger = logger
        (doorbell, ring) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    public func publish(_ frame: String, to userIDs: [String]) {
        guard !userIDs.isEmpty else { return }
        let overflow = queued.withLock { queue -> Int in
            queue.append(Entry(frame: frame, users: userIDs))
            let excess = max(queue.count - Self.queueLimit, 0)
            queue.removeFirst(excess)
            return excess
        }
        if overflow > 0 {
            logger.error(
                "event bus queue full: dropped the oldest events for the other nodes",
                metadata: ["dropped": "\(overflow)"])
        }
        ring.yield()
    }

    public func run(hub: ConnectionHub) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await self.sendQueued() }
            group.addTask { await self.listen(hub: hub) }
            group.addTask { await self.pruneStoredBatches() }
            try await group.next()
            group.cancelAll()
        }
    }

    // MARK: Sending

    /// Sends the queued entries in order, as few notifications as fit, on a
    /// connection of its own: through the store's pool, under load every
    /// notification waited behind the receipts queued for a connection, and
    /// the other nodes heard of events seconds late (BENCHMARKS.md).
    private func sendQueued() async {
        var connection: PostgresConnection?
        for await _ in doorbell {
            let round = queued.withLock { queue in
                defer { queue.removeAll(keepingCapacity: true) }
                return queue
            }
            guard !round.isEmpty else { continue }
            // A connection that failed is replaced and the round sent once more.
            for attempt in 1...2 {
                do {
                    if connection == nil {
                        connection = try await PostgresConnection.connect(
                            configuration: configuration, id: 2, logger: logger)
                    }
                    try await send(round, on: connection!)
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
        }
        if let connection { await close(connection) }
    }

    private func send(_ entries: [Entry], on connection: PostgresConnection) async throws {
        var batch: [Entry] = []
        var size = Self.batchOverhead
        for entry in entries {
            let entrySize = Self.encodedSize(of: entry)
            if !batch.isEmpty, size + entrySize > Self.payloadLimit {
                try await notify(batch, on: connection)
                batch.removeAll()
                size = Self.batchOverhead
            }
            batch.append(entry)
            size += entrySize
        }
        if !batch.isEmpty { try await notify(batch, on: connection) }
    }

    /// `{"node":"<uuid>","entries":[…]}` around the entries.
    static let batchOverhead = 64

    /// What `entry` takes in a batch's JSON: its frame is a JSON string there,
    /// so every `"` and `\` in it doubles (counting only the frame's bytes,
    /// batches overflowed into `event_batch` under ordinary load).
    static func encodedSize(of entry: Entry) -> Int {
        let escaped = entry.frame.utf8.count { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
        // {"frame":"…","users":["…",…]},
        return 24 + entry.frame.utf8.count + escaped + entry.users.reduce(0) { $0 + $1.utf8.count + 3 }
    }

    /// One notification for `entries`; if they do not fit after all, two
    /// halves; only an entry too large on its own goes through `event_batch`.
    private func notify(_ entries: [Entry], on connection: PostgresConnection) async throws {
        var payload = try JSONCoding.string(Batch(node: node, entries: entries))
        if payload.utf8.count > Self.payloadLimit, entries.count > 1 {
            try await notify(Array(entries[..<(entries.count / 2)]), on: connection)
            try await notify(Array(entries[(entries.count / 2)...]), on: connection)
            return
        }
        if payload.utf8.count > Self.payloadLimit {
            let body = payload
            guard
                let id = try await connection.query(
                    "INSERT INTO event_batch (body) VALUES (\(body)) RETURNING id", logger: logger
                ).collect().first?.makeRandomAccess()[0].decode(Int64.self)
            else { throw PostgresEventBusError.storeFailed }
            payload = try JSONCoding.string(Batch(node: node, stored: id))
        }
        try await connection.query("SELECT pg_notify(\(channel), \(payload))", logger: logger)
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

    /// Listens on a connection of its own; after it was lost, closes the local WebSockets (see above).
    private func listen(hub: ConnectionHub) async {
        var lostBefore = false
        var backoff = Duration.milliseconds(100)
        while !Task.isCancelled {
            do {
                let connection = try await PostgresConnection.connect(
                    configuration: configuration, id: 1, logger: logger)
                let ended: any Error
                do {
                    try await connection.listen(on: channel) { notifications in
                        if lostBefore {
                            let dropped = hub.connectionCount
                            hub.closeAll()
                            logger.warning(
                                "event bus listener is back; closed every WebSocket so clients refresh",
                                metadata: ["connections": "\(dropped)"])
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
                await close(connection)  // also when cancelled
                throw ended
            } catch is CancellationError {
                return
            } catch {
                if Task.isCancelled { return }
                lostBefore = true
                logger.error(
                    "event bus listener lost; reconnecting", metadata: ["error": "\(String(reflecting: error))"])
                do { try await Task.sleep(for: backoff) } catch { return }
                backoff = min(backoff * 2, .seconds(5))
            }
        }
    }

    private func deliver(_ payload: String, to hub: ConnectionHub) async {
        do {
            let batch = try JSONCoding.decode(Batch.self, from: payload)
            guard batch.node != node else { return }
            var entries = batch.entries ?? []
            if let id = batch.stored {
                guard
                    let body = try await client.query("SELECT body FROM event_batch WHERE id = \(id)", logger: logger)
                        .collect().first?.makeRandomAccess()[0].decode(String.self)
                else {
                    logger.error("a stored event batch is gone", metadata: ["id": "\(id)"])
                    return
                }
                entries = try JSONCoding.decode(Batch.self, from: body).entries ?? []
            }
            for entry in entries { hub.send(entry.frame, to: entry.users) }
        } catch {
            logger.error("could not read an event batch", metadata: ["error": "\(String(reflecting: error))"])
        }
    }

    /// Deletes stored batches every node has had time to fetch.
    private func pruneStoredBatches() async {
        let seconds = Int64(Self.storedBatchLifetime.components.seconds)
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: .seconds(60))
                try await client.query(
                    "DELETE FROM event_batch WHERE created_at < now() - make_interval(secs => \(seconds))",
                    logger: logger)
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
}

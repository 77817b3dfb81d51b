import Foundation
import TicksProtocol

/// Connecting as a user and staying connected: the socket's lifecycle,
/// reconnecting with backoff, and what follows every (re)connect.
extension ChatClient {
    /// The user the client is connected as (or connecting as).
    public var currentUserID: String? { session?.userID }

    public var connectionStatus: ConnectionStatus { status }

    /// The connection status now, then every change.
    public func connectionStatuses() -> AsyncStream<ConnectionStatus> {
        statusBroadcast.subscribe(startingWith: status)
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

    /// Keeps a socket open until cancelled or refused.
    private func runConnection(_ socket: EventSocket) async {
        var failures = 0
        while !Task.isCancelled {
            setStatus(.connecting)
            do {
                try await socket.run { event in await self.handle(event) }
                socketEnded()
                failures = 0
            } catch let error as TicksClientError where !error.isTransient {
                socketEnded()
                logger.error("the server refused the connection", metadata: ["error": "\(error)"])
                setStatus(.refused(error))
                return
            } catch is CancellationError {
                socketEnded()
                break
            } catch {
                socketEnded()
                logger.debug("could not connect", metadata: ["error": "\(error)"])
            }
            if Task.isCancelled { break }
            setStatus(.disconnected)
            failures += 1
            try? await time.sleep(for: configuration.reconnectBackoff.delay(after: failures))
        }
    }

    /// A socket ended, however: events may have been missed from now on, so the
    /// client is not caught up until the next connection's catch-up is done,
    /// and no event moves `syncedThrough` past what this one missed.
    private func socketEnded() {
        isCaughtUp = false
        socketsEnded += 1
    }

    /// After every (re)connect: send what waits in the outbox, catch up with
    /// what changed while away (`POST /sync` for every known channel, reloads
    /// where that cannot tell), and mark delivered what arrived meanwhile.
    func didConnect() {
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

    private func publishAll() {
        summaries = [:]
        for cid in channelBroadcasts.keys { publish(cid) }
        for query in lists.keys { publishList(query) }
    }

    // MARK: The session

    /// The connected session's HTTP API.
    func api() throws -> APIClient {
        guard let session else { throw TicksClientError.notConnected }
        return session.api
    }

    func connectedUserID() throws -> String {
        guard let session else { throw TicksClientError.notConnected }
        return session.userID
    }
}

import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOWebSocket
import TicksProtocol

/// `GET /connect`: the WebSocket a user's device holds open for events.
///
/// Like Stream, the upgrade always succeeds and the credentials are checked
/// afterwards: a refused connection gets one frame `{"error": {…}}` in
/// Stream's error format and is closed with code 1000, which Stream's
/// clients take as final (any other code makes them reconnect, with the
/// same refused credentials, for ever; code 40, an expired token, makes them
/// fetch a new one first). Only the rate limit
/// (`Connect`, counted by `RateLimitMiddleware` before the upgrade) refuses
/// the upgrade itself: HTTP 429 with code 9 and the `X-RateLimit-*` headers
/// (`WebSocketUpgradeResponder`).
struct ConnectController {
    let store: any TicksStore
    let hub: ConnectionHub
    let authority: TokenAuthority
    let limits: ServerLimits
    /// Receipts sent as frames (Ticks' extension) go where HTTP's go.
    let receipts: Receipts
    /// Counts receipts sent as frames against the same limits as HTTP's; nil with rate limits off.
    let rateLimiter: RateLimiter?
    /// The bus to the other nodes (nil: one node). A connection says hello only once it listens,
    /// waiting up to `listenWait` on `time` (then 1011, and the client comes back).
    let bus: (any EventBus)?
    let listenWait: Duration
    let time: TimeSource
    let logger: Logger

    /// Registered outside the authenticated group: `run` authenticates.
    func addRoutes(to router: Router<TicksRequestContext>) {
        router.ws(
            APIEndpoint.connect.routerPaths[0],
            onUpgrade: { inbound, outbound, context in
                let session: ConnectParameters
                let registration: (outbox: ConnectionHub.Outbox, frames: AsyncStream<OutboundFrame>)
                do {
                    session = try await self.session(context.request)
                    registration = try register(session.userID)
                } catch let dropped as ConnectionDropped {
                    throw dropped  // the node shuts down: 1011, and the client comes back
                } catch {
                    try await refuse(outbound, error: error)
                    return
                }
                defer { hub.unregister(registration.outbox) }
                try await run(session, registration, inbound: inbound, outbound: outbound)
            })
    }

    struct ConnectParameters: Decodable {
        var userID: String
        var userDetails: User?

        enum CodingKeys: String, CodingKey {
            case userID = "user_id"
            case userDetails = "user_details"
        }
    }

    /// Checks the connect request: the api_key, a user token, and `json.user_id` naming the same user.
    func session(_ request: Request) async throws -> ConnectParameters {
        let grant = try await AuthMiddleware(authority: authority).authenticate(request)
        guard case .user(let tokenUser) = grant.principal else {
            throw APIError.forbidden("connect with a user token, not a server token")
        }
        guard grant.deliveryOnly == nil else {
            throw APIError.forbidden("a delivery-only token cannot connect: it may only mark messages delivered")
        }
        guard let json = request.queryParameter("json") else {
            throw APIError.input("json is required: ?json={\"user_id\": \"...\"}")
        }
        let parameters: ConnectParameters
        do {
            parameters = try JSONDecoder().decode(ConnectParameters.self, from: Data(json.utf8))
        } catch let error as DecodingError {
            throw APIError.input("json: \(error.readableDescription)")
        }
        try requireValidID(parameters.userID, "user_id")
        guard parameters.userID == tokenUser else {
            throw APIError.forbidden("the token is for '\(tokenUser)', not '\(parameters.userID)'")
        }
        if let details = parameters.userDetails {
            try UserInput.validate(details, limits: limits)
        }
        return parameters
    }

    /// A place in the hub, unless the user holds every connection they may.
    func register(_ userID: String) throws -> (outbox: ConnectionHub.Outbox, frames: AsyncStream<OutboundFrame>) {
        do {
            return try hub.register(userID: userID)
        } catch .tooManyConnections(let limit) {
            throw APIError.rateLimited("user '\(userID)' already holds \(limit) connections, the most one user may")
        } catch .shuttingDown {
            throw ConnectionDropped()
        }
    }

    struct ErrorFrame: Encodable {
        var error: APIErrorBody
    }

    /// Stream's answer to a refused connection: the error as the only frame, then close.
    func refuse(_ outbound: WebSocketOutboundWriter, error: any Error) async throws {
        let apiError = StreamErrorMiddleware.apiError(for: error)
        logger.debug("connection refused", metadata: ["error": "\(apiError)"])
        let body = APIErrorBody(apiError)
        try await outbound.write(.text(try JSONCoding.string(ErrorFrame(error: body))))
        try await outbound.close(.normalClosure, reason: String(apiError.message.prefix(100)))
    }

    func run(
        _ session: ConnectParameters,
        _ registration: (outbox: ConnectionHub.Outbox, frames: AsyncStream<OutboundFrame>),
        inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter
    ) async throws {
        let (outbox, frames) = registration
        let userID = session.userID
        let logger = logger.with(["user_id": "\(userID)", "connection_id": "\(outbox.id)"])

        // Receipts sent as frames wait here for the one task that runs them, in the order sent
        // (a device's marks must reach the store in order), so the reader never waits on the
        // store: it goes on reading, and so answering pings, while a write is slow. A client
        // that sends faster than its receipts are written finds the queue full and gets
        // each further receipt refused (429) until it has room.
        let (receipts, queue) = AsyncStream.makeStream(
            of: SocketReceipt.Request.self, bufferingPolicy: .bufferingOldest(Self.receiptsWaitingPerSocket))
        // Each task returns whether the client ended the connection (only the reader does).
        let clientLeft = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                // The first frame, written before the buffer is drained: the connection was
                // registered before the look-ups (so no event is missed), and events published
                // meanwhile wait in its buffer behind this health.check, as Stream's clients expect.
                // The reader below runs already, so a slow look-up does not leave the client's
                // pings unanswered (the server's own ping closed such a connection before its hello).
                // Not before the node hears the other nodes: what they published until then would
                // never reach this connection, while its client, having had its hello, takes it as
                // current. Before the hello a client has not synced yet (the node's first LISTEN;
                // once the listener is lost, `PostgresEventBus` closes the connections when it is
                // back).
                guard await hearsOtherNodes() else {
                    logger.warning("connection dropped: the event bus did not listen in time")
                    throw ConnectionDropped()
                }
                let hello = try await hello(for: session, connectionID: outbox.id)
                try await outbound.write(.custom(WebSocketFrame(fin: true, opcode: .text, data: hello.buffer)))
                logger.debug("connected")
                for await frame in frames {
                    outbox.taken(frame)
                    try await outbound.write(.custom(WebSocketFrame(fin: true, opcode: .text, data: frame.buffer)))
                }
                return false
            }
            group.addTask {
                for await request in receipts {
                    let ack = await acknowledge(request, from: userID)
                    hub.enqueue(OutboundFrame(try JSONCoding.string(ack)), on: outbox)
                }
                return true  // its queue ends only when the reader's does: the client left
            }
            group.addTask {
                defer { queue.finish() }
                for try await message in inbound.messages(maxSize: limits.maxInboundFrameBytes) {
                    guard case .text(let text) = message else { continue }
                    if let request = SocketReceipt.request(in: text) {
                        if case .dropped = queue.yield(request) {
                            hub.enqueue(OutboundFrame(try JSONCoding.string(Self.refused(request))), on: outbox)
                        }
                    } else if text.contains("health.check") {
                        var pong = Event(type: .healthCheck, createdAt: .now())
                        pong.connectionID = outbox.id
                        hub.enqueue(OutboundFrame(try JSONCoding.string(pong)), on: outbox)
                    }
                }
                return true
            }
            group.addTask {
                // Ends on overflow, shutdown or unregistering.
                for await _ in outbox.overflow {}
                return false
            }
            // Whichever ends first ends the connection: the client left, the
            // server is shutting down, or the client fell behind. A writer
            // stuck on a client that does not read is cancelled here.
            let clientLeft = try await group.next() ?? true
            group.cancelAll()
            return clientLeft
        }
        if outbox.isOverflowed {
            logger.info("dropped a connection that fell behind")
        }
        logger.debug("disconnected")
        // The server ended it (the client fell behind, the server shuts down, a node missed
        // events): the handler's error makes the close 1011, not 1000, which Stream's clients
        // take as final; on any other code they reconnect and recover their state.
        if !clientLeft { throw ConnectionDropped() }
    }

    /// A connection the server ended, or one that came while the node shuts down; its close
    /// code is 1011 (`run`).
    struct ConnectionDropped: Error {}
}

extension ConnectController {
    /// Whether the node hears the other nodes, waiting up to `listenWait` for it (true at
    /// once without a bus).
    func hearsOtherNodes() async -> Bool {
        guard let bus, !bus.status.listening else { return true }
        return await time.holds(within: listenWait) {
            await bus.untilListening()
            return true
        }
    }

    /// The first frame: `health.check` with the connection's id and `me`, the
    /// user (made on first connect, like Stream) with their unread counts.
    func hello(for session: ConnectParameters, connectionID: String) async throws -> OutboundFrame {
        let userID = session.userID
        var user = try await store.users(ids: [userID])[userID]
        if user == nil {
            // Like Stream, connecting creates a user that does not exist yet;
            // its details never set a role (only a server token may).
            var details = session.userDetails ?? User(id: userID)
            details.id = userID
            details.role = nil
            user = try await store.upsertUsers([details], now: .now()).first
        }
        let counts = try await store.unreadCounts(of: [userID])[userID]
        var hello = Event(type: .healthCheck, createdAt: .now())
        hello.connectionID = connectionID
        hello.me = OwnUser(
            user: user ?? User(id: userID), totalUnreadCount: counts?.totals.messages ?? 0,
            unreadChannels: counts?.totals.channels ?? 0, unreadThreads: counts?.threads.count ?? 0)
        return OutboundFrame(try JSONCoding.string(hello))
    }

    /// Receipts a socket may have waiting to be written; past it, each further one is refused.
    static let receiptsWaitingPerSocket = 64

    /// The ack of a receipt refused because too many of its socket's wait.
    static func refused(_ request: SocketReceipt.Request) -> SocketReceipt.Ack {
        var ack = SocketReceipt.Ack(requestID: request.requestID, createdAt: .now())
        ack.error = APIErrorBody(
            APIError.rateLimited(
                "\(receiptsWaitingPerSocket) receipts of this connection are waiting to be written: send this one again once they are acknowledged"))
        return ack
    }

    /// Runs a receipt a client sent on its socket, as its user, with HTTP's
    /// checks and limits; the ack carries the request's id, and the event
    /// (mark read) or Stream's error body.
    func acknowledge(_ request: SocketReceipt.Request, from userID: String) async -> SocketReceipt.Ack {
        var ack = SocketReceipt.Ack(requestID: request.requestID, createdAt: .now())
        do {
            let endpoint: APIEndpoint = request.type == .markRead ? .markRead : .markDelivered
            if let rateLimiter, case let decision = rateLimiter.check(endpoint, by: .user(userID)), !decision.allowed {
                hub.metrics.rateLimited(endpoint).increment()
                throw decision.refusal(of: endpoint)
            }
            switch request.type {
            case .markRead:
                guard let cid = request.cid.flatMap(ChannelID.init(cid:)) else {
                    throw APIError.input("cid is required and is type:id")
                }
                ack.event = try await receipts.markRead(userID, in: cid, upTo: request.messageID)
            case .markDelivered:
                try await receipts.markDelivered(userID, request.latestDeliveredMessages ?? [])
            }
        } catch {
            let apiError = StreamErrorMiddleware.apiError(for: error)
            // A 503 (the store away) is the store's health to tell, once (`StoreHealth`), not each receipt's.
            if apiError.status.code >= 500, apiError.status != .serviceUnavailable {
                logger.error("a receipt on a socket failed", metadata: ["error": "\(String(reflecting: error))"])
            }
            ack.error = APIErrorBody(apiError)
        }
        hub.metrics.socketReceipt(request.type, refused: ack.error != nil).increment()
        return ack
    }
}

extension Logger {
    func with(_ metadata: Logger.Metadata) -> Logger {
        var copy = self
        for (key, value) in metadata { copy[metadataKey: key] = value }
        return copy
    }
}

import Hummingbird
import TicksProtocol

/// docs/api.md, "Watching": a connection that watches a channel hears its
/// events; the others of its user hear `notification.message_new` instead
/// (docs/events.md, "Watching"). A query with `watch: true` starts a watch
/// (`ChannelsController.watching`); this file stops one.
extension ChannelsController {
    /// `POST /channels/{type}/{id}/stop-watching?connection_id=…`: the
    /// connection no longer hears the channel's events, only its
    /// notifications. For the caller's own connection; one that is not
    /// watching, or gone, changes nothing. The channel is not looked up: a
    /// user removed from a channel, or whose channel was deleted, can still
    /// end a watch that holds one of their `maxWatchedChannelsPerUser`, and
    /// the answer (200 for any well-formed cid) tells nothing of the channel.
    struct StopWatchingRequest: Decodable {
        var connectionID: String?

        enum CodingKeys: String, CodingKey {
            case connectionID = "connection_id"
        }
    }

    @Sendable func stopWatching(_ request: Request, context: TicksRequestContext) async throws -> Response {
        var request = request
        let body = try await request.decodeJSON(StopWatchingRequest.self)
        guard let connection = try connectionID(of: request, body: body.connectionID) else {
            throw APIError.input("connection_id is required (in the query or the body): the connection that stops watching")
        }
        let cid = try channelPath(context)
        guard case .user(let user) = try context.requirePrincipal() else {
            throw APIError.input("stop-watching takes a user token: a connection belongs to its user")
        }
        try events.watch(WatchChange(connection: connection, user: user, cid: cid.description, watching: false))
        return try context.respond(Empty())
    }
}
